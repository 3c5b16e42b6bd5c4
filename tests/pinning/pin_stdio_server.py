"""A stdio MCP server whose tools come from a JSON state file, read at every `tools/list`.

Usage: `python pin_stdio_server.py STATE.json`, where the file holds
`{"instructions": "...", "tools": {"name": "description", ...}}` (instructions are read once, at
start). Every tool takes `{"text": string}` and answers it back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])
_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


def _state() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(STATE.read_text(encoding="utf-8"))
    return data


async def _list(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [types.Tool(name=n, description=d, input_schema=_TEXT) for n, d in _state()["tools"].items()]
    return types.ListToolsResult(tools=tools)


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    server: Server[Any] = Server(
        "pin-stdio", instructions=_state().get("instructions"), on_list_tools=_list, on_call_tool=_call
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
