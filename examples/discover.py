"""Discover an MCP server's tools and call them through `McpToolProvider`, offline.

Starts the example notes server (examples/servers/notes_server.py) as a child process over stdio,
lists its tools, and calls a few: a text result, a structured result, and a tool error.

Run: `python examples/discover.py`
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from toolbridge import McpToolProvider, StdioClient, ToolError

SERVER = Path(__file__).resolve().parent / "servers" / "notes_server.py"


async def main() -> None:
    client = StdioClient(sys.executable, [str(SERVER)], timeout=30)
    async with McpToolProvider(client) as notes:
        for spec in await notes.list_tools():
            print(f"tool {spec.name}: {spec.description}")

        saved = await notes.call_tool("add_note", {"title": "groceries", "text": "eggs, milk, bread"})
        print(saved.kind, "->", saved.to_text())  # text parts

        note = await notes.call_tool("get_note", {"title": "groceries"})
        print(note.kind, "->", note.structured)  # structured content, checked against its schema

        found = await notes.call_tool("search_notes", {"query": "tea"})
        print(found.kind, "->", found.structured)

        try:
            await notes.call_tool("get_note", {"title": "no such note"})
        except ToolError as error:
            print("tool error", error.code, "->", error.server_text)

        print("server says:", notes.instructions)


if __name__ == "__main__":
    asyncio.run(main())
