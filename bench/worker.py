"""One benchmark worker: a single MCP client library, driven line by line from `bench/run.py`.

Each library runs in its own process (and, for fastmcp and langchain-mcp-adapters, in its own
virtualenv, since langchain-mcp-adapters 0.3.2 needs `mcp<2`), so that their import costs and
memory do not mix. The worker connects once, warms up, prints `{"ready": true}`, then answers
commands read from stdin, one JSON line each:

- `run N`: N sequential `echo` calls; answers `{"lat_us": [...], "cpu_us": x}` (one latency per
  call, and the worker's own CPU time per call, both in µs: the CPU time does not count waiting
  for the server, so it shows the client's own cost even on a busy machine);
- `mem`: answers `{"maxrss_kb": ...}`, the worker's peak resident memory;
- `quit`: closes the client and exits.

Libraries (`--lib`):

- `raw`: the official SDK's `mcp.Client` (`call_tool`), the reference;
- `toolbridge`: `McpToolProvider(StdioClient | HttpClient).call_tool`;
- `governed`: a declared tool (`define_mcp_tool`) called by an agent with a `ScriptedModel` under
  `create_runtime`; one run makes N calls, and each call is reported as the run's time / N (so it
  includes one model step per call);
- `session`: the same declared tool called through `runtime.session(...).call_tool` (no agent,
  no model); one session makes N calls, each timed on its own;
- `fastmcp`: `fastmcp.Client(...).call_tool`;
- `langchain`: langchain-mcp-adapters' default tools (`MultiServerMCPClient.get_tools()`, then
  `tool.ainvoke`), which open a new session (a new server process on stdio) for every call.

Server (`--server`): `stdio:<json list of the command>` or `http:<url>`; the tool (`--tool`, with
`--args` as JSON) is server-everything's `echo` by default. The governed path needs a tool with
structured content (a declared MCP tool accepts only that), so it is measured on
`get-structured-content`, against the raw SDK calling the same tool.
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

Call = Callable[[], Awaitable[Any]]
TOOL = "echo"
ARGS: dict[str, Any] = {"message": "hi"}


async def _raw(stack: AsyncExitStack, kind: str, target: Any) -> Call:
    from mcp import Client, StdioServerParameters

    server: Any = StdioServerParameters(command=target[0], args=target[1:]) if kind == "stdio" else target
    client = await stack.enter_async_context(Client(server))

    async def call() -> Any:
        return await client.call_tool(TOOL, ARGS)

    return call


def _toolbridge_client(kind: str, target: Any) -> Any:
    from toolbridge.clients import HttpClient, StdioClient

    return StdioClient(target[0], target[1:]) if kind == "stdio" else HttpClient(target)


async def _toolbridge(stack: AsyncExitStack, kind: str, target: Any) -> Call:
    from toolbridge.bridge import McpToolProvider

    provider = await stack.enter_async_context(McpToolProvider(_toolbridge_client(kind, target)))

    async def call() -> Any:
        return await provider.call_tool(TOOL, ARGS)

    return call


async def _governed(stack: AsyncExitStack, kind: str, target: Any) -> Callable[[int], Awaitable[float]]:
    from toolbridge import Agent, ScriptedModel, create_runtime, define_mcp_tool

    client = await stack.enter_async_context(_toolbridge_client(kind, target))

    echo = define_mcp_tool(
        id="bench.echo",
        version="1",
        description="The tool under test.",
        remote_name=TOOL,
        input={"type": "object", "additionalProperties": True},
        output={"type": "object"},
        effects="read",
        capabilities=[],
        client=client,
    )

    async def run(n: int) -> float:
        runtime = create_runtime(
            permissions={"allow": ["model:scripted", "tool:bench.echo", "effect:read"]},
            limits={
                "max_tool_calls": n + 1,
                "max_steps": n + 2,
                "max_model_calls": n + 2,
                "max_duration_ms": 600_000,
            },
        )
        turns: list[dict[str, Any]] = [
            {"tool_calls": [{"name": "bench_echo", "arguments": ARGS}]} for _ in range(n)
        ]
        turns.append({"text": "done"})
        agent = Agent(ScriptedModel(turns), tools=[echo], max_steps=n + 2)
        start = time.perf_counter()
        result = await runtime.run(agent, "go")
        elapsed = time.perf_counter() - start
        runtime.close()
        if result.outcome != "succeeded":
            raise RuntimeError(f"governed run ended {result.outcome}: {result.error_code}")
        return elapsed

    return run


async def _session(stack: AsyncExitStack, kind: str, target: Any) -> Callable[[int], Awaitable[list[float]]]:
    from toolbridge import create_runtime, define_mcp_tool

    client = await stack.enter_async_context(_toolbridge_client(kind, target))
    echo = define_mcp_tool(
        id="bench.echo",
        version="1",
        description="The tool under test.",
        remote_name=TOOL,
        input={"type": "object", "additionalProperties": True},
        output={"type": "object"},
        effects="read",
        capabilities=[],
        client=client,
    )

    async def run(n: int) -> list[float]:
        runtime = create_runtime(
            permissions={"allow": ["tool:bench.echo", "effect:read"]},
            limits={"max_tool_calls": n + 1, "max_duration_ms": 600_000},
        )
        out: list[float] = []
        async with runtime.session(tools=[echo]) as session:
            for _ in range(n):
                start = time.perf_counter()
                await session.call_tool("bench_echo", ARGS)
                out.append((time.perf_counter() - start) * 1e6)
        runtime.close()
        if not session.result().ok:
            raise RuntimeError(f"governed session ended {session.result().outcome}")
        return out

    return run


async def _fastmcp(stack: AsyncExitStack, kind: str, target: Any) -> Call:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport: Any = StdioTransport(command=target[0], args=target[1:]) if kind == "stdio" else target
    client = await stack.enter_async_context(Client(transport))

    async def call() -> Any:
        return await client.call_tool(TOOL, ARGS)

    return call


async def _langchain(stack: AsyncExitStack, kind: str, target: Any) -> Call:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    connection: dict[str, Any] = (
        {"command": target[0], "args": target[1:], "transport": "stdio"}
        if kind == "stdio"
        else {"url": target, "transport": "streamable_http"}
    )
    client = MultiServerMCPClient({"everything": connection})
    tools = {tool.name: tool for tool in await client.get_tools()}
    echo = tools[TOOL]

    async def call() -> Any:
        return await echo.ainvoke(ARGS)

    return call


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--lib", required=True, choices=["raw", "toolbridge", "governed", "session", "fastmcp", "langchain"]
    )
    parser.add_argument("--server", required=True)
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--args", default='{"message": "hi"}')
    opts = parser.parse_args()
    global TOOL, ARGS
    TOOL, ARGS = opts.tool, json.loads(opts.args)
    kind, _, rest = opts.server.partition(":")
    target: Any = json.loads(rest) if kind == "stdio" else rest

    async with AsyncExitStack() as stack:
        batch: Callable[[int], Awaitable[list[float]]]
        if opts.lib == "governed":
            run = await _governed(stack, kind, target)

            async def batch(n: int) -> list[float]:
                # Runs of at most 10 calls: the conversation grows with every step, and a long
                # run would charge later calls for re-sending the earlier ones to the model.
                out: list[float] = []
                while len(out) < n:
                    k = min(10, n - len(out))
                    elapsed = await run(k)
                    out.extend([elapsed / k * 1e6] * k)
                return out

        elif opts.lib == "session":
            batch = await _session(stack, kind, target)
        else:
            factory = {"raw": _raw, "toolbridge": _toolbridge, "fastmcp": _fastmcp, "langchain": _langchain}
            call = await factory[opts.lib](stack, kind, target)

            async def batch(n: int) -> list[float]:
                out = []
                for _ in range(n):
                    start = time.perf_counter()
                    await call()
                    out.append((time.perf_counter() - start) * 1e6)
                return out

        await batch(3)  # warm-up: connection, caches, first-call listing
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line or line == "quit":
                break
            if line == "mem":
                usage = resource.getrusage(resource.RUSAGE_SELF)
                print(json.dumps({"maxrss_kb": usage.ru_maxrss}), flush=True)
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
