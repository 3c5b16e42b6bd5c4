"""OpenAI Agents SDK adapter: the SDK's real `Runner` with a `Model` of our own returning scripted
tool calls, tools from a real server-filesystem through `as_tools(session)`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, ToolOutputImage, ToolOutputText
from ig_helpers import PIXEL, READ, SECRET_SERVER_TEXT, Files, Scripted, add_and_picture, calls, opened

from toolbridge.agent.models import ModelPrices
from toolbridge.errors import PolicyError
from toolbridge.functions import FunctionTools
from toolbridge.integrations.openai_agents import GovernedRunError, as_tools, run_hooks
from toolbridge.runtime import Runtime

NO_TRACING = RunConfig(tracing_disabled=True)


def agent(model: Scripted, tools: list[FunctionTool]) -> Agent[Any]:
    return Agent(name="assistant", model=model, tools=tools)


async def test_a_granted_call_reaches_the_server_and_is_journaled(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    notes = str(files.folder / "notes.txt")
    model = Scripted([("fs_read_text_file", {"path": notes})], "done")
    async with opened(runtime, files) as session:
        tools = await as_tools(session)
        result = await Runner.run(agent(model, tools), "read the notes", run_config=NO_TRACING)
    assert result.final_output == "done"
    assert model.tool_names[0] == ["fs_read_text_file", "fs_write_file", "fs_list_directory"]
    assert "buy milk" in model.seen[1]
    assert session.result().outcome == "succeeded"
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]


async def test_an_ungranted_call_never_reaches_the_server_and_the_run_ends_blocked(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    target = files.folder / "out.txt"
    model = Scripted([("fs_write_file", {"path": str(target), "content": "no"})], "never")
    async with opened(runtime, files) as session:
        tools = await as_tools(session)
        with pytest.raises(PolicyError) as stopped:
            await Runner.run(agent(model, tools), "write", run_config=NO_TRACING)
    assert isinstance(stopped.value, GovernedRunError)
    assert stopped.value.code == "PERMISSION_DENIED" and stopped.value.outcome == "blocked"
    assert stopped.value.message == "a required permission was not granted: tool:fs_write_file"
    assert not target.exists() and len(model.seen) == 1
    assert (session.result().outcome, session.result().error_code) == ("blocked", "PERMISSION_DENIED")
    assert calls(runtime, session) == [("fs_write_file", False, "not_started")]


async def test_a_budget_stop(files: Files, make_runtime: Callable[..., Runtime]) -> None:
    runtime = make_runtime(READ, max_cost_micros=1_000)
    read = ("fs_read_text_file", {"path": str(files.folder / "notes.txt")})
    model = Scripted([read], [read], [read], "never")
    async with opened(runtime, files, cost_micros=400) as session:
        tools = await as_tools(session)
        with pytest.raises(PolicyError) as stopped:
            await Runner.run(agent(model, tools), "read thrice", run_config=NO_TRACING)
    assert stopped.value.code == "BUDGET_EXCEEDED"
    assert (session.result().outcome, session.result().cost_micros) == ("blocked", 800)
    # the third never ran: refused, with its row (issue 21)
    assert [c[2] for c in calls(runtime, session)] == ["succeeded", "succeeded", "not_started"]


async def test_server_error_text_never_reaches_the_model(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    model = Scripted([("fs_read_text_file", {"path": "/etc/passwd"})], "never")
    async with opened(runtime, files) as session:
        tools = await as_tools(session)
        with pytest.raises(PolicyError) as stopped:
            await Runner.run(agent(model, tools), "read outside", run_config=NO_TRACING)
    assert stopped.value.code == "TOOL_ERROR"  # the server answered an error (issue 21: was unknown)
    assert SECRET_SERVER_TEXT not in str(stopped.value) and len(model.seen) == 1
    assert not any(SECRET_SERVER_TEXT in seen for seen in model.seen)
    assert session.result().outcome == "failed"


async def test_run_hooks_govern_model_calls(files: Files, make_runtime: Callable[..., Runtime]) -> None:
    notes = str(files.folder / "notes.txt")
    runtime = make_runtime([*READ, "model:scripted"])
    model = Scripted([("fs_read_text_file", {"path": notes})], "done")
    async with opened(runtime, files) as session:
        tools = await as_tools(session)
        result = await Runner.run(
            agent(model, tools), "r", hooks=run_hooks(session, model_id="scripted"), run_config=NO_TRACING
        )
    assert result.final_output == "done"
    outcome = session.result()
    assert outcome.usage == {"input_tokens": 20, "output_tokens": 10, "model_calls": 2}
    # without the model's grant: refused before the model is asked anything
    model = Scripted("never")
    async with opened(make_runtime(READ), files) as session:
        with pytest.raises(PolicyError) as refused:
            await Runner.run(
                agent(model, await as_tools(session)),
                "r",
                hooks=run_hooks(session, model_id="scripted"),
                run_config=NO_TRACING,
            )
    assert refused.value.code == "PERMISSION_DENIED" and "model:scripted" in str(refused.value)
    assert model.seen == []
    # a model budget at one micro-USD a context byte: the first request (about 40 bytes) fits, the
    # second (with the tool call and its result, several hundred bytes) does not
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=0)
    model = Scripted(
        [("fs_read_text_file", {"path": notes})], [("fs_read_text_file", {"path": notes})], "never"
    )
    runtime = make_runtime([*READ, "model:scripted"], max_cost_micros=150)
    sizes: list[int] = []
    runtime.subscribe(lambda e: sizes.append(e.data["context_bytes"]) if e.type == "model.started" else None)
    async with opened(runtime, files) as session:
        with pytest.raises(PolicyError) as stopped:
            await Runner.run(
                agent(model, await as_tools(session)),
                "r",
                hooks=run_hooks(session, model_id="scripted", prices=prices),
                run_config=NO_TRACING,
            )
    assert stopped.value.code == "BUDGET_EXCEEDED" and len(model.seen) == 1 and len(sizes) == 1
    assert session.result().cost_micros == 10 and calls(runtime, session) == [
        ("fs_read_text_file", True, "succeeded")
    ]


async def test_ungoverned_failures_are_returned_to_the_model(files: Files) -> None:
    notes = str(files.folder / "notes.txt")
    model = Scripted(
        [("read_text_file", {"path": "/etc/passwd"})], [("read_text_file", {"path": notes})], "ok"
    )
    result = await Runner.run(agent(model, await as_tools(files.provider)), "r", run_config=NO_TRACING)
    assert result.final_output == "ok"
    assert SECRET_SERVER_TEXT in model.seen[1] and "buy milk" in model.seen[2]


async def test_strict_schemas_are_converted_on_a_copy_and_nulls_dropped(files: Files) -> None:
    specs = {s.name: s for s in await files.provider.list_tools()}
    original = json.dumps(specs["read_text_file"].parameters, sort_keys=True)
    tools = {t.name: t for t in await as_tools(files.provider, strict=True)}
    read = tools["read_text_file"]
    assert read.strict_json_schema and read.params_json_schema["additionalProperties"] is False
    assert set(read.params_json_schema["required"]) == set(read.params_json_schema["properties"])
    assert json.dumps(specs["read_text_file"].parameters, sort_keys=True) == original  # untouched
    notes = str(files.folder / "notes.txt")
    model = Scripted([("read_text_file", {"path": notes, "head": None, "tail": None})], "ok")
    await Runner.run(agent(model, list(tools.values())), "r", run_config=NO_TRACING)
    assert "buy milk" in model.seen[1] and "Error" not in model.seen[1]


async def test_declared_tools_images_and_structured_results() -> None:
    add, pictures = add_and_picture()
    (add_tool,) = await as_tools([add])
    (picture_tool,) = await as_tools(pictures)
    assert await add_tool.on_invoke_tool(None, '{"a": 2, "b": 3}') == '{"sum":5}'
    assert "not a JSON object" in await add_tool.on_invoke_tool(None, "[1]")
    text, image = await picture_tool.on_invoke_tool(None, "{}")
    assert isinstance(text, ToolOutputText) and text.text == "a dot"
    assert isinstance(image, ToolOutputImage) and image.image_url == f"data:image/png;base64,{PIXEL}"
    model = Scripted([("math_add", {"a": 2, "b": 3}), ("picture", {})], "ok")
    result = await Runner.run(agent(model, [add_tool, picture_tool]), "r", run_config=NO_TRACING)
    assert result.final_output == "ok" and '{\\"sum\\":5}' in model.seen[1] and "input_image" in model.seen[1]


async def test_cancelling_the_run_ends_the_session_cancelled(make_runtime: Callable[..., Runtime]) -> None:
    started = anyio.Event()

    async def slow() -> str:
        """Slow."""
        started.set()
        await anyio.sleep(30)
        return "late"

    runtime = make_runtime(["tool:slow"])
    holder: list[Any] = []

    async def run() -> None:
        async with runtime.session(
            tool_providers=[{"provider": FunctionTools([slow]), "effects": "none"}]
        ) as s:
            holder.append(s)
            await Runner.run(
                agent(Scripted([("slow", {})], "never"), await as_tools(s)), "go", run_config=NO_TRACING
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
        tg.cancel_scope.cancel()
    assert holder[0].result().outcome == "cancelled"
    assert [c.outcome for c in runtime.inspect(holder[0].run_id).calls] == ["cancelled"]


async def test_hostile_schemas_leave_one_tool_out_with_a_clear_log(caplog: pytest.LogCaptureFixture) -> None:
    from toolbridge.tools import ToolResult, ToolSpec

    class Odd:
        async def list_tools(self) -> list[ToolSpec]:
            return [
                ToolSpec("fine", "ok", {"type": "object", "properties": {"x": {"type": "string"}}}),
                ToolSpec("str", "odd", "not a schema"),  # type: ignore[arg-type]
                ToolSpec("ref", "odd", {"type": "object", "properties": {"x": {"$ref": 5}}}),
            ]

        async def call_tool(self, name: str, args: Any) -> ToolResult:
            return ToolResult.of_text(f"{name} ran")

    with caplog.at_level(logging.WARNING, logger="toolbridge.integrations"):
        tools = await as_tools(Odd(), strict=True)
    assert [t.name for t in tools] == ["fine"] and tools[0].strict_json_schema
    assert len([r for r in caplog.records if "left out tool" in r.getMessage()]) == 2
    assert await tools[0].on_invoke_tool(None, '{"x": "1"}') == "fine ran"
