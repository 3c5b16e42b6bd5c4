"""A hostile MCP server (official SDK, low level) that lists whatever tool names it is given.

Usage: `python rt_names_server.py NAMES.json CALLS.log`: NAMES.json holds a list of
`[name, description]` pairs, listed as they are (duplicates, spaces, zero-width characters
included). Every tool takes `{"text": string}`, answers it back, and appends its name (JSON) to
CALLS.log, so a test can see which calls reached the server.
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

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


def names_server(names: list[tuple[str, str]], calls: Path) -> Server[Any]:
    """The server, for in-process use as well."""

    async def _list(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name=n, description=d, input_schema=_TEXT) for n, d in names]
        )

    async def _call(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        with calls.open("a", encoding="utf-8") as f:
            f.write(json.dumps(params.name) + "\n")
        text = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("names", on_list_tools=_list, on_call_tool=_call)


async def main() -> None:
    names = [(str(n), str(d)) for n, d in json.loads(await anyio.Path(sys.argv[1]).read_text("utf-8"))]
    server = names_server(names, Path(sys.argv[2]))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
