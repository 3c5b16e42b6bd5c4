"""A stdio MCP server (official SDK, low-level API) whose tool `meta` returns the `_meta` of the
request it received, so a test can see what trace context crossed the wire."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(
        tools=[types.Tool(name="meta", description="Echo _meta.", input_schema=schema)]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    meta = dict(params.meta or {})
    text = json.dumps({k: v for k, v in meta.items() if k in ("traceparent", "tracestate", "baggage")})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server = Server("meta", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
