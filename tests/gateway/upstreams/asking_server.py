"""An upstream that asks its client during calls (the official SDK's `MCPServer`, both eras):
elicitation, sampling and roots through resolvers, so a handshake-era connection gets standalone
`elicitation/create`, `sampling/createMessage` and `roots/list` requests, and a 2026-07-28
connection gets them inside an `InputRequiredResult`.

`meet=N` makes a call wait (bounded) until N different `who` have arrived in its `group`, so
tests can hold several calls in flight at once without sleeping. `hold(who)` only meets.
`write_file(path, content)` only counts its calls (`written()`); `confirm_slowly(who)` asks and
remembers being cancelled meanwhile (`cancelled()`).

Run: `python asking_server.py` (stdio).
"""

from __future__ import annotations

from typing import Annotated

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("asking-upstream")

_groups: dict[str, tuple[set[str], anyio.Event]] = {}
_cancelled: list[str] = []


async def _meet(who: str, meet: int, group: str) -> None:
    if meet <= 1:
        return
    if group not in _groups:
        _groups[group] = (set(), anyio.Event())
    arrived, gate = _groups[group]
    arrived.add(who)
    if len(arrived) >= meet:
        gate.set()
    try:
        with anyio.fail_after(60):
            await gate.wait()
    except anyio.get_cancelled_exc_class():
        _cancelled.append(who)
        raise


class Confirm(BaseModel):
    ok: bool


async def ask_transfer(who: str, meet: int = 0, group: str = "") -> Elicit[Confirm]:
    await _meet(who, meet, group)
    return Elicit(f"transfer 5000 EUR for {who}?", Confirm)


async def ask_model(who: str, meet: int = 0, group: str = "") -> Sample:
    await _meet(who, meet, group)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"summarize for {who}"))
    return Sample([message], max_tokens=20)


async def ask_roots(who: str, meet: int = 0, group: str = "") -> ListRoots:
    await _meet(who, meet, group)
    return ListRoots()


@server.tool()
async def pay(
    who: str,
    answer: Annotated[ElicitationResult[Confirm], Resolve(ask_transfer)],
    meet: int = 0,
    group: str = "",
) -> str:
    """Transfer 5000 EUR after asking."""
    if isinstance(answer, AcceptedElicitation):
        return f"{who}: accept ok={answer.data.ok}"
    return f"{who}: {answer.action}"


@server.tool()
async def summarize(
    who: str, sampled: Annotated[CreateMessageResult, Resolve(ask_model)], meet: int = 0, group: str = ""
) -> str:
    """Return what the client's model said."""
    content = sampled.content
    return f"{who}: {content.text if isinstance(content, TextContent) else '?'}"


@server.tool()
async def where(
    who: str, roots: Annotated[ListRootsResult, Resolve(ask_roots)], meet: int = 0, group: str = ""
) -> str:
    """Return the client's roots."""
    return f"{who}: " + " ".join(str(r.uri) for r in roots.roots)


_written: list[str] = []


@server.tool()
async def confirm_slowly(who: str, ctx: Context) -> str:
    """Ask (handshake era: a standalone elicitation) and remember a cancellation while asking."""
    try:
        answer = await ctx.elicit(f"confirm for {who}?", Confirm)
    except anyio.get_cancelled_exc_class():
        _cancelled.append(who)
        raise
    return f"{who}: {answer.action}"


@server.tool()
async def cancelled() -> list[str]:
    """Who was cancelled while being asked."""
    return list(_cancelled)


@server.tool()
async def write_file(path: str, content: str) -> str:
    """Pretend to write `content` to `path` (counted, nothing written)."""
    _written.append(path)
    return f"wrote {len(content)} characters"


@server.tool()
async def written() -> int:
    """How many times write_file ran."""
    return len(_written)


@server.tool()
async def hold(who: str, meet: int = 0, group: str = "") -> str:
    """Meet, then return."""
    await _meet(who, meet, group)
    return f"{who}: held"


@server.tool()
async def arrived(group: str) -> list[str]:
    """Who is waiting in `group` now (a test's barrier: the call has reached this server)."""
    return sorted(_groups[group][0]) if group in _groups else []


if __name__ == "__main__":
    server.run("stdio")
