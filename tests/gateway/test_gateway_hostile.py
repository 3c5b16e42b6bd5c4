"""Hostile upstreams (a hung call, junk on stdout, a flood of notifications) never take the gateway,
or another upstream behind it, down; and a client that sends junk gets errors, not a dead gateway."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from gw_helpers import UPSTREAM, calls_of, gateway_stdio, stdio_params, upstream_manifest
from mcp.shared.exceptions import MCPError

GRANTS = "tool:up_echo, tool:hung_hang, tool:up_junk, tool:up_flood, tool:two_echo, effect:read"
CLIENTS = f"""clients:
  - name: me
    local: true
    permissions: {{ allow: [{GRANTS}] }}
"""
BINDING = """    effects: read
    exclude: [hang]
  - provider: !ref Up
    prefix: hung_
    include: [hang]
    effects: read
    timeoutMs: 1500
  - provider: !ref Two
    prefix: two_
    effects: read
    include: [echo]
"""


def second_upstream(tmp_path: Path) -> str:
    state = tmp_path / "state2"
    state.mkdir()
    return f"""---
kind: Mcp.StdioClient
metadata: {{ name: TwoMcp }}
command: {sys.executable}
args: [{json.dumps(str(UPSTREAM))}, {json.dumps(str(state))}]
mode: legacy
---
kind: AiMcp.ToolProvider
metadata: {{ name: Two }}
client: !ref TwoMcp
"""


async def test_hung_junk_and_flooding_upstreams_do_not_take_the_gateway_down(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding=BINDING, extra=second_upstream(tmp_path))
    async with gateway_stdio(manifest) as client:
        with anyio.fail_after(30):
            hung = await client.call_tool("hung_hang", {})
        assert hung.is_error and hung.meta is not None
        assert (
            hung.meta["toolbridge/code"] == "OUTCOME_UNKNOWN" and hung.meta["toolbridge/cause"] == "TIMEOUT"
        )
        assert (await client.call_tool("two_echo", {"text": "other upstream"})).content[
            0
        ].text == "other upstream"  # type: ignore[union-attr]
        junk = await client.call_tool("up_junk", {})
        assert junk.content[0].text == "after junk"  # type: ignore[union-attr]
        with anyio.fail_after(60):
            flood = await client.call_tool("up_flood", {})
        assert flood.content[0].text == "after flood", flood.meta  # type: ignore[union-attr]
        assert (await client.call_tool("up_echo", {"text": "alive"})).content[0].text == "alive"  # type: ignore[union-attr]
    with anyio.fail_after(10):
        while "hang:cancelled" not in calls_of(tmp_path):  # noqa: ASYNC110 - another process writes it
            await anyio.sleep(0.05)


async def test_bad_requests_get_errors_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding=BINDING, extra=second_upstream(tmp_path))
    async with gateway_stdio(manifest) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("x" * 100_000, {})
        assert info.value.error.code == types.INVALID_PARAMS and len(info.value.error.message) < 1000
        refused = await client.call_tool("up_echo", {"text": "x", "deep": nested(120)})
        assert refused.is_error and refused.meta is not None  # too deep to send upstream: nothing sent
        assert refused.meta["toolbridge/code"] == "INVALID_INPUT"
        assert (await client.call_tool("up_echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]
    assert calls_of(tmp_path) == ["echo"]


def nested(depth: int) -> dict[str, object]:
    root: dict[str, object] = {}
    node = root
    for _ in range(depth):
        child: dict[str, object] = {}
        node["a"] = child
        node = child
    return root


def test_stdio_params_have_no_secrets_of_the_test_environment() -> None:
    params = stdio_params(Path("m.yaml"))
    assert set(params.env or {}) <= {"PATH", "HOME", "PYTHONPATH"}  # PYTHONPATH: a worktree's sources
