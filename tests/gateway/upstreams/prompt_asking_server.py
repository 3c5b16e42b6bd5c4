"""An upstream whose prompt asks its client (a handshake-era `elicitation/create` during
`prompts/get`) while a tool call of another caller is in flight on the same connection.

`wait_for(who)` marks that it arrived and returns once the prompt has finished asking (bounded);
the prompt `confirm(who)` waits (bounded) until a tool call arrived, asks, and says what came back.

Run: `python prompt_asking_server.py` (stdio).
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("prompt-asking-upstream")

_arrived = anyio.Event()
_asked = anyio.Event()


class Confirm(BaseModel):
    ok: bool


@server.tool()
async def wait_for(who: str) -> str:
    """Arrive, then return once the prompt has asked."""
    _arrived.set()
    with anyio.fail_after(60):
        await _asked.wait()
    return f"{who}: done"


@server.prompt()
async def confirm(who: str, ctx: Context) -> str:
    """Ask the client while a tool call is in flight, and say what came back."""
    with anyio.fail_after(60):
        await _arrived.wait()
    try:
        answer = await ctx.elicit(f"confirm the prompt for {who}?", Confirm)
        said = f"answered {answer.action}"
    except Exception as exc:  # the gateway refused to forward it
        said = f"refused: {type(exc).__name__}"
    finally:
        _asked.set()
    return f"{who}: {said}"


if __name__ == "__main__":
    server.run("stdio")
