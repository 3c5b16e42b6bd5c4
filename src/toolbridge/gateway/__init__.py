"""`toolbridge gateway`: MCP servers, declared tools and task tools served as one governed MCP server.

A `Gateway` manifest document names the sources (`toolProviders` with prefixes, include/exclude,
effects, capabilities and approval; declared `tools`; `tasks`), the `runtime` (grants, limits,
journal), the `lock` (pinning) and the `clients` (identities). `open_gateway(path)` builds it;
`serve_stdio` / `serve_http` serve it with the official SDK's server (both protocol eras);
`client_config` writes a desktop client's config for it.
Over HTTP, clients are known by secret bearer tokens or, in OAuth resource-server mode
(`OAuthSettings`, `OAuthGate`), by access tokens verified by JWT/JWKS or introspection.
See docs/gateway.md.
"""

from __future__ import annotations

from ._build import OpenGateway, open_gateway
from ._core import GatewayCore, Identity
from ._oauth import (
    AuthUnavailable,
    IntrospectionVerifier,
    JwtVerifier,
    OAuthSettings,
    OAuthVerifier,
    TokenRejected,
)
from ._oauth_gate import ClientRule, OAuthGate
from ._server import create_server, serve_http, serve_stdio
from ._start import client_config, config_hint, http_only_secret, listening_url

__all__ = [
    "AuthUnavailable",
    "ClientRule",
    "GatewayCore",
    "Identity",
    "IntrospectionVerifier",
    "JwtVerifier",
    "OAuthGate",
    "OAuthSettings",
    "OAuthVerifier",
    "OpenGateway",
    "TokenRejected",
    "client_config",
    "config_hint",
    "create_server",
    "http_only_secret",
    "listening_url",
    "open_gateway",
    "serve_http",
    "serve_stdio",
]
