"""Sessions bound to the identity that opened them, and each identity's share of the sessions.

A real `toolbridge gateway --transport http` with two bearer identities; alice opens far more
sessions than her share while bob keeps working; bob naming alice's session gets 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx2
from gw_helpers import calls_of, gateway_http, journal_calls, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
  - name: bob
    token: "${{ secrets.bobToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
"""
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
SHARE = 4
GATEWAY = f"maxSessions: 50\nmaxSessionsPerIdentity: {SHARE}\n"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


def _headers(token: str, sid: str | None = None) -> dict[str, str]:
    out = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "MCP-Protocol-Version": "2025-06-18"}
    if sid is not None:
        out["Mcp-Session-Id"] = sid
    return out


async def _open(http: httpx2.AsyncClient, url: str, token: str) -> httpx2.Response:
    response = await http.post(url, json=INIT, headers=_headers(token))
    if response.status_code == 200:
        sid = response.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=note, headers=_headers(token, sid))).status_code == 202
    return response


async def _ping(http: httpx2.AsyncClient, url: str, token: str, sid: str) -> int:
    body = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    return (await http.post(url, json=body, headers=_headers(token, sid))).status_code


@asynccontextmanager
async def _client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        yield client


async def test_one_identity_exhausts_only_its_own_share(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n", gateway=GATEWAY)
    with gateway_http(manifest, env=ENV) as url:
        async with httpx2.AsyncClient(timeout=30) as http, _client(url, BOB) as bob:
            # alice opens 200 sessions and never closes one: each past her share closes her
            # oldest idle one, so she never holds more than her share, and the gateway's 50 last
            opened: list[str] = []
            for _ in range(200):
                response = await _open(http, url, ALICE)
                assert response.status_code == 200, response.text
                opened.append(response.headers["mcp-session-id"])
            assert len(set(opened)) == 200
            live = [sid for sid in opened if await _ping(http, url, ALICE, sid) == 200]
            assert live == opened[-SHARE:]
            # bob is unaffected: a new session, a call
            async with _client(url, BOB) as bob2:
                assert (await bob2.call_tool("up_echo", {"text": "b2"})).content[0].text == "b2"  # type: ignore[union-attr]
            assert (await bob.call_tool("up_echo", {"text": "b"})).content[0].text == "b"  # type: ignore[union-attr]

            # every session of alice busy (a GET stream open on each): one more is 429, not an eviction
            async with AsyncExitStack() as streams:
                for sid in live:
                    stream = await streams.enter_async_context(
                        http.stream(
                            "GET", url, headers={**_headers(ALICE, sid), "Accept": "text/event-stream"}
                        )
                    )
                    assert stream.status_code == 200
                refused = await http.post(url, json=INIT, headers=_headers(ALICE))
                assert refused.status_code == 429
                assert refused.headers["retry-after"].isdigit()
                assert refused.json()["error"]["message"] == "Too many open sessions for this identity"
                async with _client(url, BOB) as bob3:  # bob still opens sessions
                    assert (await bob3.call_tool("up_echo", {"text": "b3"})).content[0].text == "b3"  # type: ignore[union-attr]
            # the streams ended: alice's sessions are idle again, so she can open one more
            with anyio.fail_after(30):
                while (await _open(http, url, ALICE)).status_code != 200:  # noqa: ASYNC110 - the gateway's state
                    await anyio.sleep(0.05)


async def test_another_identity_cannot_use_a_session(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n", gateway=GATEWAY)
    with gateway_http(manifest, env=ENV) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            alice_sid = (await _open(http, url, ALICE)).headers["mcp-session-id"]
            bob_sid = (await _open(http, url, BOB)).headers["mcp-session-id"]
            unknown = "0" * 32
            for method in ("POST", "GET", "DELETE"):
                body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"} if method == "POST" else None
                answers = []
                for sid in (alice_sid, unknown):  # alice's session answers bob as an unknown one does
                    response = await http.request(method, url, json=body, headers=_headers(BOB, sid))
                    answers.append((response.status_code, response.text))
                assert answers[0] == answers[1]
                assert answers[0][0] == 404
            # hostile session ids: answered 404 like any unknown one, nothing else changes
            for hostile in ("x" * 8_000, alice_sid.upper(), alice_sid + "0", ""):
                response = await http.post(url, json=INIT, headers=_headers(BOB, hostile))
                assert response.status_code in (400, 404), (hostile[:20], response.status_code)
            raw = {**_headers(BOB), "Mcp-Session-Id": b"\xff\xfe" + alice_sid.encode()}
            assert (await http.post(url, json=INIT, headers=raw)).status_code in (400, 404)  # type: ignore[arg-type]
            # alice's session is untouched, and bob's own works
            assert await _ping(http, url, ALICE, alice_sid) == 200
            assert await _ping(http, url, BOB, bob_sid) == 200
            # alice can end her own session; then it is gone for her too
            assert (await http.delete(url, headers=_headers(ALICE, alice_sid))).status_code == 200
            assert await _ping(http, url, ALICE, alice_sid) == 404


async def test_calls_in_flight_are_bounded_per_identity(tmp_path: Path) -> None:
    clients = CLIENTS.replace(
        "tool:up_echo, effect:read] }\n  - name: bob",
        "tool:up_echo, tool:up_hang, effect:read] }\n  - name: bob",
    )
    gateway = GATEWAY + "maxCallsInFlightPerIdentity: 2\n"
    manifest = upstream_manifest(tmp_path, clients=clients, binding="    effects: read\n", gateway=gateway)
    with gateway_http(manifest, env=ENV) as url:
        async with _client(url, ALICE) as alice, _client(url, BOB) as bob, anyio.create_task_group() as tg:
            for _ in range(2):  # alice's two calls that never end
                tg.start_soon(alice.call_tool, "up_hang", {})
            with anyio.fail_after(60):
                while calls_of(tmp_path).count("hang") < 2:  # noqa: ASYNC110 - another process writes it
                    await anyio.sleep(0.05)
            third = await alice.call_tool("up_echo", {"text": "a"})
            assert third.meta is not None and third.meta["toolbridge/code"] == "LIMIT_EXCEEDED"
            assert third.meta["toolbridge/outcome"] == "failed"
            assert "in flight" in third.content[0].text  # type: ignore[union-attr]
            # bob is not affected by alice's calls in flight
            assert (await bob.call_tool("up_echo", {"text": "b"})).content[0].text == "b"  # type: ignore[union-attr]
            tg.cancel_scope.cancel()  # alice's client cancels her calls
        async with _client(url, ALICE) as alice:  # her share is back once they ended
            with anyio.fail_after(60):
                while (await alice.call_tool("up_echo", {"text": "again"})).is_error:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
    # the refused call has its row: alice's, the tool's name, the code, nothing sent
    rows = journal_calls(tmp_path)
    assert ("alice", "up_echo", "not_started", "LIMIT_EXCEEDED", False) in rows
    assert ("bob", "up_echo", "succeeded", None, True) in rows


async def test_a_burst_of_openings_stays_within_the_share(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n", gateway=GATEWAY)
    with gateway_http(manifest, env=ENV) as url:
        async with httpx2.AsyncClient(timeout=60) as http:
            statuses: list[int] = []
            opened: list[str] = []

            async def one() -> None:
                response = await http.post(url, json=INIT, headers=_headers(ALICE))
                statuses.append(response.status_code)
                if response.status_code == 200:
                    opened.append(response.headers["mcp-session-id"])

            for _ in range(3):  # three bursts of 40 at once
                async with anyio.create_task_group() as tg:
                    for _ in range(40):
                        tg.start_soon(one)
            assert set(statuses) <= {200, 429} and statuses.count(200) >= SHARE, statuses
            live = [sid for sid in opened if await _ping(http, url, ALICE, sid) == 200]
            assert 0 < len(live) <= SHARE
            bob = await _open(http, url, BOB)
            assert bob.status_code == 200
            assert await _ping(http, url, BOB, bob.headers["mcp-session-id"]) == 200


async def test_one_identitys_flood_of_refusals_never_queues_anothers_row(
    tmp_path: Path, postgres_url: str
) -> None:
    """Refused calls get their journal rows a few at a time *per identity*: with the async
    (PostgreSQL) journal, bob's refusal is written while most of alice's 120 refusals still wait
    for theirs (with one queue for everyone it waited behind all of them)."""
    from toolbridge.gateway._build import open_gateway
    from toolbridge.runtime import PostgresJournal

    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    text = manifest.read_text(encoding="utf-8")
    text = text.replace("journal: journal.db", "journal: ${{ secrets.journalUrl }}")
    manifest.write_text(text, encoding="utf-8")
    flood = 120
    secrets = {"aliceToken": ALICE, "bobToken": BOB, "journalUrl": postgres_url}
    async with open_gateway(manifest, secrets=secrets) as gateway:
        core = gateway.core
        alice, bob = gateway.identities["alice"], gateway.identities["bob"]
        done = {"alice": 0}
        alice_done_when_bob_was: list[int] = []

        async def refuse_alice(n: int) -> None:
            await core.refused(alice, "up_echo", {"text": str(n)}, "LIMIT_EXCEEDED", "too many")
            done["alice"] += 1

        async def refuse_bob() -> None:
            result = await core.refused(bob, "up_echo", {"text": "bob"}, "LIMIT_EXCEEDED", "too many")
            assert result.is_error
            alice_done_when_bob_was.append(done["alice"])

        with anyio.fail_after(120):  # hang guard
            async with anyio.create_task_group() as tg:
                for n in range(flood):
                    tg.start_soon(refuse_alice, n)
                await anyio.lowlevel.checkpoint()  # alice's refusals are queued first
                tg.start_soon(refuse_bob)
        assert done["alice"] == flood
        assert alice_done_when_bob_was and alice_done_when_bob_was[0] < flood // 2, alice_done_when_bob_was
        assert core._refusal_rows == {}  # nothing kept once the rows are written
    journal = PostgresJournal.open_existing(postgres_url)
    try:
        runs = [journal.get_run(r.run_id) for r in journal.list_runs(500)]
    finally:
        journal.close()
    rows = [(r.principal, c.tool_id, c.error_code) for r in runs if r is not None for c in r.calls]
    assert rows.count(("alice", "up_echo", "LIMIT_EXCEEDED")) == flood
    assert rows.count(("bob", "up_echo", "LIMIT_EXCEEDED")) == 1
