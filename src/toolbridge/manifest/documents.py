"""The manifest's document models, for the packages that build live objects from them.

The gateway builds its upstreams, limits and permissions from a `Gateway` document and the
`Ai.ToolProvider` / `Limits` / `Permissions` parts it names, and checks authorization-server
endpoints the way the analyzer does; a batch worker finds the `Secrets` document's sources; the
CLI serves an `HttpServer.Server` document's mounted endpoint.
They import the models from here, never from the manifest's private kind modules (`_kinds`,
`_kinds_gateway`), which define them. These are the parsed forms of the YAML: their fields
follow docs/manifests.md and change with it.
"""

from __future__ import annotations

from ._kinds import HttpClientDoc, Limits, Permissions, SecretsDoc, ToolProviderDoc
from ._kinds_gateway import GatewayDoc, endpoint_problem
from ._kinds_mcp_server import HttpServerDoc

__all__ = [
    "GatewayDoc",
    "HttpClientDoc",
    "HttpServerDoc",
    "Limits",
    "Permissions",
    "SecretsDoc",
    "ToolProviderDoc",
    "endpoint_problem",
]
