"""Resumable streams over HTTP (SEP-1699), each session's events apart.

A real `toolbridge gateway --transport http`: its POST streams open with a priming event (an id,
no data, a `retry` field), every message carries an event id, and a client that reconnects with
`Last-Event-ID` receives what followed it, within its own session only. Two sessions of one
identity use the same request ids (the SDK names streams by them), so a store shared across
sessions would hand one session's result to the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
from gw_helpers import gateway_http, upstream_manifest
from mcp.types import JSONRPCNotification

from toolbridge.gateway._resume import _CURRENT, MAX_BYTES, MAX_EVENTS, RETRY_MS, SessionEventStore, _Events

ALICE = "alice-token-0123456789"
CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
"""
ENV = {"ALICE_TOKEN": ALICE}
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _headers(sid: str | None = None, **more: str) -> dict[str, str]:
    out = {"Authorization": f"Bearer {ALICE}", "Accept": ACCEPT, "MCP-Protocol-Version": VERSION, **more}
    if sid is not None:
        out["Mcp-Session-Id"] = sid
    return out


async def _open(http: httpx2.AsyncClient, url: str) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    response = await http.post(url, json=init, headers=_headers())
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=_headers(sid))).status_code == 202
    return sid


async def _events(response: httpx2.Response, until_id: int | None) -> list[dict[str, Any]]:
    """SSE events of `response` (id, data, retry), up to the JSON-RPC answer to `until_id`."""
    events: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    with anyio.fail_after(20):
        async for line in response.aiter_lines():
            if line == "":
                if event:
                    events.append(event)
                    data = event.get("data") or ""
                    if until_id is not None and data and json.loads(data).get("id") == until_id:
                        break
                event = {}
                continue
            key, _, value = line.partition(":")
            event[key] = value.removeprefix(" ")
    return events


async def _call(http: httpx2.AsyncClient, url: str, sid: str, text: str) -> list[dict[str, Any]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "up_echo", "arguments": {"text": text}},
    }
    async with http.stream("POST", url, json=body, headers=_headers(sid)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return await _events(response, 1)


async def _resume(
    http: httpx2.AsyncClient, url: str, sid: str, last: str
) -> tuple[int, list[dict[str, Any]]]:
    async with http.stream("GET", url, headers=_headers(sid, **{"Last-Event-ID": last})) as response:
        if response.status_code != 200:
            return response.status_code, []
        with anyio.move_on_after(3):  # a replay that has nothing ends or stays quiet
            return 200, await _events(response, 1)
        return 200, []


async def test_streams_are_primed_and_resume_within_their_own_session(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    with gateway_http(manifest, env=ENV) as url:
        async with httpx2.AsyncClient(timeout=30) as http:
            first, second = await _open(http, url), await _open(http, url)
            events = await _call(http, url, first, "for the first session")
            priming, *rest = events
            assert priming.get("id") and not priming.get("data") and priming.get("retry") == str(RETRY_MS)
            answer = json.loads(rest[-1]["data"])
            assert rest[-1].get("id") and answer["result"]["content"][0]["text"] == "for the first session"

            # the first session reconnects after the priming event: the answer is replayed
            status, replayed = await _resume(http, url, first, priming["id"])
            assert status == 200
            texts = [json.loads(e["data"])["result"]["content"][0]["text"] for e in replayed if e.get("data")]
            assert texts == ["for the first session"]

            # the second session calls with the same request id, then names the first one's event
            mine = await _call(http, url, second, "for the second session")
            assert json.loads(mine[-1]["data"])["result"]["content"][0]["text"] == "for the second session"
            status, leaked = await _resume(http, url, second, priming["id"])
            assert not [e for e in leaked if e.get("data")], leaked


async def test_the_store_keeps_nothing_outside_a_session_and_stays_bounded() -> None:
    store = SessionEventStore()
    message = JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": "x" * 100}
    )
    # no session known: an id, nothing kept, nothing replayed
    orphan = await store.store_event("1", message)
    sent: list[Any] = []

    async def collect(event: Any) -> None:
        sent.append(event)

    assert await store.replay_events_after(orphan, collect) is None and sent == []

    events = _Events()
    token = _CURRENT.set(events)
    try:
        ids = [await store.store_event("1", message) for _ in range(MAX_EVENTS + 50)]
        assert len(events.kept) == MAX_EVENTS and len(set(ids)) == len(ids)
        assert await store.replay_events_after(ids[0], collect) is None  # dropped: nothing to resume from
        assert await store.replay_events_after(ids[-3], collect) == "1" and len(sent) == 2
        big = JSONRPCNotification(
            jsonrpc="2.0", method="notifications/message", params={"data": "y" * MAX_BYTES}
        )
        big_id = await store.store_event("1", big)  # larger than the bound: its place kept, not its text
        assert events.size <= MAX_BYTES and len(events.kept) == MAX_EVENTS
        after = await store.store_event("1", message)
        sent.clear()
        assert await store.replay_events_after(big_id, collect) == "1"  # resumes after it
        assert [e.event_id for e in sent] == [after]
    finally:
        _CURRENT.reset(token)
