"""Python function calls per tool call, governed and not: a figure the machine's load cannot move.

    .venv/bin/python bench/bench_calls.py             # --repeat 5; --echo adds the `echo` rows

Counts every Python function call (`sys.setprofile`) made while calling server-everything's
`get-structured-content` over stdio 10 times through: the raw SDK (`mcp.Client`), toolbridge's
`StdioClient`, a declared MCP tool through `runtime.session(...).call_tool`, and the same tool
through an agent step under `runtime.run` (a `ScriptedModel` turn per call); with `--echo`,
also `echo` through the raw SDK, a plain `McpToolProvider.call_tool`, and through a session's
discovered tool (an `McpToolProvider` binding: what the framework adapters call,
`bench/bench_adapters.py`); `--profile LABEL` then shows where one row's calls go. The governed
figures include the session's or run's own setup (10 calls per session or run). Each figure is
the least of `--repeat` counts (default 5): what lands in a count besides the calls themselves
(the stdio client's 20 ms exit poll, a garbage collection, an extra event-loop iteration when a
reply comes a little late) only ever adds to it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

from mcp import Client, StdioServerParameters

from toolbridge import Agent, McpToolProvider, ScriptedModel, create_runtime, define_mcp_tool
from toolbridge.clients import StdioClient

EVERYTHING = str(
    Path(__file__).resolve().parent.parent
    / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
TOOL, ARGS, N = "get-structured-content", {"location": "New York"}, 10


async def _count(run: Callable[[], Awaitable[None]], repeat: int = 5) -> float:
    await run()  # warm-up
    counts = []
    for _ in range(repeat):
        calls = 0

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal calls
            if event == "call":
                calls += 1

        sys.setprofile(profile)
        try:
            await run()
        finally:
            sys.setprofile(None)
        counts.append(calls)
    return min(counts) / N


async def main(repeat: int, echo_rows: bool, profile_row: str | None = None) -> None:
    params = StdioServerParameters(command="node", args=[EVERYTHING, "stdio"])
    async with Client(params) as sdk, StdioClient("node", [EVERYTHING, "stdio"]) as client:
        tool = define_mcp_tool(
            id="bench.echo", version="1", description="The tool under test.", remote_name=TOOL,
            input={"type": "object", "additionalProperties": True}, output={"type": "object"},
            effects="read", capabilities=[], client=client,
        )  # fmt: skip

        async def raw() -> None:
            for _ in range(N):
                await sdk.call_tool(TOOL, ARGS)

        async def plain() -> None:
            for _ in range(N):
                await client.call_tool(TOOL, ARGS)

        async def session() -> None:
            runtime = create_runtime(permissions={"allow": ["tool:bench.echo", "effect:read"]})
            async with runtime.session(tools=[tool]) as s:
                for _ in range(N):
                    await s.call_tool("bench_echo", ARGS)

        async def agent() -> None:
            runtime = create_runtime(
                permissions={"allow": ["model:scripted", "tool:bench.echo", "effect:read"]},
                limits={"max_steps": N + 2, "max_model_calls": N + 2},
            )
            turns: list[dict[str, Any]] = [
                {"tool_calls": [{"name": "bench_echo", "arguments": ARGS}]} for _ in range(N)
            ]
            result = await runtime.run(
                Agent(ScriptedModel([*turns, {"text": "done"}]), tools=[tool], max_steps=N + 2), "go"
            )
            if not result.ok:
                raise RuntimeError(f"the governed run ended {result.outcome} {result.error_code}")

        provider = McpToolProvider(client)
        echo = {"message": "hi"}

        async def raw_echo() -> None:
            for _ in range(N):
                await sdk.call_tool("echo", echo)

        async def provider_call() -> None:
            for _ in range(N):
                await provider.call_tool("echo", echo)

        async def discovered() -> None:
            runtime = create_runtime(permissions={"allow": ["tool:echo", "effect:read"]})
            async with runtime.session(tool_providers=[{"provider": provider, "effects": "read"}]) as s:
                for _ in range(N):
                    await s.call_tool("echo", echo)

        rows = [
            ("raw SDK mcp.Client.call_tool", raw, None),
            ("toolbridge StdioClient.call_tool", plain, None),
            ("session.call_tool", session, None),
            ("agent step under runtime.run", agent, None),
        ]
        if echo_rows:
            rows += [
                ("raw SDK mcp.Client.call_tool, `echo`", raw_echo, "echo"),
                ("McpToolProvider.call_tool, `echo` (no governance)", provider_call, "echo"),
                ("session.call_tool, discovered `echo` (the adapters' path)", discovered, "echo"),
            ]
        base: dict[str | None, float] = {}
        print("| path, stdio | Python calls per call | vs raw SDK (same tool) |\n|---|---|---|")
        for label, run, group in rows:
            per_call = await _count(run, repeat)
            base.setdefault(group, per_call)
            print(f"| {label} | {per_call:,.0f} | {per_call / base[group]:.2f}x |")
        if profile_row:
            await _profile(dict((label, run) for label, run, _ in rows)[profile_row])


async def _profile(run: Callable[[], Awaitable[None]]) -> None:
    """Where one path's calls go: cProfile's functions by own call count, toolbridge's first."""
    import cProfile
    import pstats

    await run()
    profiler = cProfile.Profile()
    profiler.enable()
    await run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
    print(f"\n| function (calls per {N} tool calls) | calls |\n|---|---|")
    for (file, line, name), (_cc, calls, *_rest) in rows[:30]:
        where = file.split("site-packages/")[-1].split("src/")[-1]
        print(f"| {where}:{line} {name} | {calls} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="counts per path; the least is shown")
    parser.add_argument("--echo", action="store_true", help="also count `echo` (raw SDK, discovered tool)")
    parser.add_argument("--profile", metavar="LABEL", help="then profile the row with this label (cProfile)")
    options = parser.parse_args()
    asyncio.run(main(max(1, options.repeat), options.echo, options.profile))
