"""An authorization server and MCP resource server in one, issuing and checking DPoP-bound tokens.

Run: `python dpop_server.py PORT [--nonce] [--stale-nonce] [--no-dpop]`. It serves, on 127.0.0.1:PORT:

- `/.well-known/oauth-authorization-server`: advertises `dpop_signing_alg_values_supported:
  ["ES256"]` (not with `--no-dpop`) and the grants below; `/jwks`: the issuer's signing key;
- `/token`: client credentials (public client `c1`, no secret) and the RFC 7523 JWT-bearer grant
  (an assertion signed with the workload key in env `DPOP_TEST_PLATFORM_PUB`, audience = this
  issuer; `sub: refuse` is answered `invalid_grant`). With a valid DPoP proof the access token
  is a JWT with `cnf.jkt` and `token_type: DPoP`; without one a bearer JWT;
- `/mcp`: an `MCPServer` (tool `whoami`) behind a check of the token and, for a bound token, of
  the proof (RFC 9449 section 4.3: typ, alg, signature, jwk, htm, htu, iat, unique jti, ath,
  `cnf.jkt`, and the nonce with `--nonce`); a bound token presented as Bearer is refused;
- `--nonce`: both servers demand a nonce (`use_dpop_nonce` + `DPoP-Nonce`) before accepting;
  `--stale-nonce`: every proof's nonce is refused and a new one issued, forever;
- `/log`: what the servers saw, in order: `{"at": "token"|"mcp", "ok": bool, "why": str, ...}`;
- `/registrations`: how many dynamic registrations were attempted (always refused with 404).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import sys
import time
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8766
NONCE = "--nonce" in sys.argv or "--stale-nonce" in sys.argv
STALE = "--stale-nonce" in sys.argv
DPOP = "--no-dpop" not in sys.argv
BASE = f"http://127.0.0.1:{PORT}"
ISSUER_KEY = ec.generate_private_key(ec.SECP256R1())
PLATFORM_PUB = os.environ.get("DPOP_TEST_PLATFORM_PUB", "")

log: list[dict[str, Any]] = []
seen_jtis: set[str] = set()
registrations = 0
current_nonce = {"token": "as-" + secrets.token_hex(4), "mcp": "rs-" + secrets.token_hex(4)}

mcp = MCPServer("dpop-demo")


@mcp.tool()
def whoami() -> str:
    """A fixed answer: reaching it means the token and proof were accepted."""
    return "ok"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict[str, Any]) -> str:
    canonical = json.dumps(
        {k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True
    )
    return b64url(hashlib.sha256(canonical.encode()).digest())


def check_proof(
    proof: str | None, method: str, url: str, token: str | None, where: str
) -> tuple[str | None, str]:
    """(jkt, "") for a good proof, else (None, why)."""
    if not proof or "," in proof:
        return None, "missing or multiple DPoP proofs"
    try:
        header = jwt.get_unverified_header(proof)
        if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256":
            return None, "bad typ or alg"
        jwk = header["jwk"]
        if "d" in jwk:
            return None, "private key in jwk"
        key = jwt.PyJWK(jwk).key
        claims = jwt.decode(proof, key, algorithms=["ES256"], options={"verify_aud": False})
    except Exception as exc:
        return None, f"proof does not verify: {type(exc).__name__}"
    if claims.get("htm") != method:
        return None, "htm does not match"
    if claims.get("htu") != url:
        return None, "htu does not match"
    if abs(time.time() - float(claims.get("iat", 0))) > 60:
        return None, "iat outside the window"
    jti = claims.get("jti")
    if not isinstance(jti, str) or jti in seen_jtis:
        return None, "replayed jti"
    seen_jtis.add(jti)
    if token is not None and claims.get("ath") != b64url(hashlib.sha256(token.encode()).digest()):
        return None, "ath does not match"
    if NONCE and (STALE or claims.get("nonce") != current_nonce[where]):
        if STALE:
            current_nonce[where] = f"{where}-" + secrets.token_hex(4)
        return None, "use_dpop_nonce"
    return thumbprint(jwk), ""


async def asm(request: Request) -> Response:
    doc: dict[str, Any] = {
        "issuer": BASE,
        "authorization_endpoint": f"{BASE}/authorize",
        "token_endpoint": f"{BASE}/token",
        "jwks_uri": f"{BASE}/jwks",
        "response_types_supported": ["code"],
        "grant_types_supported": ["client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"],
        "token_endpoint_auth_methods_supported": ["none"],
    }
    if DPOP:
        doc["dpop_signing_alg_values_supported"] = ["ES256"]
    return JSONResponse(doc)


async def prm(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})


async def jwks(request: Request) -> Response:
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ISSUER_KEY.public_key()))
    return JSONResponse({"keys": [{**jwk, "kid": "k1", "alg": "ES256", "use": "sig"}]})


async def register(request: Request) -> Response:
    global registrations
    registrations += 1
    return JSONResponse({"error": "not_found"}, status_code=404)


def _refuse(
    error: str, entry: dict[str, Any], status: int = 400, headers: dict[str, str] | None = None
) -> Response:
    entry.update(ok=False, why=error)
    log.append(entry)
    return JSONResponse({"error": error}, status_code=status, headers=headers)


async def token(request: Request) -> Response:
    form = await request.form()
    grant = str(form.get("grant_type"))
    entry: dict[str, Any] = {"at": "token", "grant": grant, "proof": "dpop" in request.headers}
    if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
        try:
            claims = jwt.decode(str(form.get("assertion")), PLATFORM_PUB, algorithms=["ES256"], audience=BASE)
        except Exception:
            return _refuse("invalid_grant", entry)
        if claims.get("sub") == "refuse":
            return _refuse("invalid_grant", entry)
        subject = str(claims["sub"])
    elif grant == "client_credentials":
        subject = "c1"
    else:
        return _refuse("unsupported_grant_type", entry)
    jkt = None
    if "dpop" in request.headers:
        jkt, why = check_proof(request.headers["dpop"], "POST", f"{BASE}/token", None, "token")
        if why == "use_dpop_nonce":
            return _refuse("use_dpop_nonce", entry, headers={"DPoP-Nonce": current_nonce["token"]})
        if jkt is None:
            return _refuse("invalid_dpop_proof", entry)
    now = int(time.time())
    claims = {
        "iss": BASE,
        "sub": subject,
        "aud": f"{BASE}/mcp",
        "iat": now,
        "exp": now + 300,
        "client_id": "c1",
    }
    if jkt is not None:
        claims["cnf"] = {"jkt": jkt}
    access = jwt.encode(claims, ISSUER_KEY, algorithm="ES256", headers={"kid": "k1", "typ": "at+jwt"})
    entry.update(ok=True, why="", bound=jkt is not None)
    log.append(entry)
    return JSONResponse(
        {"access_token": access, "token_type": "DPoP" if jkt else "Bearer", "expires_in": 300}
    )


async def events(request: Request) -> Response:
    return JSONResponse(log)


async def registration_count(request: Request) -> Response:
    return JSONResponse(registrations)


class Gate:
    """ASGI middleware: `/mcp` needs a token of this issuer, and a proof when the token is bound."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            problem = self.check(scope)
            if problem is not None:
                await problem(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def check(self, scope: Any) -> Response | None:
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        metadata = f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
        entry: dict[str, Any] = {"at": "mcp", "scheme": scheme, "proof": "dpop" in headers}

        def refuse(why: str, extra: dict[str, str] | None = None) -> Response:
            entry.update(ok=False, why=why)
            log.append(entry)
            error = "use_dpop_nonce" if why == "use_dpop_nonce" else "invalid_token"
            challenge = f'DPoP error="{error}", algs="ES256", {metadata}'
            return JSONResponse(
                {"error": error}, status_code=401, headers={"WWW-Authenticate": challenge, **(extra or {})}
            )

        if not token:
            return JSONResponse(
                {"error": "no token"}, status_code=401, headers={"WWW-Authenticate": f"DPoP {metadata}"}
            )
        try:
            claims = jwt.decode(token, ISSUER_KEY.public_key(), algorithms=["ES256"], audience=f"{BASE}/mcp")
        except Exception:
            return refuse("bad token")
        jkt = (claims.get("cnf") or {}).get("jkt")
        if jkt is None:
            entry.update(ok=scheme.lower() == "bearer", why="")
            log.append(entry)
            return None if entry["ok"] else refuse("bearer token with the DPoP scheme")
        if scheme.lower() != "dpop":
            return refuse("a DPoP-bound token presented as Bearer")
        found, why = check_proof(headers.get("dpop"), scope["method"], f"{BASE}{scope['path']}", token, "mcp")
        if why == "use_dpop_nonce":
            return refuse(why, {"DPoP-Nonce": current_nonce["mcp"]})
        if found is None or found != jkt:
            return refuse(why or "proof key is not the token's cnf.jkt")
        entry.update(ok=True, why="")
        log.append(entry)
        return None


mcp_app = mcp.streamable_http_app()
app = Starlette(
    routes=[
        Route("/.well-known/oauth-protected-resource/mcp", prm),
        Route("/.well-known/oauth-protected-resource", prm),
        Route("/.well-known/oauth-authorization-server", asm),
        Route("/jwks", jwks),
        Route("/register", register, methods=["POST"]),
        Route("/token", token, methods=["POST"]),
        Route("/log", events),
        Route("/registrations", registration_count),
        Mount("/", app=mcp_app),
    ],
    lifespan=lambda _app: mcp_app.router.lifespan_context(mcp_app),
)

if __name__ == "__main__":
    uvicorn.run(Gate(app), host="127.0.0.1", port=PORT, log_level="warning")
