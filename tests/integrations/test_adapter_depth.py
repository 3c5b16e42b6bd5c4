"""Hostile arguments through every adapter: a model sending arguments nested 100 or 5,000 levels
deep, with each framework's own test model and runner. Nothing raises a raw `RecursionError`; a
governed session records the call refused (`not_started`, `INVALID_INPUT`, the tool's name) and
never `succeeded`; the tool never runs."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.usage import Usage
from ig_helpers import Scripted
from openai.types.responses import ResponseFunctionToolCall

from toolbridge.errors import PolicyError
from toolbridge.functions import FunctionTools
from toolbridge.integrations import langchain as lc
from toolbridge.integrations import openai_agents as oa
from toolbridge.integrations import pydantic_ai as pa
from toolbridge.runtime import GovernedSession, Runtime, create_runtime

DEPTHS = [100, 5_000]
ran: list[Any] = []


def echo(x: object = None) -> str:
    """Echo nothing: counts its calls."""
    ran.append(x)
    return "ok"


def deep_text(depth: int) -> str:
    return '{"x": ' + '{"a": ' * depth + "1" + "}" * (depth + 1)


def deep_value(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return {"x": value}


@pytest.fixture
def runtime() -> Any:
    ran.clear()
    made = create_runtime(
        permissions={"allow": ["tool:echo", "effect:read", "model:m"]}, limits={"max_duration_ms": 60_000}
    )
    yield made
    made.close()


@asynccontextmanager
async def session(runtime: Runtime) -> AsyncIterator[GovernedSession]:
    async with runtime.session(tool_providers=[{"provider": FunctionTools([echo]), "effects": "read"}]) as s:
        yield s


def refused(runtime: Runtime, s: GovernedSession) -> None:
    assert (s.result().outcome, s.result().error_code) == ("failed", "INVALID_INPUT")
    rows = runtime.inspect(s.run_id).calls
    assert [(c.tool_id, c.request_sent, c.outcome, c.error_code) for c in rows] == [
        ("echo", False, "not_started", "INVALID_INPUT")
    ]
    assert ran == []


# -- OpenAI Agents SDK -----------------------------------------------------------------------------


class RawArguments(Scripted):
    """Answers one tool call with the given raw argument text, then "done"."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        turn = self.turns[0]
        if not isinstance(turn, tuple):
            return await super().get_response(*args, **kwargs)
        self.turns.pop(0)
        call = ResponseFunctionToolCall(
            type="function_call", call_id="c1", id="f1", name=turn[0], arguments=turn[1], status="completed"
        )
        return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)


NO_TRACING = RunConfig(tracing_disabled=True)


async def test_openai_agents_governed(runtime: Runtime) -> None:
    model = RawArguments(("echo", deep_text(100)), "never")
    async with session(runtime) as s:
        agent = Agent(name="a", model=model, tools=await oa.as_tools(s))
        with pytest.raises(oa.GovernedRunError) as stopped:
            await Runner.run(agent, "x", hooks=oa.run_hooks(s, model_id="m"), run_config=NO_TRACING)
        assert stopped.value.code == "INVALID_INPUT"
        assert s.result().outcome == "failed"  # read inside the session: not `succeeded`
    refused(runtime, s)


async def test_openai_agents_sdk_parses_first_past_a_thousand_levels(runtime: Runtime) -> None:
    """The SDK (0.24) parses arguments before any tool or hook: its RecursionError is its own. The
    session it leaves ends failed, with no call recorded (documented on the adapter's page)."""
    model = RawArguments(("echo", deep_text(5_000)), "never")
    with pytest.raises(RecursionError):
        async with session(runtime) as s:
            agent = Agent(name="a", model=model, tools=await oa.as_tools(s))
            await Runner.run(agent, "x", hooks=oa.run_hooks(s, model_id="m"), run_config=NO_TRACING)
    assert (s.result().outcome, s.result().error_code) == ("failed", "MODEL_FAILED")  # under run_hooks
    assert runtime.inspect(s.run_id).calls == [] and ran == []


async def test_openai_agents_ungoverned_tells_the_model(runtime: Runtime) -> None:
    model = RawArguments(("echo", deep_text(100)), "done")
    agent = Agent(name="a", model=model, tools=await oa.as_tools(FunctionTools([echo])))
    result = await Runner.run(agent, "x", run_config=NO_TRACING)
    assert result.final_output == "done" and ran == []
    assert "nest deeper than 64 levels; the tool was not called" in model.seen[-1]


# -- pydantic-ai -----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", DEPTHS)
async def test_pydantic_ai_governed(runtime: Runtime, depth: int) -> None:
    from pydantic_ai import Agent as PAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    turns: list[Any] = [[ToolCallPart("echo", deep_text(depth))], [TextPart("never")]]

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=turns.pop(0))

    async with session(runtime) as s:
        if depth > 200:  # pydantic-core's parser stops at 200 levels: pydantic-ai asks the model again
            result = await PAgent(FunctionModel(script, model_name="m"), toolsets=[pa.toolset(s)]).run("x")
            assert result.output == "never" and ran == []
            assert runtime.inspect(s.run_id).calls == []  # no call was made: nothing recorded
            return
        with pytest.raises(PolicyError) as stopped:
            await PAgent(FunctionModel(script, model_name="m"), toolsets=[pa.toolset(s)]).run("x")
        assert stopped.value.code == "INVALID_INPUT"
    refused(runtime, s)


# -- LangChain / LangGraph ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", DEPTHS)
async def test_langchain_governed(runtime: Runtime, depth: int) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    call = {"name": "echo", "args": deep_value(depth), "id": "c1", "type": "tool_call"}
    model = GenericFakeChatModel(
        messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage("never")])
    )
    async with session(runtime) as s:
        tools = await lc.as_tools(s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = create_react_agent(model.bind(tools=[convert_to_openai_tool(t) for t in tools]), tools)
        with pytest.raises(PolicyError) as stopped:
            await graph.ainvoke(
                {"messages": [HumanMessage("x")]}, config={"callbacks": [lc.governor(s, model_id="m")]}
            )
        assert stopped.value.code == "INVALID_INPUT"
    refused(runtime, s)


async def test_langchain_ungoverned_answers_with_an_error_message() -> None:
    ran.clear()
    (tool,) = await lc.as_tools(FunctionTools([echo]))
    call = {"name": "echo", "args": deep_value(5_000), "id": "c1", "type": "tool_call"}
    message = await tool.ainvoke(call)
    assert message.status == "error" and "nest deeper than 64 levels" in message.content and ran == []
    assert (
        await tool.ainvoke({"name": "echo", "args": {"x": 1}, "id": "c2", "type": "tool_call"})
    ).content == "ok"
