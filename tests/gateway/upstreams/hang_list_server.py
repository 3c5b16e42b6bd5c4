"""A stdio MCP server (official SDK) whose `tools/list` hangs after it says its list changed.

Usage: `python hang_list_server.py STATE_DIR NAME`. Tools: `ping` (answers `NAME pong`) and
`stall`: it sends `notifications/tools/list_changed`, and from then on every `tools/list`
hangs (each one appends `list:hung` to STATE_DIR/events.log) until the file STATE_DIR/release
exists; the listings after that also offer `fresh` (a new tool, so a client can see that the
server recovered). Every call is appended to STATE_DIR/calls.log.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])
NAME = sys.argv[2]
OBJ: dict[str, Any] = {"type": "object", "properties": {}}
STALLED = STATE / "stalled"
RELEASE = STATE / "release"


def _append(file: str, line: str) -> None:
    with (STATE / file).open("a", encoding="utf-8") as f:
        f.write(line + "\n")


async def _list(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = [
        types.Tool(name="ping", description=f"{NAME} answers pong.", input_schema=OBJ),
        types.Tool(name="stall", description="Hangs every later listing until released.", input_schema=OBJ),
    ]
    if STALLED.exists():
        if not RELEASE.exists():
            _append("events.log", "list:hung")
        while not RELEASE.exists():  # noqa: ASYNC110 - another process (the test) releases it
            await anyio.sleep(0.05)
        tools.append(types.Tool(name="fresh", description="Offered after the release.", input_schema=OBJ))
    return types.ListToolsResult(tools=tools)


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    _append("calls.log", params.name)
    if params.name == "stall":
        STALLED.touch()
        await ctx.session.send_tool_list_changed()
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{NAME} pong")])


async def main() -> None:
    server: Server[Any] = Server("hang-list-upstream", on_list_tools=_list, on_call_tool=_call)
    async with stdio_server() as (read, write):
        await server.run(
            read, write, server.create_initialization_options(NotificationOptions(tools_changed=True))
        )


if __name__ == "__main__":
    anyio.run(main)
