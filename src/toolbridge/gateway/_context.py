"""The request context the gateway's MCP handlers receive, as the SDK types it.

`ctx.request` is the HTTP request (Starlette) a Streamable HTTP message came in with, or None on
stdio; `ctx.session` is the client's `ServerSession`. The gateway's server keeps no lifespan
state of its own (the SDK's default lifespan: an empty dict).
"""

from __future__ import annotations

from typing import TypeAlias

from mcp.server.context import ServerRequestContext
from starlette.requests import Request

__all__ = ["GatewayContext"]

GatewayContext: TypeAlias = ServerRequestContext[dict[str, object], Request]
"""What each request handler of the gateway's `Server` is given (`mcp.server.context`)."""
