"""A tiny MCP server on the official SDK's 1.x line (run by `.venv-mcp1/bin/python`).

toolbridge's tests run it to see how an mcp 1.x server takes the 2026-07-28 `server/discover`
probe (it logs "Failed to validate request" on its stderr and answers with an error, and the
client falls back to `initialize`). It must not import anything from toolbridge.
"""

from mcp.server.fastmcp import FastMCP

server = FastMCP("mcp1-echo")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run("stdio")
