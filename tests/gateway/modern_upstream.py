"""A 2026-07-28 stdio MCP server (the official SDK's `MCPServer`, which serves
`subscriptions/listen`) for the gateway's tests of a modern upstream's resource updates.

Tools: `touch(uri)` publishes a resource update of `uri` on the server's listen streams.
Resources: `note://one`, `note://two`.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("modern-upstream")


@server.resource("note://one")
def one() -> str:
    return "one"


@server.resource("note://two")
def two() -> str:
    return "two"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Publish an update of `uri`."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


if __name__ == "__main__":
    server.run("stdio")
