"""Every refused call has a journal row naming its tool and the refusal's code.

Runs and sessions over a real MCP server (`rt_server.py`, official SDK, in-process through
`InProcessClient`) and declared tools: a call to no known tool, a budget refusal, a call after
the session ended (an earlier refusal, a cancel), malformed arguments, `session.refuse` for a
name that is not listed. Each refused call is a row ended `not_started` with its code, on every
journal backend (memory, SQLite, PostgreSQL: the async path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rt_helpers import call, scripted
from rt_server import server
from test_runtime_answers import journal  # noqa: F401 - the fixture: memory, SQLite, PostgreSQL

from toolbridge.agent import Agent
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import InProcessClient
from toolbridge.errors import PolicyError
from toolbridge.runtime import Runtime, create_runtime


@pytest.fixture
def make(journal: str | None) -> Iterator[Callable[..., Runtime]]:  # noqa: F811
    """Runtimes on the `journal` backend, closed after the test."""
    made: list[Runtime] = []

    def build(allow: list[str], **limits: Any) -> Runtime:
        if journal is None:
            runtime = create_runtime(permissions={"allow": allow}, limits=limits)
        else:
            runtime = create_runtime("durable", permissions={"allow": allow}, journal=journal, limits=limits)
        made.append(runtime)
        return runtime

    yield build
    for runtime in made:
        runtime.close()


def rows(runtime: Runtime, run_id: str) -> list[tuple[str, str, str, str | None]]:
    """(tool id, kind, outcome, code) of every call row of a run."""
    return [(c.tool_id, c.kind, c.outcome, c.error_code) for c in runtime.inspect(run_id).calls]


def binding(**extra: Any) -> dict[str, Any]:
    return {
        "provider": McpToolProvider(InProcessClient(server)),
        "include": ["ok"],
        "effects": "none",
        **extra,
    }


async def test_an_agent_run_records_a_call_to_no_known_tool() -> None:
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:ok"]})
    model = scripted(call("no_such\x1b[2Jtool", x=1), {"text": "done"})
    result = await runtime.run(Agent(model, [binding()]), "go")
    assert (result.outcome, result.error_code) == ("failed", "NOT_FOUND")
    assert rows(runtime, result.run_id) == [("no_such\\x1b[2Jtool", "unknown", "not_started", "NOT_FOUND")]


async def test_an_agent_run_records_the_tool_a_budget_refused() -> None:
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:ok"]}, limits={"max_cost_micros": 5}
    )
    model = scripted(call("ok", message="hi"), {"text": "done"})
    result = await runtime.run(Agent(model, [binding(cost_micros=10)]), "go")
    assert (result.outcome, result.error_code) == ("blocked", "BUDGET_EXCEEDED")
    assert rows(runtime, result.run_id) == [("ok", "discovered", "not_started", "BUDGET_EXCEEDED")]


async def test_a_call_after_the_session_ended_has_its_row(make: Callable[..., Runtime]) -> None:
    runtime = make(["tool:ok"], max_cost_micros=15)
    async with runtime.session(tool_providers=[binding(cost_micros=10)]) as session:
        assert (await session.call_tool("ok", {"message": "a"})).structured == {"content": "a"}
        with pytest.raises(PolicyError) as first:
            await session.call_tool("ok", {"message": "b"})  # 10 more does not fit 15
        with pytest.raises(PolicyError) as later:
            await session.call_tools([("ok", {"message": "c"}), ("gone", {})])
    assert first.value.code == later.value.code == "BUDGET_EXCEEDED"
    assert rows(runtime, session.run_id) == [
        ("ok", "discovered", "succeeded", None),
        ("ok", "discovered", "not_started", "BUDGET_EXCEEDED"),
        ("ok", "discovered", "not_started", "BUDGET_EXCEEDED"),
        ("gone", "unknown", "not_started", "BUDGET_EXCEEDED"),
    ]


async def test_a_call_after_a_cancel_has_its_row(make: Callable[..., Runtime]) -> None:
    runtime = make(["tool:ok"])
    async with runtime.session(tool_providers=[binding()]) as session:
        await session.list_tools()
        assert runtime.cancel(session.run_id)
        with pytest.raises(PolicyError) as refused:
            await session.call_tool("ok", {"message": "late"})
    assert refused.value.code == "CANCELLED"
    assert rows(runtime, session.run_id) == [("ok", "discovered", "not_started", "CANCELLED")]


async def test_malformed_arguments_are_recorded_for_the_tools_they_name(make: Callable[..., Runtime]) -> None:
    runtime = make(["tool:ok"])
    async with runtime.session(tool_providers=[binding()]) as session:
        await session.list_tools()
        with pytest.raises(PolicyError) as refused:
            await session.call_tools([("ok", {"message": "a"}), ("ok", "not an object")])  # type: ignore[list-item]
    assert refused.value.code == "INVALID_INPUT"
    assert rows(runtime, session.run_id) == [
        ("ok", "discovered", "not_started", "INVALID_INPUT"),
        ("ok", "discovered", "not_started", "INVALID_INPUT"),
    ]


async def test_refuse_records_a_name_that_is_not_listed(make: Callable[..., Runtime]) -> None:
    runtime = make(["tool:ok"])
    async with runtime.session(tool_providers=[binding()]) as session:
        error = await session.refuse("unlisted", {"a": 1}, "PERMISSION_DENIED")
    assert error.code == "PERMISSION_DENIED"
    assert rows(runtime, session.run_id) == [("unlisted", "unknown", "not_started", "PERMISSION_DENIED")]
