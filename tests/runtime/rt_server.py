"""A small MCP server built with the official SDK, for result-acceptance and crash tests.

Tools:
- `ok(message)`: structured `{"content": message}`;
- `big()`: structured content over 1 MiB;
- `text_only()`: text content, no structured content;
- `fail()`: raises, so the server answers `isError: true` with `SERVER_MARKER` in its text;
- `slow(seconds)`: sleeps, then answers structured `{"content": "slept"}`.

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
async def slow(seconds: float) -> Message:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return Message(content="slept")


if __name__ == "__main__":
    server.run("stdio")
