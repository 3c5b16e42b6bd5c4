"""One adapter-benchmark worker: a framework's tool path, toolbridge's or the framework's own MCP one.

Driven line by line by `bench/bench_adapters.py`, with the protocol of `bench/worker.py`: it
connects, warms up, prints `{"ready": true}`, then answers `run N` (N calls: one latency each in
µs, and the worker's CPU time per call), `mem` (peak RSS) and `quit`.

Every path calls server-everything's `echo` over stdio, through the framework:

- `pydantic-ai`: a `pydantic_ai.Agent` on a scripted `FunctionModel` that makes one tool call per
  step; a run of k calls is timed whole, each call counts run time / k (so it includes one
  agent step). Native: `MCPToolset(fastmcp Client(StdioTransport))` (pydantic-ai 2.x has no
  `MCPServerStdio` any more); toolbridge: `toolset(session)`.
- `openai-agents`: the SDK's `Runner` on a scripted `Model`, one tool call per turn, timed like
  pydantic-ai. Native: the SDK's `MCPServerStdio` in `mcp_servers=`; toolbridge:
  `as_tools(session)`.
- `langchain`: each call is `tool.ainvoke(<tool call>)`, which is what LangGraph's `ToolNode`
  does and returns a `ToolMessage`. Native: langchain-mcp-adapters 0.3.2 (its own virtualenv,
  `mcp<2`): the default tools (a new session, so a new server process, per call), and tools
  loaded on one kept session (`load_mcp_tools(session)`); toolbridge: `as_tools(session)`.

The toolbridge side is governed (`--mode toolbridge`): `runtime.session(...)` with the in-memory
journal, the grant for `echo`, every call checked and journaled; `--mode toolbridge-ungoverned`
gives the adapter the `McpToolProvider` itself, to tell the adapter's cost from the runtime's.
A session makes at most `PER_SESSION` calls (a session's limits count the whole session), then
a new one is opened, outside the timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

ARGS: dict[str, Any] = {"message": "hi"}
PER_SESSION = 200
RUN_CALLS = 10

Batch = Callable[[int], Awaitable[list[float]]]


def _runtime() -> Any:
    from toolbridge import create_runtime

    return create_runtime(
        permissions={"allow": ["tool:echo"]},
        limits={"max_tool_calls": PER_SESSION + 1, "max_duration_ms": 3_600_000},
    )


class Sessions:
    """Governed sessions over one toolbridge stdio client, renewed every `PER_SESSION` calls."""

    def __init__(self, stack: AsyncExitStack, command: list[str]):
        self.stack = stack
        self.command = command
        self.session: Any = None
        self.used = 0

    async def start(self, governed: bool = True) -> None:
        from toolbridge.bridge import McpToolProvider
        from toolbridge.clients import StdioClient

        self.provider = await self.stack.enter_async_context(
            McpToolProvider(StdioClient(self.command[0], self.command[1:]))
        )
        self.governed = governed
        await self.renew()

    @property
    def source(self) -> Any:
        return self.session if self.governed else self.provider

    async def renew(self) -> Any:
        if self.session is not None:
            await self.session.__aexit__(None, None, None)
            self.runtime.close()
        self.runtime = _runtime()
        binding = {"provider": self.provider, "include": ["echo"], "effects": "none"}
        self.session = await self.runtime.session(tool_providers=[binding]).__aenter__()
        self.used = 0
        return self.session

    async def ensure(self, n: int) -> bool:
        """A session with room for `n` more calls; whether it is a new one."""
        if self.governed and self.used + n > PER_SESSION:
            await self.renew()
            return True
        return False


def _run_batch(run: Callable[[int], Awaitable[float]]) -> Batch:
    async def batch(n: int) -> list[float]:
        out: list[float] = []
        while len(out) < n:
            k = min(RUN_CALLS, n - len(out))
            elapsed = await run(k)
            out.extend([elapsed / k * 1e6] * k)
        return out

    return batch


async def _pydantic_ai(stack: AsyncExitStack, command: list[str], mode: str) -> Batch:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def script(k: int) -> FunctionModel:
        def decide(messages: list[Any], info: Any) -> ModelResponse:
            done = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", ()))
            if done < k:
                return ModelResponse(parts=[ToolCallPart("echo", ARGS)])
            return ModelResponse(parts=[TextPart("done")])

        return FunctionModel(decide)

    if mode == "native":
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport
        from pydantic_ai.mcp import MCPToolset

        toolset: Any = MCPToolset(Client(StdioTransport(command=command[0], args=command[1:])))
        await stack.enter_async_context(toolset)

        async def run(k: int) -> float:
            agent = Agent(script(k), toolsets=[toolset])
            start = time.perf_counter()
            await agent.run("go")
            return time.perf_counter() - start

        return _run_batch(run)

    from toolbridge.integrations.pydantic_ai import toolset as tb_toolset

    sessions = Sessions(stack, command)
    await sessions.start(governed=mode == "toolbridge")

    async def run_governed(k: int) -> float:
        await sessions.ensure(k)
        agent = Agent(script(k), toolsets=[tb_toolset(sessions.source)])
        start = time.perf_counter()
        await agent.run("go")
        elapsed = time.perf_counter() - start
        sessions.used += k
        return elapsed

    return _run_batch(run_governed)


async def _openai_agents(stack: AsyncExitStack, command: list[str], mode: str) -> Batch:
    from agents import Agent, RunConfig, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        def __init__(self, k: int):
            self.left = k
            self.n = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.n += 1
            if self.left:
                self.left -= 1
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call", call_id=f"c{self.n}", name="echo", arguments=json.dumps(ARGS)
                    )
                ]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="m", type="message", role="assistant", status="completed", content=[text]
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    config = RunConfig(tracing_disabled=True)
    if mode == "native":
        from agents.mcp import MCPServerStdio

        server = MCPServerStdio(
            {"command": command[0], "args": command[1:]}, cache_tools_list=True, tool_filter=None
        )
        await stack.enter_async_context(server)

        async def run(k: int) -> float:
            agent = Agent(name="bench", model=Scripted(k), mcp_servers=[server])
            start = time.perf_counter()
            await Runner.run(agent, "go", run_config=config, max_turns=k + 2)
            return time.perf_counter() - start

        return _run_batch(run)

    from toolbridge.integrations.openai_agents import as_tools

    sessions = Sessions(stack, command)
    await sessions.start(governed=mode == "toolbridge")
    tools = await as_tools(sessions.source)

    async def run_governed(k: int) -> float:
        nonlocal tools
        if await sessions.ensure(k):
            tools = await as_tools(sessions.source)
        agent = Agent(name="bench", model=Scripted(k), tools=tools)
        start = time.perf_counter()
        await Runner.run(agent, "go", run_config=config, max_turns=k + 2)
        elapsed = time.perf_counter() - start
        sessions.used += k
        return elapsed

    return _run_batch(run_governed)


async def _langchain(stack: AsyncExitStack, command: list[str], mode: str) -> Batch:
    counter = iter(range(10**9))

    def tool_call() -> dict[str, Any]:
        return {"name": "echo", "args": ARGS, "id": f"c{next(counter)}", "type": "tool_call"}

    if mode.startswith("toolbridge"):
        from toolbridge.integrations.langchain import as_tools

        sessions = Sessions(stack, command)
        await sessions.start(governed=mode == "toolbridge")
        tools = {t.name: t for t in await as_tools(sessions.source)}

        async def batch(n: int) -> list[float]:
            nonlocal tools
            if await sessions.ensure(n):
                tools = {t.name: t for t in await as_tools(sessions.source)}
            out = []
            for _ in range(n):
                start = time.perf_counter()
                await tools["echo"].ainvoke(tool_call())
                out.append((time.perf_counter() - start) * 1e6)
            sessions.used += n
            return out

        return batch

    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    connection = {"command": command[0], "args": command[1:], "transport": "stdio"}
    client = MultiServerMCPClient({"everything": connection})
    if mode == "native-default":
        echo = {t.name: t for t in await client.get_tools()}["echo"]
    else:
        session = await stack.enter_async_context(client.session("everything"))
        echo = {t.name: t for t in await load_mcp_tools(session)}["echo"]

    async def native_batch(n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            await echo.ainvoke(tool_call())
            out.append((time.perf_counter() - start) * 1e6)
        return out

    return native_batch


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True, choices=["pydantic-ai", "openai-agents", "langchain"])
    parser.add_argument(
        "--mode",
        required=True,
        choices=["toolbridge", "toolbridge-ungoverned", "native", "native-default", "native-session"],
    )
    parser.add_argument("--server", required=True, help="JSON list: the stdio server's command line")
    opts = parser.parse_args()
    command: list[str] = json.loads(opts.server)
    async with AsyncExitStack() as stack:
        if opts.framework == "pydantic-ai":
            batch = await _pydantic_ai(stack, command, opts.mode)
        elif opts.framework == "openai-agents":
            batch = await _openai_agents(stack, command, opts.mode)
        else:
            batch = await _langchain(stack, command, opts.mode)
        await batch(3)  # warm-up: connection, listing, caches
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line or line == "quit":
                break
            if line == "mem":
                maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                print(json.dumps({"maxrss_kb": maxrss}), flush=True)
            elif line.startswith("run "):
                n = int(line.split()[1])
                cpu = time.process_time()
                lat = await batch(n)
                cpu_us = (time.process_time() - cpu) / n * 1e6
                print(json.dumps({"lat_us": lat, "cpu_us": cpu_us}), flush=True)
            else:
                print(json.dumps({"error": f"unknown command {line!r}"}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
