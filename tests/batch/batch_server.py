"""A small stdio MCP server for the batch tests and the bench (official SDK).

Tools: `echo(text)`; `tally(path)` appends one line to `path` (so a test can count how many times
the remote side really acted); `slow(seconds, path)` appends `started PARENT_PID` to `path` when it
starts, then sleeps.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("batch-test", version="1.0.0")


class Text(BaseModel):
    content: str


@server.tool()
def echo(text: str) -> Text:
    """Return the text."""
    return Text(content=text)


@server.tool()
def tally(path: str) -> Text:
    """Append one line to `path`."""
    with open(path, "a") as f:
        f.write("x\n")
    return Text(content="counted")


@server.tool()
async def slow(seconds: float, path: str) -> Text:
    """Append one line to `path`, then sleep."""
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny write
        f.write(f"started {os.getppid()}\n")  # the process that runs this server (a Ray actor)
    await anyio.sleep(seconds)
    return Text(content="slept")


if __name__ == "__main__":
    server.run("stdio")
