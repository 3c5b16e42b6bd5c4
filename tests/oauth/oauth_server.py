"""A small OAuth-protected MCP server for the OAuth tests: resource server and authorization server in one.

Run: `python oauth_server.py PORT`. It serves, on 127.0.0.1:PORT:

- `/mcp`: an `MCPServer` (tool `whoami`, answering with the access token it was called with) behind
  a bearer check; without a valid token it answers 401 with `WWW-Authenticate: Bearer
  resource_metadata=...` (RFC 9728);
- `/.well-known/oauth-protected-resource[/mcp]` and `/.well-known/oauth-authorization-server`;
- `/register` (dynamic registration, public clients), `/authorize` (approves at once: 302 to the
  redirect URI with `code` and `state`), `/token` (authorization code with PKCE S256, and refresh
  tokens; access tokens live 2 seconds);
- `/grants`: the grant types the token endpoint saw, in order (for the test to check);
- `/narrow/mcp`: a resource whose every request, even with a valid token, is refused with
  `403` and `WWW-Authenticate: Bearer error="insufficient_scope"` (a step-up that never helps).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
BASE = f"http://127.0.0.1:{PORT}"
TOKEN_LIFETIME = 2

codes: dict[str, dict[str, str]] = {}
access_tokens: set[str] = set()
refresh_tokens: set[str] = set()
grants: list[str] = []

mcp = MCPServer("oauth-demo")


@mcp.tool()
def whoami(ctx: Context) -> str:
    """Say which access token the call carried."""
    request = ctx.request_context.request
    header = request.headers.get("authorization", "") if request is not None else ""
    return header.removeprefix("Bearer ")


async def prm(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})


async def narrow_prm(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/narrow/mcp", "authorization_servers": [BASE]})


async def asm(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "registration_endpoint": f"{BASE}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }
    )


async def register(request: Request) -> Response:
    body = await request.json()
    return JSONResponse(
        {
            "client_id": "client-" + secrets.token_hex(4),
            "redirect_uris": body.get("redirect_uris", []),
            "grant_types": body.get("grant_types", ["authorization_code", "refresh_token"]),
            "token_endpoint_auth_method": "none",
        },
        status_code=201,
    )


async def authorize(request: Request) -> Response:
    q = request.query_params
    if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
        return JSONResponse({"error": "invalid_request"}, status_code=400)
    code = secrets.token_hex(8)
    codes[code] = {"challenge": q["code_challenge"], "redirect_uri": q["redirect_uri"]}
    return RedirectResponse(f"{q['redirect_uri']}?code={code}&state={q.get('state', '')}", status_code=302)


def _issue() -> dict[str, Any]:
    access, refresh = "at-" + secrets.token_hex(6), "rt-" + secrets.token_hex(6)
    access_tokens.add(access)
    refresh_tokens.add(refresh)
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": TOKEN_LIFETIME,
        "refresh_token": refresh,
    }


async def token(request: Request) -> Response:
    form = await request.form()
    grant = str(form.get("grant_type"))
    grants.append(grant)
    if grant == "authorization_code":
        entry = codes.pop(str(form.get("code")), None)
        verifier = str(form.get("code_verifier", ""))
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if entry is None or digest != entry["challenge"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(_issue())
    if grant == "refresh_token":
        old = str(form.get("refresh_token"))
        if old not in refresh_tokens:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        refresh_tokens.discard(old)
        return JSONResponse(_issue())
    return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)


async def grant_log(request: Request) -> Response:
    return JSONResponse(grants)


class BearerGate:
    """ASGI middleware: `/mcp` needs a known access token."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/narrow"):
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            metadata = f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/narrow/mcp"'
            if auth.removeprefix("Bearer ") in access_tokens:
                status, challenge = 403, f'Bearer error="insufficient_scope", scope="admin", {metadata}'
            else:
                status, challenge = 401, f"Bearer {metadata}"
            headers = {"WWW-Authenticate": challenge}
            response = JSONResponse({"error": "no"}, status_code=status, headers=headers)
            await response(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            if auth.removeprefix("Bearer ") not in access_tokens:
                challenge = f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
                response = JSONResponse(
                    {"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": challenge}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


mcp_app = mcp.streamable_http_app()
app = Starlette(
    routes=[
        Route("/.well-known/oauth-protected-resource/mcp", prm),
        Route("/.well-known/oauth-protected-resource/narrow/mcp", narrow_prm),
        Route("/.well-known/oauth-protected-resource", prm),
        Route("/.well-known/oauth-authorization-server", asm),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/grants", grant_log),
        Mount("/", app=mcp_app),
    ],
    lifespan=lambda _app: mcp_app.router.lifespan_context(mcp_app),
)

if __name__ == "__main__":
    uvicorn.run(BearerGate(app), host="127.0.0.1", port=PORT, log_level="warning")
