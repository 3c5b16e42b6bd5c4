"""A 2026-07-28 MCP server over Streamable HTTP whose tool says which client capabilities it sees.

Run: `python caps_server.py PORT`. Tool `seen()` answers the capabilities of the request's client
(sampling, elicitation, roots: those declared), as the server reads them from the request.
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("caps-upstream")


@server.tool()
async def seen(ctx: Context) -> str:
    """The client capabilities this request carries."""
    caps = ctx.client_capabilities
    if caps is None:
        return "none"
    kinds = [k for k in ("sampling", "elicitation", "roots") if getattr(caps, k) is not None]
    return ",".join(kinds) or "none"


if __name__ == "__main__":
    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
