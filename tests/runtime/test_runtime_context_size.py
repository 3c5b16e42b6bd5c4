"""The context size of a model call, measured once per message and spec for a run.

`_context_bytes` remembers the size of each frozen `Message` and `ToolSpec` it has measured in a
run (the whole conversation is re-sent at every step). These tests pin that the remembered sizes
add up to exactly what measuring everything again gives, and that `max_context_bytes` still stops
a run whose conversation grows past it at a later step.
"""

from __future__ import annotations

from toolbridge.agent import Agent, ScriptedModel
from toolbridge.agent.models import Message, ModelRequest, ToolCall
from toolbridge.content import TextPart
from toolbridge.functions import FunctionTools
from toolbridge.runtime import create_runtime
from toolbridge.runtime._limits import ContextMeter, SizeCache
from toolbridge.runtime._limits import context_bytes as _context_bytes
from toolbridge.tools import ToolSpec


def test_remembered_sizes_add_up_to_a_fresh_measure() -> None:
    spec = ToolSpec(name="t", description="désc", parameters={"type": "object", "properties": {"a": {}}})
    messages: list[Message] = [Message("user", "hello wörld")]
    cache: SizeCache = {}
    for step in range(5):
        messages.append(
            Message("assistant", "", tool_calls=(ToolCall(f"c{step}", "t", {"a": "x" * step, "n": step}),))
        )
        messages.append(Message("tool", (TextPart("r" * (step + 1)),), tool_call_id=f"c{step}", name="t"))
        request = ModelRequest(messages=tuple(messages), tools=(spec,))
        assert _context_bytes(request, cache) == _context_bytes(request)
    assert len(cache) == len(messages) + 1


def test_equal_but_distinct_objects_are_measured_on_their_own() -> None:
    cache: SizeCache = {}
    first = ModelRequest(messages=(Message("user", "abc"),))
    assert _context_bytes(first, cache) == 3
    second = ModelRequest(messages=(Message("user", "abcdef"),))
    assert _context_bytes(second, cache) == 6


async def test_the_context_limit_still_stops_a_growing_conversation() -> None:
    def big() -> str:
        """Answers at length."""
        return "y" * 400

    model = ScriptedModel(
        [{"tool_calls": [{"name": "big"}]}, {"tool_calls": [{"name": "big"}]}, {"text": "done"}]
    )
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:big", "effect:write"]},
        limits={"max_context_bytes": 700},
    )
    result = await runtime.run(Agent(model, [FunctionTools([big])]), "go")
    assert (result.outcome, result.error_code) == ("failed", "LIMIT_EXCEEDED")
    assert len(model.requests) == 2  # the third request (two big results) was refused


def test_the_run_meter_gives_what_measuring_everything_gives() -> None:
    """`ContextMeter` measures only what is new after the last request's messages, and still
    gives exactly `context_bytes` when the conversation is rewritten, cut or branched."""
    spec = ToolSpec(name="t", description="désc", parameters={"type": "object", "properties": {"a": {}}})
    other = ToolSpec(name="u", description="", parameters={"type": "object"})
    meter = ContextMeter()
    messages: list[Message] = [Message("user", "hello wörld")]
    tools: tuple[ToolSpec, ...] = (spec,)
    for step in range(6):
        messages.append(
            Message("assistant", "", tool_calls=(ToolCall(f"c{step}", "t", {"a": "x" * step, "n": step}),))
        )
        messages.append(Message("tool", (TextPart("r" * (step + 1)),), tool_call_id=f"c{step}", name="t"))
        if step == 2:
            messages[1] = Message("user", "an edited message, longer than the one it replaces")
        if step == 3:
            del messages[-3:]  # the conversation cut back
        if step == 4:
            tools = (spec, other)  # the catalog changed
        request = ModelRequest(messages=tuple(messages), tools=tools)
        assert meter.measure(request) == _context_bytes(request)
    branch = ModelRequest(messages=(messages[0], Message("user", "a branch")), tools=tools)
    assert meter.measure(branch) == _context_bytes(branch)
    unfrozen = ModelRequest(messages=(messages[0], {"role": "user", "content": "x" * 9}), tools=tools)  # type: ignore[arg-type]
    assert meter.measure(unfrozen) == _context_bytes(unfrozen)
    assert meter.measure(ModelRequest(messages=(), tools=())) == 0
