"""The per-step fast paths of the agent loop keep the behaviour of the general path.

A turn with one tool call runs it in the batch task itself (no child task, no limiter), finished
records are taken without a checkpoint, and a current catalog is returned without the lock. These
tests pin what must not change: cancellation reaches the one running call and leaves no task, a
hook's `PolicyError` from that call ends the run as itself (not as an exception group), a tool's
failure is fed back to the model, and a provider whose tools changed is listed again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from toolbridge.agent import Agent, AgentHooks, PlannedToolCall, RunContext, ScriptedModel
from toolbridge.errors import PolicyError
from toolbridge.functions import FunctionTools
from toolbridge.tools import ToolResult, ToolSpec


async def test_cancelling_the_one_running_call_leaves_no_task() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    async def slow() -> str:
        """Takes long."""
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "late"

    before = set(asyncio.all_tasks())
    model = ScriptedModel([{"tool_calls": [{"name": "slow"}]}, {"text": "never"}])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(Agent(model, [FunctionTools([slow])]).run, "go")
            await started.wait()
            tg.cancel_scope.cancel()
    assert cancelled == [True]
    assert set(asyncio.all_tasks()) == before
    assert model.remaining == 1


async def test_a_policy_error_of_the_one_call_ends_the_run_as_itself() -> None:
    class Refuse(AgentHooks):
        async def call_tool(
            self, ctx: RunContext, call: PlannedToolCall, invoke: Callable[[], Awaitable[ToolResult]]
        ) -> ToolResult:
            raise PolicyError("no", code="PERMISSION_DENIED")

    def noop() -> str:
        """Does nothing."""
        return "ok"

    model = ScriptedModel([{"tool_calls": [{"name": "noop"}]}, {"text": "never"}])
    with pytest.raises(PolicyError) as caught:
        await Agent(model, [FunctionTools([noop])], hooks=Refuse()).run("go")
    assert caught.value.code == "PERMISSION_DENIED"


async def test_the_failure_of_the_one_call_is_fed_back() -> None:
    def broken() -> str:
        """Fails."""
        raise ValueError("boom")

    model = ScriptedModel([{"tool_calls": [{"name": "broken"}]}, {"text": "done"}])
    result = await Agent(model, [FunctionTools([broken])]).run("go")
    assert result.text == "done"
    assert result.steps[0].tool_results[0].error is True


class _Changing:
    """A provider whose tool list changes when told to (its generation grows)."""

    def __init__(self) -> None:
        self.generation = 0
        self.listings = 0

    async def list_tools(self) -> list[ToolSpec]:
        self.listings += 1
        name = f"tool_{self.generation}"
        return [ToolSpec(name=name, description="d", parameters={"type": "object"})]

    async def call_tool(self, name: str, args: Any) -> ToolResult:
        self.generation += 1  # the call changes the server's tools
        return ToolResult.of_text(name)


async def test_a_changed_provider_is_listed_again_and_an_unchanged_one_is_not() -> None:
    provider = _Changing()
    model = ScriptedModel(
        [{"tool_calls": [{"name": "tool_0"}]}, {"tool_calls": [{"name": "tool_1"}]}, {"text": "done"}]
    )
    result = await Agent(model, [provider]).run("go")
    assert [r.content for s in result.steps for r in s.tool_results] == [[_text("tool_0")], [_text("tool_1")]]
    assert provider.listings == 3  # once at the start, once after each change
    assert [spec.name for spec in model.requests[2].tools] == ["tool_2"]


def _text(value: str) -> Any:
    from toolbridge.content import TextPart

    return TextPart(value)
