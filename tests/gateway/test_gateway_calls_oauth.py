"""An OAuth identity and a bearer identity on one gateway, over one handshake-era upstream that
elicits: neither is ever asked the other's question (`test_gateway_calls` with bearer tokens)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from auth_server import CLIENT_SECRET, AuthServer
from gw_helpers import free_port
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_gateway_calls import GRANTS, Person, asking_manifest, connect, text_of
from test_gateway_oauth_http import oauth_block, serve

BOB = "bob-static-token-0123456789"


@pytest.fixture(scope="module")
def srv() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


async def test_an_oauth_identity_and_a_bearer_identity_are_never_asked_each_others_question(
    tmp_path: Path, srv: AuthServer
) -> None:
    port = free_port()
    manifest = asking_manifest(tmp_path, upstream_mode="legacy")
    text = manifest.read_text(encoding="utf-8")
    start = text.index("clients:")
    end = text.index("---", start)
    clients = f"""clients:
  - name: alice
    oauth: {{ subject: alice }}
    permissions: {{ allow: [{GRANTS}] }}
  - name: bob
    token: "${{{{ secrets.bobToken }}}}"
    permissions: {{ allow: [{GRANTS}] }}
{oauth_block(srv, port)}
"""
    manifest.write_text(text[:start] + clients + text[end:], encoding="utf-8")
    alice, bob = Person("alice"), Person("bob")
    with serve(manifest, port, {"INTROSPECTION_SECRET": CLIENT_SECRET, "BOB_TOKEN": BOB}) as (url, _):
        token = srv.issue(sub="alice", aud=url, scope="mcp")
        async with connect(url, token, "legacy", alice) as a, connect(url, BOB, "legacy", bob) as b:
            results: dict[str, str] = {}

            async def call(client: Client, who: str) -> None:
                try:
                    result = await client.call_tool("ask_pay", {"who": who, "meet": 2, "group": "g"})
                except MCPError as exc:  # the upstream's refusal, passed on as its JSON-RPC error
                    results[who] = f"error: {exc.error.message}"
                else:
                    assert result.is_error
                    results[who] = text_of(result)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, a, "alice")
                tg.start_soon(call, b, "bob")
            assert alice.asked == [] and bob.asked == []
            assert sorted(results) == ["alice", "bob"]
            assert not any("accept" in r for r in results.values()), results
            paid = await a.call_tool("ask_pay", {"who": "alice"})
            assert text_of(paid) == "alice: accept ok=True"
            assert alice.asked == ["transfer 5000 EUR for alice?"] and bob.asked == []
