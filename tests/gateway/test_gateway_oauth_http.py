"""`toolbridge gateway --transport http` in OAuth resource-server mode, as a real process, with a real
loopback authorization server (`auth_server.py`) and real clients: the official SDK client (with
tokens given, and with the SDK's own OAuth client-credentials flow discovering the gateway's
protected-resource metadata) and the MCP Inspector CLI."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from auth_server import CLIENT_SECRET, M2M_CLIENTS, AuthServer
from gw_helpers import TOOLBRIDGE, calls_of, free_port, stop, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolbridge.clients import client_credentials_auth
from toolbridge.runtime._journal_sqlite import Journal

CI_TOKEN = "ci-static-token-0123456789"
CLIENTS = """clients:
  - name: alice
    oauth: { subject: alice }
    permissions: { allow: [tool:up_echo, effect:read] }
  - name: bob
    oauth: { subject: bob, scopes: ["tools:weather"] }
    permissions: { allow: [tool:up_weather, effect:read] }
  - name: robots
    oauth: { clientId: robot }
    permissions: { allow: [tool:up_echo, tool:up_weather, effect:read] }
  - name: ops
    oauth: { claims: { groups: ops } }
    permissions: { allow: [tool:up_weather, effect:read] }
  - name: ci
    token: "${{ secrets.ciToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
"""


def oauth_block(
    srv: AuthServer, port: int, *, jwks: bool = True, timeout_ms: int = 1000, client_auth: str | None = None
) -> str:
    return f"""oauth:
  resource: http://127.0.0.1:{port}/mcp
  issuer: {srv.issuer}
  {f"jwksUri: {srv.url}/jwks" if jwks else ""}
  introspection:
    url: {srv.url}/introspect
    clientId: gateway-rs
    clientSecret: "${{{{ secrets.introspectionSecret }}}}"
    {f"clientAuth: {client_auth}" if client_auth else ""}
  scopes: [mcp]
  timeoutMs: {timeout_ms}
"""


@pytest.fixture(scope="module")
def srv() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(srv: AuthServer) -> None:
    srv.jwks_mode = srv.introspect_mode = "ok"
    srv.introspection_auth = {"client_secret_basic"}


@contextmanager
def serve(manifest: Path, port: int, env: dict[str, str], *extra: str) -> Iterator[tuple[str, Path]]:
    """`toolbridge gateway MANIFEST --transport http` as a process; yields its MCP URL and the
    file its stderr goes to."""
    err = manifest.parent / "gateway.err"
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", str(port), "-v", *extra],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the gateway exited {proc.returncode}: {err.read_text()[-2000:]}")
            try:
                httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource", timeout=1)
                break
            except httpx2.HTTPError:
                if time.monotonic() > deadline:
                    pytest.fail("the gateway did not start listening within 30 s")
                time.sleep(0.1)
        yield url, err
    finally:
        stop(proc)


@contextmanager
def oauth_gateway(tmp_path: Path, srv: AuthServer, *extra: str, **kw: Any) -> Iterator[tuple[str, Path]]:
    """The test manifest's gateway, with `oauth` pointing at `srv`."""
    port = free_port()
    manifest = upstream_manifest(
        tmp_path, clients=CLIENTS, binding="    effects: read\n", gateway=oauth_block(srv, port, **kw)
    )
    env = {"INTROSPECTION_SECRET": CLIENT_SECRET, "CI_TOKEN": CI_TOKEN}
    with serve(manifest, port, env, *extra) as out:
        yield out


@asynccontextmanager
async def connect(url: str, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


def post(url: str, token: str | None) -> httpx2.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    return httpx2.post(url, json=body, headers=headers, timeout=15)


def tool_names(result: Any) -> list[str]:
    return [t.name for t in result.tools]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_identities_from_verified_tokens(tmp_path: Path, srv: AuthServer, mode: str) -> None:
    with oauth_gateway(tmp_path, srv) as (url, err):
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        bob = srv.issue(sub="bob", aud=url, scope="mcp tools:weather", kid="e1")
        ops = srv.opaque(sub="olga", aud=url, scope="mcp", groups=["staff", "ops"])
        async with connect(url, alice, mode) as client:
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            assert tool_names(await client.list_tools()) == ["up_echo"]
            assert (await client.call_tool("up_echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
            refused = await client.call_tool("up_weather", {"city": "Oslo"})
            assert refused.is_error and refused.meta
            assert refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
        async with connect(url, bob, mode) as client:
            assert tool_names(await client.list_tools()) == ["up_weather"]
            weather = await client.call_tool("up_weather", {"city": "Oslo"})
            assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
        async with connect(url, ops, mode) as client:  # opaque token, by introspection and a claim
            assert tool_names(await client.list_tools()) == ["up_weather"]
        async with connect(url, CI_TOKEN, mode) as client:  # a secret token works beside OAuth
            assert tool_names(await client.list_tools()) == ["up_echo"]
    assert calls_of(tmp_path) == ["echo", "weather"]
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        runs = sorted((r.principal, r.outcome) for r in journal.list_runs(10))
    finally:
        journal.close()
    assert runs == [("alice", "blocked"), ("alice", "succeeded"), ("bob", "succeeded")]
    log = err.read_text()
    assert alice not in log and bob not in log and ops not in log and "Traceback" not in log


async def test_hostile_tokens_are_refused_and_others_keep_serving(tmp_path: Path, srv: AuthServer) -> None:
    from test_gateway_oauth_verify import handmade

    with oauth_gateway(tmp_path, srv) as (url, err):
        meta = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        missing = post(url, None)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == f'Bearer scope="mcp", resource_metadata="{meta}"'
        now = int(time.time())
        payload = {"iss": srv.issuer, "aud": url, "sub": "alice", "exp": now + 60, "scope": "mcp"}
        pem = srv.public_pem()
        hostile = {
            srv.issue(sub="alice", aud=url, lifetime=-600): "token expired",
            srv.issue(sub="alice", aud="http://127.0.0.1:1/mcp"): "token not issued for this resource",
            srv.issue(sub="alice", aud=url, iss="http://evil.example"): "token issuer not accepted",
            handmade({"alg": "none", "kid": "r1"}, payload): "token algorithm not allowed",
            handmade(
                {"alg": "HS256", "kid": "r1"}, payload, lambda m: hmac.new(pem, m, hashlib.sha256).digest()
            ): "token algorithm not allowed",
            srv.issue(aud=url, kid="nope", key=srv.keys["r1"][0], alg="RS256"): "unknown signing key",
            srv.opaque(sub="alice", aud=url, scope="mcp", exp=now - 600): "token expired",
            "opaque-never-issued": "token inactive",
            "x" * 20_000: "token too long",
        }
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        for token, why in hostile.items():
            answer = post(url, token)
            assert answer.status_code == 401, (why, answer.text)
            assert answer.json() == {"error": "invalid_token", "error_description": why}
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token", ')
            assert f'error_description="{why}"' in challenge and f'resource_metadata="{meta}"' in challenge
            assert post(url, alice).status_code == 200  # the gateway keeps serving
        # Valid tokens without what is needed: 403.
        no_scope = post(url, srv.issue(sub="alice", aud=url, scope="other"))
        assert no_scope.status_code == 403 and no_scope.json()["error"] == "insufficient_scope"
        assert 'scope="mcp"' in no_scope.headers["www-authenticate"]
        bob_narrow = post(url, srv.issue(sub="bob", aud=url, scope="mcp"))  # bob needs tools:weather
        assert bob_narrow.status_code == 403
        challenge = bob_narrow.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="mcp tools:weather"' in challenge
        nobody = post(url, srv.issue(sub="mallory", aud=url, scope="mcp"))
        assert nobody.status_code == 403
        assert nobody.json()["error_description"] == "the token names no client of this gateway"
        async with connect(url, alice) as client:
            assert tool_names(await client.list_tools()) == ["up_echo"]
    log = err.read_text()
    assert "Traceback" not in log and alice not in log
    assert "ERR_GATEWAY_AUTH: a request was refused: token expired" in log
    assert all(token[:60] not in log for token in hostile)


async def test_a_hanging_key_server_costs_only_the_jwt_requests(tmp_path: Path, srv: AuthServer) -> None:
    with oauth_gateway(tmp_path, srv, timeout_ms=1000) as (url, _err):
        srv.jwks_mode = "hang"
        jwt_token = srv.issue(sub="alice", aud=url, scope="mcp")
        opaque = srv.opaque(sub="alice", aud=url, scope="mcp")
        results: dict[str, Any] = {}

        async def jwt_call() -> None:
            started = time.monotonic()
            answer = await anyio.to_thread.run_sync(post, url, jwt_token)
            results["jwt"] = (answer.status_code, answer.json(), time.monotonic() - started)

        async def others() -> None:
            started = time.monotonic()
            async with connect(url, CI_TOKEN) as ci, connect(url, opaque) as alice:
                for _ in range(3):
                    assert tool_names(await ci.list_tools()) == ["up_echo"]
                    assert tool_names(await alice.list_tools()) == ["up_echo"]
            results["others"] = time.monotonic() - started

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(jwt_call)
                tg.start_soon(others)
        status, body, took = results["jwt"]
        assert (status, body["error"]) == (503, "temporarily_unavailable")
        assert took < 5


async def test_protected_resource_metadata(tmp_path: Path, srv: AuthServer) -> None:
    with oauth_gateway(tmp_path, srv) as (url, _err):
        base = url.removesuffix("/mcp")
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            answer = httpx2.get(base + path, timeout=10)
            assert answer.status_code == 200
            data = answer.json()
            assert data["resource"] == url
            assert data["authorization_servers"] == [srv.issuer]
            assert data["scopes_supported"] == ["mcp", "tools:weather"]
            assert data["bearer_methods_supported"] == ["header"]


async def test_the_sdk_oauth_client_discovers_and_gets_a_token(tmp_path: Path, srv: AuthServer) -> None:
    """The SDK's client-credentials flow: 401 -> the gateway's metadata -> the authorization
    server's metadata -> a token for the gateway's resource -> served as `robots`."""
    with oauth_gateway(tmp_path, srv) as (url, _err):
        before = srv.tokens_issued
        secret = M2M_CLIENTS["robot"]
        auth = client_credentials_auth(url, client_id="robot", client_secret=secret, scope="mcp")
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            assert tool_names(await client.list_tools()) == ["up_echo", "up_weather"]
            echoed = await client.call_tool("up_echo", {"text": "m2m"})
            assert echoed.content[0].text == "m2m"  # type: ignore[union-attr]
        assert srv.tokens_issued == before + 1
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        assert [r.principal for r in journal.list_runs(10)] == ["robots"]
    finally:
        journal.close()


def test_the_inspector_cli_with_an_oauth_token(tmp_path: Path, srv: AuthServer) -> None:
    from test_gateway_inspector import _json, inspector

    with oauth_gateway(tmp_path, srv) as (url, _err):
        token = srv.issue(sub="alice", aud=url, scope="mcp")
        auth = ["--header", f"Authorization: Bearer {token}"]
        listed = _json(inspector(tmp_path, url, "--transport", "http", *auth, "--method", "tools/list"))
        assert [t["name"] for t in listed["tools"]] == ["up_echo"]  # type: ignore[index, union-attr]
        call = ["--method", "tools/call", "--tool-name", "up_echo", "--tool-arg", "text=hi"]
        called = _json(inspector(tmp_path, url, "--transport", "http", *auth, *call))
        assert json.dumps(called).count('"hi"') >= 1
        expired = srv.issue(sub="alice", aud=url, scope="mcp", lifetime=-600)
        bad = ["--header", f"Authorization: Bearer {expired}"]
        refused = inspector(tmp_path, url, "--transport", "http", *bad, "--method", "tools/list")
        assert refused.returncode != 0


async def test_a_session_belongs_to_the_principal_that_opened_it(tmp_path: Path, srv: AuthServer) -> None:
    with oauth_gateway(tmp_path, srv) as (url, _err):
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        alice_again = srv.issue(sub="alice", aud=url, scope="mcp", kid="e1")  # another token, same principal
        bob = srv.issue(sub="bob", aud=url, scope="mcp tools:weather")
        opened = post(url, alice)
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]

        def ping(token: str) -> int:
            headers = {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {token}",
                "Mcp-Session-Id": session,
                "Mcp-Protocol-Version": "2025-11-25",
            }
            body = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            return httpx2.post(url, json=body, headers=headers, timeout=15).status_code

        assert ping(alice) == 200
        assert ping(alice_again) == 200
        assert ping(bob) == 404  # the SDK answers as if the session did not exist
        assert ping(alice) == 200


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stateless_serving_verifies_every_request(tmp_path: Path, srv: AuthServer, mode: str) -> None:
    with oauth_gateway(tmp_path, srv, "--stateless") as (url, _err):
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        async with connect(url, alice, mode) as client:
            assert tool_names(await client.list_tools()) == ["up_echo"]
            assert (await client.call_tool("up_echo", {"text": "s"})).content[0].text == "s"  # type: ignore[union-attr]
        assert post(url, srv.issue(sub="alice", aud=url, scope="mcp", lifetime=-600)).status_code == 401


async def test_a_hanging_introspection_costs_only_opaque_requests(tmp_path: Path, srv: AuthServer) -> None:
    with oauth_gateway(tmp_path, srv, timeout_ms=1000) as (url, err):
        srv.introspect_mode = "hang"
        opaque = srv.opaque(sub="alice", aud=url, scope="mcp")
        jwt_token = srv.issue(sub="alice", aud=url, scope="mcp")
        results: dict[str, Any] = {}

        async def opaque_call() -> None:
            started = time.monotonic()
            answer = await anyio.to_thread.run_sync(post, url, opaque)
            results["opaque"] = (answer.status_code, answer.json(), time.monotonic() - started)

        async def others() -> None:
            async with connect(url, CI_TOKEN) as ci, connect(url, jwt_token) as alice:
                for _ in range(3):
                    assert tool_names(await ci.list_tools()) == ["up_echo"]
                    assert tool_names(await alice.list_tools()) == ["up_echo"]
            results["others"] = True

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(opaque_call)
                tg.start_soon(others)
        status, body, took = results["opaque"]
        assert (status, body["error"]) == (503, "temporarily_unavailable")
        assert took < 5 and results["others"]
        srv.introspect_mode = "junk"
        assert post(url, srv.opaque(sub="alice", aud=url, scope="mcp")).status_code == 503
        srv.introspect_mode = "ok"
        assert post(url, opaque).status_code == 200  # the failures were not remembered
    log = err.read_text()
    assert "ERR_GATEWAY_AUTH_UNAVAILABLE: a request was answered 503: the token could not be" in log
    assert "Traceback" not in log and opaque not in log and CLIENT_SECRET not in log


async def test_an_outage_is_503_and_the_sdk_client_keeps_its_token(tmp_path: Path, srv: AuthServer) -> None:
    """The authorization server's keys cannot be fetched: the SDK's OAuth client gets 503 (not 401),
    so it does not throw its token away; once the keys answer, the same token serves again."""
    srv.jwks_mode = "500"
    with oauth_gateway(tmp_path, srv) as (url, err):
        before = srv.tokens_issued
        secret = M2M_CLIENTS["robot"]
        auth = client_credentials_auth(url, client_id="robot", client_secret=secret, scope="mcp")
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            with anyio.fail_after(30), pytest.raises(ExceptionGroup) as failure:
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:  # type: ignore[arg-type]
                    await client.list_tools()
            assert failure.group_contains(MCPError, depth=None)  # the SDK's "error response"
            assert srv.tokens_issued == before + 1  # one token, not a re-authentication loop
            token = srv.issue(sub="robot", aud=url, scope="mcp", client_id="robot")
            refused = post(url, token)
            assert refused.status_code == 503 and refused.json()["error"] == "temporarily_unavailable"
            retry = int(refused.headers["retry-after"])
            assert 1 <= retry <= 10 and "www-authenticate" not in refused.headers
            srv.jwks_mode = "ok"
            await anyio.sleep(retry)  # as Retry-After says
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:  # type: ignore[arg-type]
                assert tool_names(await client.list_tools()) == ["up_echo", "up_weather"]
            assert srv.tokens_issued == before + 1  # the same token
    log = err.read_text()
    assert log.count("ERR_GATEWAY_AUTH_UNAVAILABLE") >= 1 and "Traceback" not in log
    assert token not in log and M2M_CLIENTS["robot"] not in log


async def test_a_key_set_that_goes_down_keeps_known_keys_serving(tmp_path: Path) -> None:
    with AuthServer() as a, oauth_gateway(tmp_path, a, timeout_ms=500) as (url, err):
        alice = a.issue(sub="alice", aud=url, scope="mcp")
        async with connect(url, alice) as client:
            assert tool_names(await client.list_tools()) == ["up_echo"]
        a.add_key("r2")
        rotated = a.issue(sub="alice", aud=url, scope="mcp", kid="r2")
        opaque = a.opaque(sub="alice", aud=url, scope="mcp")
        a.down()
        # A key set fetched less than 10 s ago (the least time between fetches) is taken as
        # current: an unknown kid then is a bad token. Later, with the keys unreachable, it is not.
        await anyio.sleep(10.2)
        async with connect(url, a.issue(sub="alice", aud=url, scope="mcp", kid="e1")) as client:
            assert tool_names(await client.list_tools()) == ["up_echo"]  # a known key decides
        for token in (rotated, opaque):  # an unknown kid, an opaque token: nobody can decide
            answer = post(url, token)
            assert answer.status_code == 503, answer.text
            assert int(answer.headers["retry-after"]) >= 1
        a.up()
        assert post(url, opaque).status_code == 200
    log = err.read_text()
    assert "ERR_GATEWAY_AUTH_UNAVAILABLE" in log and "Traceback" not in log
    assert all(t not in log for t in (alice, rotated, opaque))


async def test_introspection_with_client_secret_post(tmp_path: Path, srv: AuthServer) -> None:
    srv.introspection_auth = {"client_secret_post"}
    with oauth_gateway(tmp_path, srv, client_auth="client_secret_post") as (url, err):
        opaque = srv.opaque(sub="olga", aud=url, scope="mcp", groups=["ops"])
        async with connect(url, opaque) as client:
            assert tool_names(await client.list_tools()) == ["up_weather"]
        assert srv.introspection_forms[-1]["client_secret"] == CLIENT_SECRET
    assert CLIENT_SECRET not in err.read_text() and opaque not in err.read_text()
