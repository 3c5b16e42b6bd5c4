"""`toolbridge gateway --transport http`: bearer identities with their own grants, both eras."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from gw_helpers import calls_of, gateway_http, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolbridge.runtime._journal_sqlite import Journal

ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
  - name: bob
    token: "${{ secrets.bobToken }}"
    permissions: { allow: [tool:up_weather, effect:read] }
"""
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


def _post_status(url: str, token: str | None) -> int:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_identities_with_different_grants(tmp_path: Path, mode: str) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    with gateway_http(manifest, env=ENV) as url:
        for token in (None, "wrong-token-123", ALICE[:-1]):
            assert _post_status(url, token) == 401
        async with connect(url, ALICE, mode) as alice:
            assert (alice.protocol_version == "2026-07-28") == (mode == "auto")
            assert [t.name for t in (await alice.list_tools()).tools] == ["up_echo"]
            assert (await alice.call_tool("up_echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
            refused = await alice.call_tool("up_weather", {"city": "Oslo"})
            assert refused.is_error and refused.meta is not None
            assert refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
        async with connect(url, BOB, mode) as bob:
            assert [t.name for t in (await bob.list_tools()).tools] == ["up_weather"]
            weather = await bob.call_tool("up_weather", {"city": "Oslo"})
            assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
            assert (await bob.call_tool("up_echo", {"text": "b"})).is_error
    assert calls_of(tmp_path) == ["echo", "weather"]
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        runs = journal.list_runs(10)
    finally:
        journal.close()
    by_who = sorted((r.principal, r.outcome) for r in runs)
    assert by_who == [("alice", "blocked"), ("alice", "succeeded"), ("bob", "blocked"), ("bob", "succeeded")]


async def test_stateless_http_serves_without_sessions(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    with gateway_http(manifest, "--stateless", env=ENV) as url:
        async with connect(url, ALICE, "legacy") as alice:
            assert (await alice.call_tool("up_echo", {"text": "s"})).content[0].text == "s"  # type: ignore[union-attr]
        assert _post_status(url, None) == 401
