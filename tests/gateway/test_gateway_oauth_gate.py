"""`OAuthGate`, the gateway's ASGI door in OAuth mode, driven directly with ASGI messages: any
Authorization header gets 401/403 or reaches the app with an identity, never an exception."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from auth_server import AuthServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.gateway import ClientRule, OAuthGate, OAuthSettings, TokenRejected

RES = "http://127.0.0.1:8765/mcp"


@pytest.fixture(scope="module")
def srv() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


class App:
    """The app behind the gate: records who reached it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope.get("toolbridge.identity", "?"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def make_gate(srv: AuthServer, app: Any, verifier: Any = None) -> OAuthGate:
    oauth = OAuthSettings(resource=RES, issuer=srv.issuer, jwks_url=f"{srv.url}/jwks", scopes=("mcp",))
    rules = [ClientRule("alice", subject="alice"), ClientRule("bob", subject="bob", scopes=("extra",))]
    return OAuthGate(app, oauth, rules, tokens={"static-token-123": "ci"}, verifier=verifier)


async def call(
    gate: OAuthGate, headers: list[tuple[bytes, bytes]], path: str = "/mcp", method: str | None = None
) -> tuple[int, dict[str, str]]:
    """One request through `gate` (POST to /mcp, GET elsewhere, unless `method`): its status and
    response headers."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method or ("GET" if path != "/mcp" else "POST"),
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "scheme": "http",
        "server": ("127.0.0.1", 8765),
        "client": ("127.0.0.1", 5000),
        "root_path": "",
        "http_version": "1.1",
    }
    with anyio.fail_after(10):
        await gate(scope, receive, send)
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start.get("headers", [])}


async def test_who_gets_through(srv: AuthServer) -> None:
    app = App()
    gate = make_gate(srv, app)
    try:
        good = srv.issue(sub="alice", aud=RES, scope="mcp")
        assert (await call(gate, [(b"authorization", b"Bearer " + good.encode())]))[0] == 200
        assert (await call(gate, [(b"authorization", b"bearer static-token-123")]))[0] == 200
        assert app.seen == ["alice", "ci"]
        status, headers = await call(gate, [])
        assert status == 401 and "error=" not in headers["www-authenticate"]
        bob = srv.issue(sub="bob", aud=RES, scope="mcp")
        status, headers = await call(gate, [(b"authorization", b"Bearer " + bob.encode())])
        assert status == 403 and 'scope="mcp extra"' in headers["www-authenticate"]
        status, headers = await call(gate, [(b"authorization", b"Bearer \xff\xfe")])
        assert status == 401 and 'error_description="malformed token"' in headers["www-authenticate"]
        status, headers = await call(gate, [], path="/.well-known/oauth-protected-resource/mcp")
        assert status == 200 and headers["content-type"] == "application/json"
        assert app.seen == ["alice", "ci"]
    finally:
        await gate.verifier.aclose()


async def test_a_failing_verifier_is_a_401_not_a_crash(srv: AuthServer) -> None:
    class Broken:
        async def check(self, token: str) -> Any:
            raise RuntimeError("a bug")

    status, headers = await call(make_gate(srv, App(), Broken()), [(b"authorization", b"Bearer abc.def.ghi")])
    assert status == 401 and "the token could not be verified" in headers["www-authenticate"]


async def test_an_unreachable_key_set_is_503_with_retry_after(caplog: pytest.LogCaptureFixture) -> None:
    """A token the gateway cannot decide on (the key set is down) is 503 + Retry-After, not 401;
    a flood of them logs one line, with the code and without the token."""
    import logging

    with AuthServer() as a:
        app = App()
        gate = make_gate(a, app)
        token = a.issue(sub="alice", aud=RES, scope="mcp")
        a.down()
        try:
            with caplog.at_level(logging.INFO, logger="toolbridge.gateway.oauth"):
                for _ in range(20):
                    status, headers = await call(gate, [(b"authorization", b"Bearer " + token.encode())])
                    assert status == 503 and "www-authenticate" not in headers
                    assert 1 <= int(headers["retry-after"]) <= 10
            lines = [r.getMessage() for r in caplog.records]
            assert len(lines) == 1 and lines[0].startswith("ERR_GATEWAY_AUTH_UNAVAILABLE: ")
            assert token not in caplog.text and token[-20:] not in caplog.text
            a.up()
            status, _ = await call(gate, [(b"authorization", b"bearer static-token-123")])
            assert status == 200 and app.seen == ["ci"]  # secret tokens never needed the server
        finally:
            await gate.verifier.aclose()


async def test_websockets_are_refused(srv: AuthServer) -> None:
    app = App()
    gate = make_gate(srv, app)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await gate({"type": "websocket", "path": "/mcp", "headers": []}, None, send)
    assert sent == [{"type": "websocket.close", "code": 1008}] and app.seen == []


def test_identity_reasons_are_403(srv: AuthServer) -> None:
    gate = make_gate(srv, App())
    from mcp.server.auth.provider import AccessToken

    stranger = AccessToken(token="t", client_id="x", scopes=["mcp"], subject="eve", claims={"sub": "eve"})
    with pytest.raises(TokenRejected) as info:
        gate.identify(stranger)
    assert info.value.status == 403 and info.value.reason == "the token names no client of this gateway"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.sampled_from([b"authorization", b"x-other"]), st.binary(max_size=300)), max_size=3)
)
def test_any_headers_get_an_answer(srv: AuthServer, headers: list[tuple[bytes, bytes]]) -> None:
    async def main() -> None:
        app = App()
        gate = make_gate(srv, app)
        try:
            status, challenge = await call(gate, headers)
        finally:
            await gate.verifier.aclose()
        assert status in (401, 403) and challenge["www-authenticate"].startswith("Bearer ")
        assert app.seen == []

    anyio.run(main)
