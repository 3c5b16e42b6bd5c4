"""`runtime.stream(agent, input)` is governed: the same events, journal and outcome as `run`."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest
from rt_helpers import Empty, Message, call, scripted

from toolbridge.agent import Agent, StepFinishedEvent, ToolCallFinishedEvent, ToolCallStartedEvent
from toolbridge.errors import ConfigError
from toolbridge.runtime import Event, RunOutcomeEvent, Verdict, create_runtime, define_tool

_VOLATILE = {"duration_ms"}


def _tools() -> list[Any]:
    def explode(value: Any, ctx: Any) -> dict[str, str]:
        raise RuntimeError("the remote side may have acted")

    return [
        define_tool("ok", "1", "", Empty, Message, "none", [], execute=lambda i, c: {"content": "fine"}),
        define_tool("pay", "1", "", Empty, Message, "none", [], cost_micros=80,
                    execute=lambda i, c: {"content": "paid"}),
        define_tool("boom", "1", "", Empty, Message, "write", [], execute=explode),
        define_tool("secret", "1", "", Empty, Message, "none", [], execute=lambda i, c: {"content": "4111"}),
    ]  # fmt: skip


def _no_cards(value: Any, ctx: Any) -> Verdict:
    return Verdict.block("card") if "4111" in str(value) else Verdict.allow()


SCENARIOS: dict[str, list[Any]] = {
    "succeeded": [call("ok"), {"text": "all done"}],
    "blocked": [call("boom"), {"text": "never"}],  # no effect:write grant
    "budget": [call("pay"), call("pay"), {"text": "never"}],
    "unknown": [call("boom"), {"text": "never"}],
    "guard": [call("secret"), {"text": "never"}],
    "not_found": [call("ghost"), {"text": "never"}],
}


def _runtime(name: str) -> Any:
    allow = ["model:scripted", "tool:ok", "tool:pay", "tool:boom", "tool:secret"]
    if name == "unknown":
        allow.append("effect:write")
    return create_runtime(
        permissions={"allow": allow}, limits={"max_cost_micros": 100}, guards={"tool_result": [_no_cards]}
    )


def _shape(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, {k: v for k, v in e.data.items() if k not in _VOLATILE}) for e in events]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_stream_gives_the_same_events_journal_and_outcome_as_run(name: str) -> None:
    by_run, by_stream = _runtime(name), _runtime(name)
    seen_run: list[Event] = []
    seen_stream: list[Event] = []
    by_run.subscribe(seen_run.append)
    by_stream.subscribe(seen_stream.append)
    ran = await by_run.run(Agent(scripted(*SCENARIOS[name]), tools=_tools()), "go", run_id="run_x")
    streamed: list[Any] = []
    async with aclosing(
        by_stream.stream(Agent(scripted(*SCENARIOS[name]), tools=_tools()), "go", run_id="run_x")
    ) as events:
        async for event in events:
            streamed.append(event)
    final = streamed[-1]
    assert isinstance(final, RunOutcomeEvent)
    assert not any(isinstance(e, RunOutcomeEvent) for e in streamed[:-1])
    got = final.result
    assert (got.outcome, got.error_code, got.error_message) == (
        ran.outcome,
        ran.error_code,
        ran.error_message,
    )
    assert (got.output, got.text, got.cost_micros, got.usage, got.run_id) == (
        ran.output, ran.text, ran.cost_micros, ran.usage, ran.run_id,
    )  # fmt: skip
    assert _shape(seen_stream) == _shape(seen_run)
    one, two = by_run.inspect("run_x"), by_stream.inspect("run_x")
    assert (one.outcome, one.error_code) == (two.outcome, two.error_code) == (ran.outcome, ran.error_code)
    assert [(c.tool_id, c.request_sent, c.outcome) for c in one.calls] == [
        (c.tool_id, c.request_sent, c.outcome) for c in two.calls
    ]
    if name == "succeeded":
        kinds = [type(e) for e in streamed[:-1]]
        assert kinds[:2] == [ToolCallStartedEvent, ToolCallFinishedEvent] and StepFinishedEvent in kinds
        assert got.output == "all done"
    expected = {
        "succeeded": ("succeeded", None),
        "blocked": ("blocked", "PERMISSION_DENIED"),
        "budget": ("blocked", "BUDGET_EXCEEDED"),
        "unknown": ("outcome_unknown", "OUTCOME_UNKNOWN"),
        "guard": ("blocked", "GUARD_BLOCKED"),
        "not_found": ("failed", "NOT_FOUND"),
    }[name]
    assert (ran.outcome, ran.error_code) == expected


async def test_closing_the_stream_early_cancels_the_run() -> None:
    started = anyio.Event()

    async def wait(value: Any, ctx: Any) -> dict[str, str]:
        started.set()
        await anyio.sleep(30)
        return {"content": "late"}

    tool = define_tool("wait", "1", "", Empty, Message, "write", [], execute=wait)
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:wait", "effect:write"]})
    agent = Agent(scripted(call("wait"), {"text": "never"}), tools=[tool])
    with anyio.fail_after(10):
        async with aclosing(runtime.stream(agent, "go", run_id="run_closed")) as events:
            async for event in events:
                assert isinstance(event, ToolCallStartedEvent)
                await started.wait()
                break
    record = runtime.inspect("run_closed")
    assert (record.outcome, record.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")


async def test_stream_refuses_what_cannot_stream_and_a_used_run_id() -> None:
    runtime = create_runtime(permissions={"allow": ["model:scripted"]})

    class NoStream:
        async def run(self, input: Any, hooks: Any = None) -> Any:
            return None

    with pytest.raises(ConfigError, match="stream"):
        async for _ in runtime.stream(NoStream(), "go"):
            pass
    await runtime.run(Agent(scripted({"text": "a"})), "go", run_id="run_used")
    with pytest.raises(ConfigError, match="already in the journal"):
        async for _ in runtime.stream(Agent(scripted({"text": "b"})), "go", run_id="run_used"):
            pass
