"""LangChain / LangGraph adapter: a real LangGraph agent (`create_react_agent`, `ToolNode`)
driven by langchain-core's fake chat model, tools from a real server-filesystem through
`as_tools(session)`; and LangChain tools governed beside MCP tools through `from_tools`."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from ig_helpers import READ, SECRET_SERVER_TEXT, Files, add_and_picture, calls, opened
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from toolbridge.agent.models import ModelPrices
from toolbridge.errors import PolicyError, ToolError
from toolbridge.functions import FunctionTools
from toolbridge.integrations.langchain import as_tools, from_tools, governor
from toolbridge.runtime import Runtime

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, create_react_agent


class Scripted(GenericFakeChatModel):
    """langchain-core's fake chat model, recording every conversation it is given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(*turns: Any) -> Scripted:
    messages = []
    for i, turn in enumerate(turns):
        if isinstance(turn, str):
            messages.append(AIMessage(content=turn))
        else:
            calls_ = [
                {"name": n, "args": a, "id": f"call_{i}_{j}", "type": "tool_call"}
                for j, (n, a) in enumerate(turn)
            ]
            messages.append(AIMessage(content="", tool_calls=calls_))
    return Scripted(messages=iter(messages))


def react(model: Scripted, tools: list[BaseTool]) -> Any:
    bound = model.bind(tools=[convert_to_openai_tool(t) for t in tools])  # the fake model has no bind_tools
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(bound, tools)


def text_seen(model: Scripted) -> str:
    return "\n".join(repr(m) for conversation in model.seen for m in conversation)


async def test_a_granted_call_reaches_the_server_and_is_journaled(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    notes = str(files.folder / "notes.txt")
    model = script([("fs_read_text_file", {"path": notes})], "done")
    async with opened(runtime, files) as session:
        tools = await as_tools(session)
        assert [t.name for t in tools] == ["fs_read_text_file", "fs_write_file", "fs_list_directory"]
        assert tools[0].args_schema["properties"]["path"]["type"] == "string"  # the JSON Schema as is
        out = await react(model, tools).ainvoke({"messages": [HumanMessage("read the notes")]})
    assert out["messages"][-1].content == "done"
    (reply,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "buy milk" in reply.content and reply.status == "success"
    assert session.result().outcome == "succeeded"
    assert calls(runtime, session) == [("fs_read_text_file", True, "succeeded")]


async def test_an_ungranted_call_never_reaches_the_server_and_the_run_ends_blocked(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    target = files.folder / "out.txt"
    model = script([("fs_write_file", {"path": str(target), "content": "no"})], "never")
    async with opened(runtime, files) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as stopped:
            await agent.ainvoke({"messages": [HumanMessage("write")]})
    assert stopped.value.code == "PERMISSION_DENIED" and "tool:fs_write_file" in stopped.value.message
    assert not target.exists() and len(model.seen) == 1  # the model was not asked again
    assert (session.result().outcome, session.result().error_code) == ("blocked", "PERMISSION_DENIED")
    assert calls(runtime, session) == [("fs_write_file", False, "not_started")]


async def test_a_budget_stop(files: Files, make_runtime: Callable[..., Runtime]) -> None:
    runtime = make_runtime(READ, max_cost_micros=1_000)
    read = ("fs_read_text_file", {"path": str(files.folder / "notes.txt")})
    model = script([read], [read], [read], "never")
    async with opened(runtime, files, cost_micros=400) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as stopped:
            await agent.ainvoke({"messages": [HumanMessage("read thrice")]})
    assert stopped.value.code == "BUDGET_EXCEEDED"
    assert (session.result().outcome, session.result().cost_micros) == ("blocked", 800)
    # the third never ran: refused, with its row (issue 21)
    assert [c[2] for c in calls(runtime, session)] == ["succeeded", "succeeded", "not_started"]


async def test_server_error_text_never_reaches_the_model(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime(READ)
    model = script([("fs_read_text_file", {"path": "/etc/passwd"})], "never")
    async with opened(runtime, files) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as stopped:
            await agent.ainvoke({"messages": [HumanMessage("read outside")]})
    assert stopped.value.code == "TOOL_ERROR"  # the server answered an error (issue 21: was unknown)
    assert SECRET_SERVER_TEXT not in str(stopped.value) and SECRET_SERVER_TEXT not in text_seen(model)
    assert len(model.seen) == 1
    assert session.result().outcome == "failed"


async def test_the_governor_checks_model_grants_and_budgets(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    notes = str(files.folder / "notes.txt")
    # granted: both model calls are counted, the tool call journaled
    runtime = make_runtime([*READ, "model:scripted"])  # the fake model reports ls_provider "scripted"
    model = script([("fs_read_text_file", {"path": notes})], "done")
    async with opened(runtime, files) as session:
        agent = react(model, await as_tools(session))
        await agent.ainvoke({"messages": [HumanMessage("r")]}, config={"callbacks": [governor(session)]})
    assert session.result().outcome == "succeeded" and session.result().usage["model_calls"] == 2
    # no grant for the model: refused before it is asked anything
    model = script("never")
    async with opened(make_runtime(READ), files) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as refused:
            await agent.ainvoke({"messages": [HumanMessage("r")]}, config={"callbacks": [governor(session)]})
    assert refused.value.code == "PERMISSION_DENIED" and "model:scripted" in refused.value.message
    assert model.seen == []
    # a model budget: the second call's reservation does not fit
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=0)
    model = script([("fs_read_text_file", {"path": notes})], "never")
    # at one micro-USD a context byte: the first request (about 110 bytes) fits, the second (the
    # conversation with the tool call and its result, about 600 bytes) does not
    async with opened(make_runtime([*READ, "model:scripted"], max_cost_micros=300), files) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as stopped:
            await agent.ainvoke(
                {"messages": [HumanMessage("r")]},
                config={"callbacks": [governor(session, model_id="scripted", prices=prices)]},
            )
    assert stopped.value.code == "BUDGET_EXCEEDED" and len(model.seen) == 1
    assert session.result().usage["model_calls"] == 1


async def test_from_tools_governs_a_langchain_tool_beside_an_mcp_tool(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    ran: list[str] = []

    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        ran.append(text)
        return text.upper()

    @tool
    def erase(path: str) -> str:
        """Erase a file."""
        ran.append(f"erase {path}")
        return "erased"

    runtime = make_runtime([*READ, "tool:lc_shout"])
    lc = {"provider": from_tools([shout, erase]), "prefix": "lc_", "effects": "read"}
    notes = str(files.folder / "notes.txt")
    model = script(
        [("fs_read_text_file", {"path": notes}), ("lc_shout", {"text": "hi"})],
        [("lc_erase", {"path": notes})],
        "never",
    )
    async with runtime.session(tool_providers=[files.binding(), lc]) as session:
        tools = await as_tools(session)
        assert {"lc_shout", "lc_erase", "fs_read_text_file"} <= {t.name for t in tools}
        agent = react(model, tools)
        with pytest.raises(PolicyError) as refused:
            await agent.ainvoke({"messages": [HumanMessage("go")]})
    assert refused.value.code == "PERMISSION_DENIED" and "tool:lc_erase" in refused.value.message
    assert ran == ["hi"]  # the ungranted LangChain tool never ran
    second = text_seen(model)
    assert "HI" in second and "buy milk" in second
    assert sorted(calls(runtime, session)) == [
        ("fs_read_text_file", True, "succeeded"),
        ("lc_erase", False, "not_started"),
        ("lc_shout", True, "succeeded"),
    ]


async def test_from_tools_failures_and_results_through_a_session(
    make_runtime: Callable[..., Runtime],
) -> None:
    @tool
    def broken(x: int) -> str:
        """Always fails."""
        raise ValueError("internal detail 42")

    runtime = make_runtime(["tool:broken"])
    async with runtime.session(
        tool_providers=[{"provider": from_tools([broken]), "effects": "none"}]
    ) as session:
        with pytest.raises(PolicyError) as failed:
            await session.call_tool("broken", {"x": 1})
    assert failed.value.code == "TOOL_FAILED" and "42" not in failed.value.message
    # ungoverned, the model may see the tool's text to correct its call
    provider = from_tools([broken])
    node_tools = await as_tools(provider)
    message = await node_tools[0].ainvoke(
        {"name": "broken", "args": {"x": 1}, "id": "c1", "type": "tool_call"}
    )
    assert message.status == "error" and "internal detail 42" in message.content


async def test_ungoverned_tools_in_a_tool_node_images_and_structured_results() -> None:
    add, pictures = add_and_picture()
    tools = [*(await as_tools([add])), *(await as_tools(pictures))]
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    node = graph.compile()
    call = AIMessage(
        content="",
        tool_calls=[
            {"name": "math_add", "args": {"a": 2, "b": 3}, "id": "a", "type": "tool_call"},
            {"name": "picture", "args": {}, "id": "p", "type": "tool_call"},
        ],
    )
    out = await node.ainvoke({"messages": [call]})
    added, pictured = out["messages"][1:]
    assert added.content == '{"sum":5}' and added.artifact == {"structured_content": {"sum": 5}}
    assert pictured.content[0]["text"] == "a dot"
    assert pictured.content[1]["type"] == "image" and pictured.content[1]["mime_type"] == "image/png"


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
            agent = react(script([("slow", {})], "never"), await as_tools(s))
            await agent.ainvoke({"messages": [HumanMessage("go")]})

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await started.wait()
        tg.cancel_scope.cancel()
    assert holder[0].result().outcome == "cancelled"
    assert [c.outcome for c in runtime.inspect(holder[0].run_id).calls] == ["cancelled"]


async def test_hostile_schemas_leave_one_tool_out_with_a_clear_log(caplog: pytest.LogCaptureFixture) -> None:
    from toolbridge.tools import ToolResult, ToolSpec

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"x": deep}}

    class Odd:
        async def list_tools(self) -> list[ToolSpec]:
            return [
                ToolSpec("fine", "ok", {"type": "object", "properties": {"x": {"type": "string"}}}),
                ToolSpec("deep", "odd", deep),
                ToolSpec("req", "odd", {"type": "object", "required": "x"}),
            ]

        async def call_tool(self, name: str, args: Any) -> ToolResult:
            return ToolResult.of_text(f"{name} ran")

    with caplog.at_level(logging.WARNING, logger="toolbridge.integrations"):
        tools = await as_tools(Odd())
    assert [t.name for t in tools] == ["fine"]
    lines = [r.getMessage() for r in caplog.records if "left out tool" in r.getMessage()]
    assert len(lines) == 2 and "'deep'" in lines[0] and "'req'" in lines[1]
    assert await tools[0].ainvoke({"x": "1"}) == "fine ran"


async def test_from_tools_maps_langchain_results_to_tool_results() -> None:
    from langchain_core.messages.content import create_image_block, create_text_block

    from toolbridge.content import ImagePart, TextPart

    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

    @tool(response_format="content_and_artifact")
    def photo() -> tuple[list[Any], None]:
        """A photo."""
        return [create_text_block("a dot"), create_image_block(base64=pixel, mime_type="image/png")], None

    @tool(response_format="content_and_artifact")
    def data() -> tuple[str, dict[str, Any]]:
        """Some data."""
        return "3 rows", {"structured_content": {"rows": 3}}

    @tool
    def number() -> int:
        """A number."""
        return 42

    provider = from_tools([photo, data, number])
    specs = {s.name: s for s in await provider.list_tools()}
    assert specs["photo"].parameters == {"properties": {}, "type": "object"}
    shown = await provider.call_tool("photo", {})
    assert shown.kind == "parts"
    assert shown.parts[0] == TextPart("a dot") and shown.parts[1] == ImagePart(pixel, "image/png")
    rows = await provider.call_tool("data", {})
    assert rows.kind == "structured" and rows.structured == {"rows": 3}
    assert (await provider.call_tool("number", {})).to_text() == "42"
    with pytest.raises(ToolError) as unknown:
        await provider.call_tool("nope", {})
    assert unknown.value.code == "ERR_TOOL_FAILED"


async def test_the_governor_also_governs_text_models(make_runtime: Callable[..., Runtime]) -> None:
    from langchain_core.language_models.fake import FakeListLLM

    runtime = make_runtime(["model:fake"], max_model_calls=1)
    llm = FakeListLLM(responses=["one", "two"])
    async with runtime.session() as session:
        config: Any = {"callbacks": [governor(session, model_id="fake")]}
        assert await llm.ainvoke("hi", config=config) == "one"
        with pytest.raises(PolicyError) as stopped:
            await llm.ainvoke("again", config=config)
    assert stopped.value.code == "LIMIT_EXCEEDED" and "max_model_calls" in stopped.value.message
    assert session.result().usage["model_calls"] == 1


async def test_streamed_graph_runs_are_governed_too(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime([*READ, "model:scripted"])
    target = files.folder / "out.txt"
    model = script(
        [("fs_read_text_file", {"path": str(files.folder / "notes.txt")})],
        [("fs_write_file", {"path": str(target), "content": "no"})],
        "never",
    )
    updates: list[str] = []
    async with opened(runtime, files) as session:
        agent = react(model, await as_tools(session))
        with pytest.raises(PolicyError) as stopped:
            async for chunk in agent.astream(
                {"messages": [HumanMessage("copy")]}, config={"callbacks": [governor(session)]}
            ):
                updates.extend(chunk)
    assert stopped.value.code == "PERMISSION_DENIED" and not target.exists()
    assert updates == ["agent", "tools", "agent"]  # the refused tool step yields nothing
    assert session.result().usage["model_calls"] == 2
    assert calls(runtime, session) == [
        ("fs_read_text_file", True, "succeeded"),
        ("fs_write_file", False, "not_started"),
    ]


class Broken(Scripted):
    """A chat model whose every call raises (a provider outage)."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(SECRET_SERVER_TEXT)


async def test_a_model_call_that_raises_keeps_its_reservation_and_fails_the_session(
    files: Files, make_runtime: Callable[..., Runtime]
) -> None:
    runtime = make_runtime([*READ, "model:scripted"], max_cost_micros=100_000)
    events: list[tuple[str, Any]] = []
    runtime.subscribe(
        lambda e: events.append((e.type, e.data.get("code"))) if e.type.startswith("model.") else None
    )
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=0)
    model = Broken(messages=iter([]))
    with pytest.raises(RuntimeError):
        async with opened(runtime, files) as session:
            agent = react(model, await as_tools(session))
            await agent.ainvoke(
                {"messages": [HumanMessage("r")]},
                config={"callbacks": [governor(session, model_id="scripted", prices=prices)]},
            )
    outcome = session.result()
    assert (outcome.outcome, outcome.error_code) == ("failed", "MODEL_FAILED")
    assert outcome.cost_micros > 0  # the reserved ceiling stays charged: the real cost is unknown
    assert events == [("model.started", None), ("model.completed", "MODEL_FAILED")]
    assert SECRET_SERVER_TEXT not in repr(outcome.to_dict())
