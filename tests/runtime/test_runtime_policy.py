"""Budgets, guards, limits, discovered tools, cancellation and events, with in-process tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest
from mcp import StdioServerParameters
from rt_helpers import CraftedClient, Empty, Message, call, scripted

from toolbridge.agent import Agent
from toolbridge.agent.models import FunctionModel, ModelPrices, ModelResponse, Usage
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.functions import FunctionTools
from toolbridge.runtime import Event, Verdict, create_runtime, define_mcp_tool, define_tool
from toolbridge.tools import ToolResult


class Num(pydantic.BaseModel):
    n: int


def counter_tool(calls: list[int], *, cost: int = 0, effects: str = "none", **kw: Any) -> Any:
    def execute(inp: Num, ctx: Any) -> Message:
        calls.append(inp.n)
        return Message(content=f"seen {inp.n}")

    return define_tool(
        "count", "1", "count", Num, Message, effects, [], cost_micros=cost, execute=execute, **kw
    )


BASE = ["model:scripted", "tool:count"]


async def test_cost_budget_refuses_a_call_before_it_is_made() -> None:
    seen: list[int] = []
    runtime = create_runtime(permissions={"allow": BASE}, limits={"maxCostMicros": 150})
    model = scripted(call("count", n=1), call("count", n=2), {"text": "done"})
    result = await runtime.run(Agent(model, tools=[counter_tool(seen, cost=100)]), "go")
    assert (result.outcome, result.error_code) == ("blocked", "BUDGET_EXCEEDED")
    assert seen == [1]  # the second call did not fit 150 after 100 was spent
    assert result.cost_micros == 100


async def test_default_budget_is_zero_so_paid_tools_are_refused() -> None:
    seen: list[int] = []
    runtime = create_runtime(permissions={"allow": BASE})
    result = await runtime.run(Agent(scripted(call("count", n=1)), tools=[counter_tool(seen, cost=1)]), "go")
    assert (result.outcome, result.error_code, seen) == ("blocked", "BUDGET_EXCEEDED", [])


async def test_whole_turn_must_fit_the_budget() -> None:
    seen: list[int] = []
    runtime = create_runtime(permissions={"allow": BASE}, limits={"max_cost_micros": 150})
    turn = {
        "tool_calls": [{"name": "count", "arguments": {"n": 1}}, {"name": "count", "arguments": {"n": 2}}]
    }
    result = await runtime.run(Agent(scripted(turn), tools=[counter_tool(seen, cost=100)]), "go")
    assert (result.outcome, result.error_code, seen) == ("blocked", "BUDGET_EXCEEDED", [])


class PricedModel:
    """A model with prices, answering from a script and reporting usage."""

    id = "priced"
    supports_images = False
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=2_000_000)

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, request: Any) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text="hi", usage=Usage(10, 5, 15, 1))


async def test_model_cost_is_reserved_and_settled() -> None:
    model = PricedModel()
    runtime = create_runtime(permissions={"allow": ["model:priced"]})
    refused = await runtime.run(Agent(model), "hello")
    assert (refused.outcome, refused.error_code, model.calls) == ("blocked", "BUDGET_EXCEEDED", 0)
    runtime = create_runtime(permissions={"allow": ["model:priced"]}, limits={"max_cost_micros": 10_000_000})
    result = await runtime.run(Agent(model, options={"max_tokens": 100}), "hello")
    assert result.outcome == "succeeded"
    assert result.cost_micros == 10 * 1 + 5 * 2  # settled at the actual usage
    assert result.usage["input_tokens"] == 10


async def test_model_permission_is_required() -> None:
    model = scripted({"text": "hi"})
    result = await create_runtime(permissions={"allow": []}).run(Agent(model), "hello")
    assert (result.outcome, result.error_code) == ("blocked", "PERMISSION_DENIED")
    assert model.requests == []
    wildcard = await create_runtime(permissions={"allow": ["model:*"]}).run(Agent(scripted("x")), "hi")
    assert wildcard.error_code == "PERMISSION_DENIED"


# -- guards ----------------------------------------------------------------------------------------


async def test_tool_result_guard_blocks() -> None:
    seen: list[int] = []

    def no_sevens(value: Any, ctx: Any) -> Verdict:
        return Verdict.block("seven") if "7" in value["content"] else Verdict.allow()

    model = scripted(call("count", n=7), {"text": "done"})
    runtime = create_runtime(permissions={"allow": BASE}, guards={"tool_result": [no_sevens]})
    result = await runtime.run(Agent(model, tools=[counter_tool(seen)]), "go")
    assert (result.outcome, result.error_code) == ("blocked", "GUARD_BLOCKED")
    assert len(model.requests) == 1 and seen == [7]
    (evidence,) = runtime.inspect(result.run_id).calls
    assert evidence.response_received and evidence.outcome == "blocked"


async def test_tool_guard_rewrites_and_is_revalidated() -> None:
    seen: list[int] = []

    async def redact(value: Any) -> Verdict:
        return Verdict.rewrite({"content": "[redacted]"})

    model = scripted(call("count", n=1), {"text": "done"})
    tool = counter_tool(seen, guards=[redact])
    result = await create_runtime(permissions={"allow": BASE}).run(Agent(model, tools=[tool]), "go")
    assert result.outcome == "succeeded"
    assert model.requests[1].messages[-1].content[0].text == '{"content":"[redacted]"}'

    def bad_rewrite(value: Any) -> Verdict:
        return Verdict.rewrite({"wrong": 1})

    model = scripted(call("count", n=1), {"text": "done"})
    tool = counter_tool(seen, guards=[bad_rewrite])
    result = await create_runtime(permissions={"allow": BASE}).run(Agent(model, tools=[tool]), "go")
    assert (result.outcome, result.error_code) == ("failed", "INVALID_OUTPUT")


async def test_runtime_guard_rewrites_a_discovered_tools_result() -> None:
    def secret() -> str:
        """Tells a secret."""
        return "the secret"

    seen: list[Any] = []

    def redact(value: Any) -> Verdict:
        seen.append(value)
        return Verdict.rewrite("[redacted]")

    model = scripted({"tool_calls": [{"name": "secret"}]}, {"text": "done"})
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:secret", "effect:write"]},
        guards={"tool_result": [redact]},
    )
    result = await runtime.run(Agent(model, [FunctionTools([secret])]), "go")
    assert result.outcome == "succeeded"
    assert isinstance(seen[0], ToolResult) and "the secret" in seen[0].to_text()
    assert model.requests[1].messages[-1].content[0].text == "[redacted]"


async def test_raising_and_slow_guards_fail_closed() -> None:
    def raises(value: Any) -> Verdict:
        raise RuntimeError("guard crashed")

    async def slow(value: Any) -> Verdict:
        await anyio.sleep(5)
        return Verdict.allow()

    def not_a_verdict(value: Any) -> Any:
        return True

    for guard in (raises, slow, not_a_verdict):
        model = scripted({"text": "hi"})
        runtime = create_runtime(
            permissions={"allow": ["model:scripted"]},
            guards={"input": [guard]},
            limits={"guard_timeout_ms": 100},
        )
        result = await runtime.run(Agent(model), "hello")
        assert (result.outcome, result.error_code) == ("blocked", "GUARD_UNAVAILABLE"), guard
        assert model.requests == []


async def test_input_and_output_guards_rewrite() -> None:
    model = scripted({"text": "the answer is 42"})
    runtime = create_runtime(
        permissions={"allow": ["model:scripted"]},
        guards={
            "input": [lambda v: Verdict.rewrite(v.replace("secret", "[x]"))],
            "output": [lambda v: Verdict.rewrite(v.replace("42", "[n]"))],
        },
    )
    result = await runtime.run(Agent(model), "my secret question")
    assert result.output == "the answer is [n]" and result.text == "the answer is [n]"
    assert "secret" not in repr(model.requests[0].messages)
    blocked = await create_runtime(
        permissions={"allow": ["model:scripted"]}, guards={"output": [lambda v: Verdict.block()]}
    ).run(Agent(scripted("x")), "q")
    assert (blocked.outcome, blocked.error_code, blocked.output) == ("blocked", "GUARD_BLOCKED", None)


# -- limits ----------------------------------------------------------------------------------------


async def test_step_and_call_limits() -> None:
    seen: list[int] = []
    model = scripted(call("count", n=1), call("count", n=2), call("count", n=3), {"text": "done"})
    result = await create_runtime(permissions={"allow": BASE}, limits={"max_tool_calls": 2}).run(
        Agent(model, tools=[counter_tool(seen)]), "go"
    )
    assert (result.outcome, result.error_code, seen) == ("failed", "LIMIT_EXCEEDED", [1, 2])
    model = scripted(call("count", n=1), call("count", n=2), {"text": "done"})
    result = await create_runtime(permissions={"allow": BASE}, limits={"max_steps": 1}).run(
        Agent(model, tools=[counter_tool(seen)]), "go"
    )
    assert (result.outcome, result.error_code) == ("failed", "LIMIT_EXCEEDED")
    assert "max_steps" in (result.error_message or "")


async def test_input_output_and_context_bytes() -> None:
    rt = create_runtime(permissions={"allow": ["model:scripted"]}, limits={"max_input_bytes": 10})
    assert (await rt.run(Agent(scripted("x")), "x" * 11)).error_code == "LIMIT_EXCEEDED"
    rt = create_runtime(permissions={"allow": ["model:scripted"]}, limits={"max_output_bytes": 3})
    assert (await rt.run(Agent(scripted("long answer")), "q")).error_code == "LIMIT_EXCEEDED"
    rt = create_runtime(permissions={"allow": ["model:scripted"]}, limits={"max_context_bytes": 5})
    assert (await rt.run(Agent(scripted("x")), "a long prompt")).error_code == "LIMIT_EXCEEDED"


async def test_unknown_tool_ends_the_run_not_found() -> None:
    model = scripted(call("nope"), {"text": "done"})
    result = await create_runtime(permissions={"allow": BASE}).run(Agent(model), "go")
    assert (result.outcome, result.error_code) == ("failed", "NOT_FOUND")


async def test_run_duration_limit_with_a_write_call_in_flight_is_unknown() -> None:
    started = anyio.Event()

    async def slow(inp: Empty, ctx: Any) -> Message:
        started.set()
        await anyio.sleep(10)
        return Message(content="late")

    tool = define_tool("slow", "1", "slow", Empty, Message, "write", [], execute=slow)
    model = scripted(call("slow"), {"text": "done"})
    rt = create_runtime(
        permissions={"allow": ["model:scripted", "tool:slow", "effect:write"]},
        limits={"max_duration_ms": 200},
    )
    result = await rt.run(Agent(model, tools=[tool]), "go")
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = rt.inspect(result.run_id).calls
    assert evidence.request_sent and not evidence.response_received and evidence.outcome == "outcome_unknown"
    result = await rt.run(Agent(scripted({"text": "quick"})), "go")
    assert result.outcome == "succeeded"


async def test_cancel_records_cancelled() -> None:
    gate = anyio.Event()

    async def slow(inp: Empty, ctx: Any) -> Message:
        gate.set()
        await anyio.sleep(10)
        return Message(content="late")

    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:slow"]})
    tool = define_tool("slow", "1", "slow", Empty, Message, "none", [], execute=slow)
    results: list[Any] = []

    async def go() -> None:
        results.append(await runtime.run(Agent(scripted(call("slow")), tools=[tool]), "go", run_id="run_c1"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        with anyio.fail_after(5):
            await gate.wait()
        assert runtime.cancel("run_c1")
    assert (results[0].outcome, results[0].error_code) == ("cancelled", "CANCELLED")
    record = runtime.inspect("run_c1")
    assert record.outcome == "cancelled" and record.calls[0].outcome == "cancelled"
    assert runtime.cancel("run_c1") is False


async def test_outer_cancellation_is_recorded_and_propagates() -> None:
    runtime = create_runtime(permissions={"allow": ["model:function"]})

    async def hang(messages: Any, request: Any) -> Any:
        await anyio.sleep(10)

    with anyio.move_on_after(0.2):
        await runtime.run(Agent(FunctionModel(hang)), "go", run_id="run_outer")
    record = runtime.inspect("run_outer")
    assert (record.outcome, record.error_code) == ("cancelled", "CANCELLED")


async def test_model_failure_is_generic() -> None:
    def boom(messages: Any, request: Any) -> Any:
        raise ValueError("provider said SECRET-123")

    result = await create_runtime(permissions={"allow": ["model:function"]}).run(
        Agent(FunctionModel(boom)), "x"
    )
    assert (result.outcome, result.error_code) == ("failed", "MODEL_FAILED")
    assert "SECRET-123" not in repr(result)


# -- events ------------------------------------------------------------------------------------------


async def test_events_are_paired_ordered_and_carry_no_content() -> None:
    seen: list[int] = []
    events: list[Event] = []
    runtime = create_runtime(permissions={"allow": BASE})
    unsubscribe = runtime.subscribe(events.append)
    model = scripted(call("count", n=31337), {"text": "final words"})
    result = await runtime.run(Agent(model, tools=[counter_tool(seen)]), "prompt text")
    unsubscribe()
    await runtime.run(Agent(scripted("again")), "q")
    assert {e.run_id for e in events} == {result.run_id}
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types[0] == "run.started" and types[-1] == "run.completed"
    for kind in ("run", "step", "model", "tool"):
        assert types.count(f"{kind}.started") == types.count(f"{kind}.completed") >= 1
    dumped = json.dumps([e.to_dict() for e in events])
    for content in ("31337", "final words", "prompt text", "seen"):
        assert content not in dumped


async def test_a_raising_subscriber_does_not_break_the_run() -> None:
    runtime = create_runtime(permissions={"allow": ["model:scripted"]})

    def bad(event: Event) -> None:
        raise RuntimeError("subscriber bug")

    runtime.subscribe(bad)
    assert (await runtime.run(Agent(scripted("ok")), "q")).outcome == "succeeded"


# -- tools without a runtime ---------------------------------------------------------------------------


async def test_bare_agent_refuses_tools_with_effects() -> None:
    client = CraftedClient({"structuredContent": {"content": "x"}})
    tool = define_mcp_tool(
        id="w",
        version="1",
        description="",
        input=Empty,
        output=Message,
        effects="write",
        capabilities=[],
        remote_name="w",
        client=client,
    )
    model = scripted(call("w"), {"text": "done"})
    with pytest.raises(Exception) as info:
        await Agent(model, tools=[tool]).run("go")
    assert getattr(info.value, "code", None) == "PERMISSION_DENIED"
    assert client.calls == []
    seen: list[int] = []
    model = scripted(call("count", n=5), {"text": "done"})
    result = await Agent(model, tools=[counter_tool(seen)]).run("go")
    assert result.text == "done" and seen == [5]
    model = scripted(call("count", n="bad"), {"text": "done"})
    await Agent(model, tools=[counter_tool(seen)]).run("go")
    assert "invalid" in model.requests[1].messages[-1].content[0].text


# -- discovered tools ---------------------------------------------------------------------------------


async def test_discovered_tools_take_effects_from_the_binding_tightened_by_annotations(
    fs_params: StdioServerParameters, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    read = call("fs_read_text_file", path=str(tmp_path / "a.txt"))
    write = call("fs_write_file", path=str(tmp_path / "b.txt"), content="beta")
    async with StdioClient(fs_params.command, fs_params.args) as client:
        provider = McpToolProvider(client)

        async def run(binding: dict[str, Any], turn: dict[str, Any], allow: list[str]) -> Any:
            agent = Agent(
                scripted(turn, {"text": "done"}), [{"provider": provider, "prefix": "fs_", **binding}]
            )
            return await create_runtime(permissions={"allow": ["model:scripted", *allow]}).run(agent, "go")

        # undeclared effects default to write: readOnlyHint cannot lower that
        r = await run({}, read, ["tool:fs_read_text_file", "effect:read"])
        assert r.error_code == "PERMISSION_DENIED"
        r = await run({}, read, ["tool:fs_read_text_file", "effect:write"])
        assert r.outcome == "succeeded"
        # declared read: fine for read_text_file...
        r = await run(
            {"effects": "read", "capabilities": ["fs"]}, read, ["tool:fs_read_text_file", "fs", "effect:read"]
        )
        assert r.outcome == "succeeded"
        # ...but write_file says destructiveHint, so it needs effect:write
        grants = ["tool:fs_write_file", "fs", "effect:read"]
        r = await run({"effects": "read", "capabilities": ["fs"]}, write, grants)
        assert r.error_code == "PERMISSION_DENIED" and not (tmp_path / "b.txt").exists()
        r = await run({"effects": "read", "capabilities": ["fs"]}, write, [*grants, "effect:write"])
        assert r.outcome == "succeeded" and (tmp_path / "b.txt").read_text() == "beta"


async def test_raising_tool_result_guard_blocks_after_the_call() -> None:
    seen: list[int] = []

    def crashes(value: Any) -> Verdict:
        raise ValueError("bug")

    def stuck(value: Any) -> Verdict:
        import time

        time.sleep(1)
        return Verdict.allow()

    for guard in (crashes, stuck):
        model = scripted(call("count", n=1), {"text": "done"})
        runtime = create_runtime(
            permissions={"allow": BASE}, guards={"toolResult": [guard]}, limits={"guardTimeoutMs": 100}
        )
        result = await runtime.run(Agent(model, tools=[counter_tool(seen)]), "go")
        assert (result.outcome, result.error_code) == ("blocked", "GUARD_UNAVAILABLE")
        assert len(model.requests) == 1


class GreedyModel(PricedModel):
    async def request(self, request: Any) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text="hi", usage=Usage(1_000, 1_000_000, 1_001_000, 1))


async def test_a_model_call_costing_more_than_reserved_ends_the_run() -> None:
    runtime = create_runtime(permissions={"allow": ["model:priced"]}, limits={"max_cost_micros": 100_000})
    result = await runtime.run(Agent(GreedyModel(), options={"max_tokens": 10}), "hello")
    assert (result.outcome, result.error_code) == ("blocked", "BUDGET_EXCEEDED")
    assert result.cost_micros == 1_000 + 2_000_000  # recorded all the same


async def test_max_model_calls() -> None:
    seen: list[int] = []
    model = scripted(call("count", n=1), {"text": "done"})
    runtime = create_runtime(permissions={"allow": BASE}, limits={"max_model_calls": 1})
    result = await runtime.run(Agent(model, tools=[counter_tool(seen)]), "go")
    assert (result.outcome, result.error_code, seen) == ("failed", "LIMIT_EXCEEDED", [1])
