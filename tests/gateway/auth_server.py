"""A loopback OAuth authorization server for the gateway's OAuth tests, run in the test process.

`AuthServer()` (a context manager) listens on 127.0.0.1 in a thread and serves:

- `GET /jwks`: the public keys of the signing keys it generated (RSA `r1`, EC P-256 `e1`);
  `jwks_mode` makes it misbehave: `hang` (never answers until closed), `junk`, `huge` (4 MiB),
  `500`, `reset` (closes the connection), `notjwks` (JSON that is not a key set), `empty` (a key
  set without keys);
- `POST /introspect` (RFC 7662): opaque tokens registered with `opaque(...)`; the gateway
  authenticates by HTTP Basic (`client_secret_basic`) or, when `introspection_auth` says so, in
  the form (`client_secret_post`); `introspect_mode`: `hang`, `junk`, `huge`, `500`, `inactive`,
  `reset` (closes the connection without an answer);
- `GET /.well-known/oauth-authorization-server` and `POST /token` (the client-credentials grant,
  client_secret_basic, honouring RFC 8707 `resource`): JWT access tokens for the SDK's own
  OAuth client.

`down()` stops listening (connections are refused) and `up()` listens again on the same port.

`issue(...)` signs JWTs with its keys (or with anything else a hostile test wants). Counters
(`jwks_fetches`, `introspections`, `tokens_issued`) let tests check caching.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

CLIENT_ID = "gateway-rs"
CLIENT_SECRET = "introspection-secret-0123456789"
M2M_CLIENTS = {"robot": "robot-secret-0123456789"}


def _jwk(public_key: Any, kid: str, alg: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(jwt.algorithms.get_default_algorithms()[alg].to_jwk(public_key))
    data.update(kid=kid, use="sig", alg=alg)
    return data


class AuthServer:
    """See the module docstring."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.keys: dict[str, tuple[Any, str]] = {"r1": (self.rsa, "RS256"), "e1": (self.ec, "ES256")}
        self.published = ["r1", "e1"]
        self.jwks_mode = "ok"
        self.introspect_mode = "ok"
        self.jwks_fetches = 0
        self.introspections = 0
        self.tokens_issued = 0
        self.opaque_tokens: dict[str, dict[str, Any]] = {}
        self.introspection_clients = {CLIENT_ID: CLIENT_SECRET}
        self.introspection_auth = {"client_secret_basic"}
        self.introspection_forms: list[dict[str, str]] = []
        self._release = threading.Event()
        self._httpd = self._listen(0)
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.issuer = self.url
        self._thread: threading.Thread | None = None

    def _listen(self, port: int) -> ThreadingHTTPServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        httpd.daemon_threads = True
        return httpd

    # -- tokens ---------------------------------------------------------------------------

    def add_key(self, kid: str, *, publish: bool = True) -> None:
        self.keys[kid] = (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")
        if publish:
            self.published.append(kid)

    def public_pem(self, kid: str = "r1") -> bytes:
        return bytes(
            self.keys[kid][0]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    def issue(
        self,
        *,
        sub: str = "alice",
        aud: str | list[str] | None = None,
        scope: str | None = "mcp",
        kid: str | None = "r1",
        alg: str | None = None,
        key: Any = None,
        lifetime: float = 300,
        iss: str | None = None,
        omit: tuple[str, ...] = (),
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A JWT access token (by default: RS256 with key `r1`, for `aud`, valid 5 minutes)."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": iss or self.issuer,
            "sub": sub,
            "aud": aud,
            "iat": now,
            "exp": int(now + lifetime),
            "client_id": claims.pop("client_id", "desk-app"),
            "jti": secrets.token_hex(8),
        }
        if scope is not None:
            payload["scope"] = scope
        payload.update(claims)
        for name in omit:
            payload.pop(name, None)
        if kid is not None and key is None:
            key, default_alg = self.keys[kid]
            alg = alg or default_alg
        hdr = dict(headers or {})
        if kid is not None:
            hdr["kid"] = kid
        return jwt.encode(payload, key, algorithm=alg, headers=hdr)

    def opaque(self, **claims: Any) -> str:
        token = "opaque-" + secrets.token_urlsafe(24)
        self.opaque_tokens[token] = {"active": True, **claims}
        return token

    # -- serving --------------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            key, alg = self.keys[kid]
            keys.append(_jwk(key.public_key(), kid, alg))
        return {"keys": keys}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with suppress(OSError):
                    self.wfile.write(body)

            def _json(self, data: Any, status: int = 200) -> None:
                self._send(status, json.dumps(data).encode())

            def _misbehave(self, mode: str) -> bool:
                if mode == "hang":
                    server._release.wait(60)
                    return True
                if mode == "junk":
                    self._send(200, b"\x00{not json at all")
                    return True
                if mode == "huge":
                    self._send(200, b'{"keys": [' + b" " * (4 << 20) + b"]}")
                    return True
                if mode == "reset":
                    self.close_connection = True
                    with suppress(OSError):
                        self.connection.shutdown(2)
                    return True
                if mode == "notjwks":  # JSON, but not a key set
                    self._json({"keys": "none", "note": [1, 2]})
                    return True
                if mode == "500":
                    self._json({"error": "server_error"}, 500)
                    return True
                return False

            def do_GET(self) -> None:
                if self.path == "/jwks":
                    server.jwks_fetches += 1
                    if self._misbehave(server.jwks_mode):
                        return
                    self._json({"keys": []} if server.jwks_mode == "empty" else server.jwks())
                elif self.path == "/.well-known/oauth-authorization-server":
                    self._json(
                        {
                            "issuer": server.issuer,
                            "authorization_endpoint": f"{server.url}/authorize",
                            "token_endpoint": f"{server.url}/token",
                            "jwks_uri": f"{server.url}/jwks",
                            "introspection_endpoint": f"{server.url}/introspect",
                            "response_types_supported": ["code"],
                            "grant_types_supported": ["client_credentials"],
                            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                        }
                    )
                else:
                    self._json({"error": "not_found"}, 404)

            def _form(self) -> dict[str, str]:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(min(length, 65536)).decode()
                return {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}

            def _basic(self) -> tuple[str, str] | None:
                header = self.headers.get("Authorization", "")
                if not header.startswith("Basic "):
                    return None
                try:
                    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                except ValueError:
                    return None
                return urllib.parse.unquote(user), urllib.parse.unquote(password)

            def do_POST(self) -> None:
                form = self._form()
                if self.path == "/introspect":
                    server.introspections += 1
                    server.introspection_forms.append(dict(form))
                    creds = self._basic() if "client_secret_basic" in server.introspection_auth else None
                    if creds is None and "client_secret_post" in server.introspection_auth:
                        creds = (form.get("client_id", ""), form.get("client_secret", ""))
                    if creds is None or server.introspection_clients.get(creds[0]) != creds[1]:
                        self._json({"error": "invalid_client"}, 401)
                        return
                    if self._misbehave(server.introspect_mode):
                        return
                    found = server.opaque_tokens.get(form.get("token", ""))
                    if found is None or server.introspect_mode == "inactive":
                        self._json({"active": False})
                    else:
                        self._json(found)
                elif self.path == "/token":
                    creds = self._basic()
                    if creds is None or M2M_CLIENTS.get(creds[0]) != creds[1]:
                        self._json({"error": "invalid_client"}, 401)
                        return
                    if form.get("grant_type") != "client_credentials":
                        self._json({"error": "unsupported_grant_type"}, 400)
                        return
                    server.tokens_issued += 1
                    token = server.issue(
                        sub=creds[0], aud=form.get("resource"), scope=form.get("scope"), client_id=creds[0]
                    )
                    self._json({"access_token": token, "token_type": "Bearer", "expires_in": 300})
                else:
                    self._json({"error": "not_found"}, 404)

        return Handler

    def __enter__(self) -> AuthServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="auth-server", daemon=True)
        self._thread.start()
        return self

    def down(self) -> None:
        """Stop listening: connections to the port are refused until `up()`."""
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def up(self) -> None:
        """Listen again on the same port."""
        self._release = threading.Event()
        self._httpd = self._listen(self.port)
        self.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self.down()


@contextmanager
def auth_server() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server
