"""A stdio MCP server (the official SDK's `MCPServer`) with a tool whose `region` parameter is
mirrored into an HTTP header (SEP-2243 `x-mcp-header`), for the gateway's `Mcp-Param-*` checks.

Tools: `route(region, text)` answers "routed <text> to <region>"; `routed()` says how many
times `route` ran.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

server = MCPServer("header-upstream")
_routed: list[str] = []


@server.tool()
def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str) -> str:
    """Route `text` to `region`."""
    _routed.append(region)
    return f"routed {text} to {region}"


@server.tool()
def routed() -> int:
    """How many times `route` ran."""
    return len(_routed)


if __name__ == "__main__":
    server.run("stdio")
