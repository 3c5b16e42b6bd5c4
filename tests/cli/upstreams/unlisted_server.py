"""A stdio MCP server (the official SDK's low-level `Server`) that answers a tool it never lists.

`tools/list` gives one tool, `listed`; `tools/call` answers any name with the text "ran NAME".
Calling `hidden` makes the SDK's client log its own "Tool hidden not listed by server" WARNING
(it cannot validate structured content), which the command line shows only with `-v`.

Run: `python unlisted_server.py` (stdio).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(tools=[types.Tool(name="listed", description="listed", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"ran {params.name}")])


async def main() -> None:
    server: Server[Any] = Server("unlisted", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
