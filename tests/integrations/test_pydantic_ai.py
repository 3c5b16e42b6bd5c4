"""pydantic-ai adapter: a real `pydantic_ai.Agent` on its `FunctionModel`, tools from a real
server-filesystem through `toolset(session)` / `governed(session)`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from ig_helpers import READ, SECRET_SERVER_TEXT, Files, add_and_picture, calls, opened
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolbridge.agent.models import ModelPrices
from toolbridge.errors import PolicyError
from toolbridge.functions import FunctionTools
from toolbridge.integrations.pydantic_ai import governed, toolset
from toolbridge.runtime import Runtime


class Script:
    """A `FunctionModel` function: one scripted turn per model request; records what it saw."""

    def __init__(self, turns: list[Any]):
        self.turns = list(turns)
        self.seen: list[str] = []
        self.returns: list[Any] = []
        self.tool_names: list[list[str]] = []
        self.count = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tool_names.append([t.name for t in info.function_tools])
        new, self.count = messages[self.count :], len(messages)
        for message in new:
            self.seen.append(repr(message))
            for part in getattr(message, "parts", ()):
                if isinstance(part, ToolReturnPart):
                    self.returns.append(part.content)
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in turn])


def agent(script: Script, *tools: Any, **kwargs: Any) -> Agent[None, str]:
    return (
        Agent(FunctionModel(script, model_name="scripted"), **kwargs)
        if not tools
        else Agent(FunctionModel(script, model_name="scripted"), toolsets=list(tools), **kwargs)
    )


async def test_a_granted_call_reaches_the_server_and_is_journaled(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    notes = str(files.folder / "notes.txt")
    script = Script([[("fs_read_text_file", {"path": notes})], "done"])
    async with opened(runtime, files) as session:
        result = await agent(script, toolset(session)).run("read the notes")
    assert result.output == "done"
    assert script.tool_names[0] == ["fs_read_text_file", "fs_write_file", "fs_list_directory"]
    assert "buy milk" in str(script.returns[0])
    assert session.result().outcome == "succeeded"
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]
    assert runtime.inspect(session.run_id).principal == "tester"


async def test_an_ungranted_call_never_reaches_the_server_and_the_run_ends_blocked(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    target = files.folder / "out.txt"
    script = Script([[("fs_write_file", {"path": str(target), "content": "no"})], "never"])
    async with opened(runtime, files) as session:
        with pytest.raises(PolicyError) as stopped:
            await agent(script, toolset(session)).run("write")
    assert stopped.value.code == "PERMISSION_DENIED" and stopped.value.outcome == "blocked"
    assert stopped.value.message == "a required permission was not granted: tool:fs_write_file"
    assert not target.exists() and len(script.turns) == 1  # the model was not asked again
    assert (session.result().outcome, session.result().error_code) == ("blocked", "PERMISSION_DENIED")
    assert calls(runtime, session) == [("fs_write_file", False, "not_started")]


async def test_a_budget_stop(files: Files, make_runtime: Callable[..., Runtime]) -> None:
    runtime = make_runtime(READ, max_cost_micros=1_000)
    notes = str(files.folder / "notes.txt")
    read = ("fs_read_text_file", {"path": notes})
    script = Script([[read], [read], [read], "never"])
    async with opened(runtime, files, cost_micros=400) as session:
        with pytest.raises(PolicyError) as stopped:
            await agent(script, toolset(session)).run("read thrice")
    assert stopped.value.code == "BUDGET_EXCEEDED"
    outcome = session.result()
    assert (outcome.outcome, outcome.cost_micros) == ("blocked", 800)
    # the third never ran: refused, with its row (issue 21)
    assert [c[2] for c in calls(runtime, session)] == ["succeeded", "succeeded", "not_started"]


BUDGET = 1_200
"""Enough for the first model request of the script (about 300 bytes at one micro-USD a byte), not
for the second's reservation (its context holds the first request, response and tool result)."""


async def test_a_model_budget_and_grant_through_the_capability(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime([*READ, "model:scripted"], max_cost_micros=BUDGET)
    sizes: list[int] = []
    runtime.subscribe(lambda e: sizes.append(e.data["context_bytes"]) if e.type == "model.started" else None)
    notes = str(files.folder / "notes.txt")
    script = Script(
        [[("fs_read_text_file", {"path": notes})], [("fs_list_directory", {"path": str(files.folder)})], "x"]
    )
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=0)  # 1 micro a byte
    async with opened(runtime, files) as session:
        with pytest.raises(PolicyError) as stopped:
            await Agent(
                FunctionModel(script, model_name="scripted"),
                capabilities=[governed(session, model_id="scripted", prices=prices)],
            ).run("read")
    assert stopped.value.code == "BUDGET_EXCEEDED" and "model:scripted" in stopped.value.message
    outcome = session.result()
    assert outcome.usage["model_calls"] == 1 and len(script.turns) == 2  # the second request was never made
    assert outcome.cost_micros == outcome.usage["input_tokens"] and len(sizes) == 1 and sizes[0] < BUDGET
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]
    # a model without its grant is refused before it is asked anything
    script2 = Script(["never"])
    async with opened(make_runtime(READ), files) as session2:
        with pytest.raises(PolicyError) as refused:
            await Agent(FunctionModel(script2), capabilities=[governed(session2, model_id="scripted")]).run(
                "x"
            )
    assert refused.value.code == "PERMISSION_DENIED" and "model:scripted" in refused.value.message
    assert script2.turns == ["never"]


async def test_the_capability_governs_model_calls_and_tools_together(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime([*READ, "model:function:scripted"])
    notes = str(files.folder / "notes.txt")
    script = Script([[("fs_read_text_file", {"path": notes})], "done"])
    async with opened(runtime, files) as session:
        result = await Agent(
            FunctionModel(script, model_name="scripted"), capabilities=[governed(session)]
        ).run("r")
    assert result.output == "done"
    outcome = session.result()
    assert outcome.outcome == "succeeded" and outcome.usage["model_calls"] == 2
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]


async def test_server_error_text_never_reaches_the_model(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    script = Script([[("fs_read_text_file", {"path": "/etc/passwd"})], "never"])
    async with opened(runtime, files) as session:
        with pytest.raises(PolicyError) as stopped:
            await agent(script, toolset(session)).run("read outside")
    assert stopped.value.code == "TOOL_ERROR"  # the server answered an error (issue 21: was unknown)
    assert SECRET_SERVER_TEXT not in stopped.value.message and "passwd" not in stopped.value.message
    assert not any(SECRET_SERVER_TEXT in seen for seen in script.seen)
    assert session.result().outcome == "failed"


async def test_ungoverned_failures_go_back_to_the_model_to_retry(files: Files) -> None:
    """Not governed: pydantic-ai's `ModelRetry` convention, with the server's text (as an Agent)."""
    notes = str(files.folder / "notes.txt")
    script = Script(
        [[("read_text_file", {"path": "/etc/passwd"})], [("read_text_file", {"path": notes})], "ok"]
    )
    result = await agent(script, toolset(files.provider)).run("read")
    assert result.output == "ok"
    assert any(SECRET_SERVER_TEXT in seen for seen in script.seen)  # retry prompt carries the text
    assert "buy milk" in str(script.returns[-1])


async def test_declared_tools_images_and_structured_results() -> None:
    add, fns = add_and_picture()
    script = Script([[("math_add", {"a": 2, "b": 3})], [("picture", {})], "ok"])
    result = await Agent(FunctionModel(script), toolsets=[toolset([add]), toolset(fns)]).run("x")
    assert result.output == "ok"
    assert script.returns[0] == {"sum": 5}
    assert script.returns[1][0] == "a dot" and script.returns[1][1].media_type == "image/png"


async def test_cancelling_the_run_cancels_the_call_and_ends_the_session_cancelled(
    make_runtime: Callable[..., Runtime],
) -> None:
    started = anyio.Event()

    async def slow() -> str:
        started.set()
        await anyio.sleep(30)
        return "late"

    runtime = make_runtime(["tool:slow"])
    script = Script([[("slow", {})], "never"])
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            async with runtime.session(
                tool_providers=[{"provider": FunctionTools([slow]), "effects": "none"}]
            ) as s:
                holder.append(s)
                await agent(script, toolset(s)).run("go")

        holder: list[Any] = []
        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
        tg.cancel_scope.cancel()
    session = holder[0]
    assert session.result().outcome == "cancelled"
    assert [c.outcome for c in runtime.inspect(session.run_id).calls] == ["cancelled"]


async def test_hostile_schemas_leave_one_tool_out_with_a_clear_log(caplog: pytest.LogCaptureFixture) -> None:
    from toolbridge.tools import ToolResult, ToolSpec

    class Odd:
        async def list_tools(self) -> list[ToolSpec]:
            return [
                ToolSpec("fine", "ok", {"type": "object", "properties": {"x": {"type": "string"}}}),
                ToolSpec("array", "odd", {"type": "array"}),
                ToolSpec("bad\x1b[31m", "odd", {"type": "object", "properties": []}),
                ToolSpec("wrong", "odd", {"type": "object", "properties": {"x": {"type": 7}}}),
            ]

        async def call_tool(self, name: str, args: Any) -> ToolResult:
            return ToolResult.of_text(f"{name} ran")

    script = Script([[("fine", {"x": "1"})], "ok"])
    with caplog.at_level(logging.WARNING, logger="toolbridge.integrations"):
        result = await agent(script, toolset(Odd())).run("x")
    assert result.output == "ok" and script.tool_names[0] == ["fine"]
    assert script.returns == ["fine ran"]
    lines = [r.getMessage() for r in caplog.records]
    assert len([line for line in lines if "left out tool" in line]) == 3
    assert not any("\x1b" in line for line in lines)


async def test_streamed_runs_are_governed_too(files: Files, make_runtime: Callable[..., Runtime]) -> None:
    notes = str(files.folder / "notes.txt")
    turns: list[Any] = [ToolCallPart("fs_read_text_file", {"path": notes}), "done"]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        turn = turns.pop(0)
        if isinstance(turn, str):
            yield turn
        else:
            from pydantic_ai.models.function import DeltaToolCall

            yield {0: DeltaToolCall(name=turn.tool_name, json_args=turn.args_as_json_str())}

    runtime = make_runtime([*READ, "model:scripted"])
    async with opened(runtime, files) as session:
        agent = Agent(
            FunctionModel(stream_function=stream), capabilities=[governed(session, model_id="scripted")]
        )
        async with agent.run_stream("read") as streamed:
            assert await streamed.get_output() == "done"
    assert session.result().usage["model_calls"] == 2
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]
    # without the model's grant the stream never starts
    async with opened(make_runtime(READ), files) as session:
        agent = Agent(
            FunctionModel(stream_function=stream), capabilities=[governed(session, model_id="scripted")]
        )
        with pytest.raises(PolicyError) as refused:
            async with agent.run_stream("read") as streamed:
                await streamed.get_output()
    assert refused.value.code == "PERMISSION_DENIED"


async def test_a_model_request_that_raises_keeps_its_reservation_and_fails_the_session(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime([*READ, "model:scripted"], max_cost_micros=100_000)
    events: list[tuple[str, Any]] = []
    runtime.subscribe(
        lambda e: events.append((e.type, e.data.get("code"))) if e.type.startswith("model.") else None
    )

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError(SECRET_SERVER_TEXT)

    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=0)
    with pytest.raises(RuntimeError):
        async with opened(runtime, files) as session:
            await Agent(
                FunctionModel(broken, model_name="scripted"),
                capabilities=[governed(session, model_id="scripted", prices=prices)],
            ).run("r")
    outcome = session.result()
    assert (outcome.outcome, outcome.error_code) == ("failed", "MODEL_FAILED")
    assert outcome.cost_micros > 0  # the reserved ceiling stays charged: the real cost is unknown
    assert events == [("model.started", None), ("model.completed", "MODEL_FAILED")]
    assert SECRET_SERVER_TEXT not in repr(outcome.to_dict())
    assert runtime.inspect(session.run_id).error_code == "MODEL_FAILED"
