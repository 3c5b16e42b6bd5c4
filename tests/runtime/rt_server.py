"""A small MCP server built with the official SDK, for result-acceptance and crash tests.

Tools:
- `ok(message)`: structured `{"content": message}`;
- `big()`: structured content over 1 MiB;
- `text_only()`: text content, no structured content;
- `fail()`: raises, so the server answers `isError: true` with `SERVER_MARKER` in its text;
- `slow(seconds, note)`: sleeps, then answers `{"content": "slept"}`; when cancelled, writes
  `cancelled` to the file `note` (so a test can see the server was told).

Run as a script (`python rt_server.py`) it serves over stdio.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("toolbridge-runtime-test")


class Message(BaseModel):
    content: str


@server.tool()
def ok(message: str) -> Message:
    """Echo a message as structured content."""
    return Message(content=message)


@server.tool()
def big() -> Message:
    """A structured result over 1 MiB."""
    return Message(content="x" * (1024 * 1024 + 10))


@server.tool(structured_output=False)
def text_only() -> str:
    """Text content only."""
    return "just text"


SERVER_MARKER = "SRV-SECRET-5b2c90e1"
"""Appears only in the error text of `fail`."""


@server.tool()
def fail() -> Message:
    """Fail with `SERVER_MARKER` in the error text."""
    raise ToolError(f"internal failure {SERVER_MARKER}")


@server.tool()
async def slow(seconds: float, note: str = "") -> Message:
    """Sleep, then answer; when cancelled and `note` names a file, write "cancelled" to it."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if note:
            with open(note, "w") as f:  # noqa: ASYNC230 - tiny write while being cancelled
                f.write("cancelled")
        raise
    return Message(content="slept")


if __name__ == "__main__":
    server.run("stdio")
