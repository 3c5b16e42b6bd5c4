"""An upstream that logs while serving a call (handshake era: `notifications/message`).

`say(who, meet, group)` waits (bounded) until `meet` different callers arrived in `group`, so a
test can hold several calls in flight at once without sleeping, then logs "log for WHO".

Run: `python logging_server.py` (stdio).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("logging-upstream")

_groups: dict[str, tuple[set[str], anyio.Event]] = {}


@server.tool()
async def say(who: str, ctx: Context, meet: int = 0, group: str = "") -> str:
    """Meet the others of `group`, then log a line for `who`."""
    if meet > 1:
        arrived, gate = _groups.setdefault(group, (set(), anyio.Event()))
        arrived.add(who)
        if len(arrived) >= meet:
            gate.set()
        with anyio.fail_after(60):
            await gate.wait()
    await ctx.info(f"log for {who}")
    return f"{who}: said"


if __name__ == "__main__":
    server.run("stdio")
