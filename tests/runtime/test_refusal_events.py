"""Every call refused before anything was sent is a `tool.refused` event (what the console's live
Calls page shows), with the tool and the refusal's code and never the arguments: a budget refusal,
a call after the session ended, a call to no known tool, a grant refusal. Over a real MCP server
(`rt_server.py`, official SDK, in-process)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rt_server import server

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import InProcessClient
from toolbridge.console import LiveCalls
from toolbridge.errors import PolicyError
from toolbridge.runtime import create_runtime


def binding(**extra: Any) -> dict[str, Any]:
    return {
        "provider": McpToolProvider(InProcessClient(server)),
        "include": ["ok"],
        "effects": "none",
        **extra,
    }


async def test_refused_calls_are_events_with_their_code() -> None:
    runtime = create_runtime(permissions={"allow": ["tool:ok"]}, limits={"max_cost_micros": 15})
    live = LiveCalls()
    live.watch(runtime, "alice")
    events: list[Any] = []
    runtime.subscribe(events.append)
    try:
        async with runtime.session(tool_providers=[binding(cost_micros=10)]) as session:
            await session.call_tool("ok", {"message": "a"})
            with pytest.raises(PolicyError):
                await session.call_tool("ok", {"message": "secret-argument-b"})  # past the budget
            with pytest.raises(PolicyError):
                await session.call_tools([("ok", {"message": "c"}), ("gone", {})])  # after it ended
        denied = create_runtime(permissions={"allow": []})
        live.watch(denied, "bob")
        async with denied.session(tool_providers=[binding()]) as other:
            with pytest.raises(PolicyError):
                await other.call_tool("ok", {"message": "d"})  # no grant
    finally:
        live.close()
        runtime.close()
    rows = [(r["principal"], r["tool"], r["outcome"], r["code"]) for r in live.recent()]
    assert rows == [
        ("alice", "ok", "succeeded", None),
        ("alice", "ok", "not_started", "BUDGET_EXCEEDED"),
        ("alice", "ok", "not_started", "BUDGET_EXCEEDED"),
        ("alice", "gone", "not_started", "BUDGET_EXCEEDED"),
        ("bob", "ok", "not_started", "PERMISSION_DENIED"),
    ]
    refused = [e for e in events if e.type == "tool.refused"]
    assert len(refused) == 3 and "secret-argument-b" not in json.dumps([e.to_dict() for e in events])
