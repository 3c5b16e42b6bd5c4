"""Servers of our own for the benchmarks, built with the official SDK's server API (stdio).

- `python bench_servers.py sleep`: one tool, `sleep(ms)`, that waits `ms` milliseconds (default 10)
  and answers `"slept"`; concurrency is measured with it, since a tool that waits shows whether
  calls on one connection overlap (an instant tool only measures the CPU).
- `python bench_servers.py echo`: one tool, `echo(message)`, answered at once (what a Python SDK
  server costs per call, the reference of the gateway benchmark).
- `python bench_servers.py many N`: N tools (`tool_0` … `tool_{N-1}`), each with a small
  parameter schema and a description, listed in one page; for the `tools/list` benchmark.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server


def _many(n: int) -> list[types.Tool]:
    return [
        types.Tool(
            name=f"tool_{i}",
            description=f"Tool number {i}: adds two numbers and says something about number {i}.",
            input_schema={
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "the first number"},
                    "b": {"type": "number", "description": "the second number"},
                    "note": {"type": "string"},
                },
                "required": ["a", "b"],
            },
        )
        for i in range(n)
    ]


def build(kind: str, n: int) -> Server[Any]:
    """The server of that kind (`sleep`, `echo` or `many`)."""
    if kind == "echo":
        tools = [
            types.Tool(
                name="echo",
                description="Echo.",
                input_schema={"type": "object", "properties": {"message": {}}},
            )
        ]
    else:
        tools = (
            [
                types.Tool(
                    name="sleep",
                    description="Wait.",
                    input_schema={"type": "object", "properties": {"ms": {}}},
                )
            ]
            if kind == "sleep"
            else _many(n)
        )

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "sleep":
            await anyio.sleep(float((params.arguments or {}).get("ms", 10)) / 1000)
            return types.CallToolResult(content=[types.TextContent(type="text", text="slept")])
        if params.name == "echo":
            text = f"Echo: {(params.arguments or {}).get('message')}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    return Server(f"bench-{kind}", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(kind: str, n: int) -> None:
    server = build(kind, n)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
