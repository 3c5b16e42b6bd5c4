"""Odd names and schemas from a real hostile MCP server (tests/faults/hostile_server.py
`--odd-params`): every adapter keeps the usable tools, leaves each unusable one out with one clear
log line, and never crashes; through a session."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner
from ig_helpers import Scripted
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.integrations import langchain, openai_agents, pydantic_ai
from toolbridge.runtime import Runtime

SERVER = str(Path(__file__).resolve().parents[1] / "faults" / "hostile_server.py")
LEFT_OUT = {"bad_type", "deep_params"}


def _left_out(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "left out tool" in r.getMessage()]


async def test_every_adapter_keeps_the_usable_tools_of_a_hostile_server(
    make_runtime: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> None:
    runtime = make_runtime(["tool:echo"])
    provider = McpToolProvider(StdioClient(sys.executable, [SERVER, "--odd-params"]))
    caplog.set_level(logging.WARNING, logger="toolbridge.integrations")
    odd = ["bad_type", "deep_params", "evil\x1b[2J name\u200b", "x" * 300, "echo"]
    binding = {"provider": provider, "effects": "none", "include": odd}
    async with provider, runtime.session(tool_providers=[binding]) as session:
        listed = {spec.name for spec in await session.list_tools()}
        assert "echo" in listed and listed >= LEFT_OUT and len(listed) == 5
        assert all(len(name) <= 64 and name.isascii() and name.isprintable() for name in listed)

        # LangChain: the tools are built now; the two unusable ones are left out and logged
        lc_tools = await langchain.as_tools(session)
        kept = {t.name for t in lc_tools}
        assert kept == listed - LEFT_OUT and len(kept) == 3
        lines = _left_out(caplog)
        assert len(lines) == 2 and all(line.startswith("langchain.as_tools: left out tool") for line in lines)
        assert not any("\x1b" in line or "\u200b" in line for line in lines)
        echo = next(t for t in lc_tools if t.name == "echo")
        assert await echo.ainvoke({"text": "hi"}) == "hi"

        # OpenAI Agents SDK, strict schemas (converted on copies)
        caplog.clear()
        agents_tools = await openai_agents.as_tools(session, strict=True)
        assert {t.name for t in agents_tools} == kept and len(_left_out(caplog)) == 2
        model = Scripted([("echo", {"text": "from the agents sdk"})], "ok")
        agent = AgentsAgent(name="a", model=model, tools=agents_tools)
        result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
        assert result.final_output == "ok" and "from the agents sdk" in model.seen[1]

        # pydantic-ai: listed at every step, logged once per tool
        caplog.clear()
        seen: list[Any] = []

        def decide(messages: list[Any], info: Any) -> ModelResponse:
            seen.append(sorted(t.name for t in info.function_tools))
            returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
            if not returns:
                return ModelResponse(parts=[ToolCallPart("echo", {"text": "from pydantic-ai"})])
            return ModelResponse(parts=[TextPart(str(returns[0].content))])

        out = await Agent(FunctionModel(decide), toolsets=[pydantic_ai.toolset(session)]).run("go")
        assert out.output == "from pydantic-ai"
        assert seen[0] == seen[1] == sorted(kept) and len(_left_out(caplog)) == 2
    assert session.result().outcome == "succeeded"
    assert [c.tool_id for c in runtime.inspect(session.run_id).calls] == ["echo", "echo", "echo"]
