"""What else than tools a server lists: its prompts, resources and resource templates, all pages.

Read through an SDK `Client` (`mcp.Client`) by `pinning` (which pins them) and the gateway
(which passes them through); `pinning` exports `side_listing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from mcp import MCPError
from pydantic import BaseModel

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["SideKind", "side_listing"]

SideKind = Literal["prompts", "resources", "templates"]
"""What else of a server is listed (and pinned) besides its tools."""

_SIDE_PAGES = 50
_METHOD_NOT_FOUND = -32601
_SIDE_ITEMS = 10_000


async def _side_page(sdk: Client, kind: SideKind, cursor: str | None) -> tuple[list[BaseModel], str | None]:
    """One page of `kind` and the next page's cursor."""
    if kind == "prompts":
        prompts = await sdk.list_prompts(cursor=cursor)
        return list(prompts.prompts), prompts.next_cursor
    if kind == "resources":
        resources = await sdk.list_resources(cursor=cursor)
        return list(resources.resources), resources.next_cursor
    templates = await sdk.list_resource_templates(cursor=cursor)
    return list(templates.resource_templates), templates.next_cursor


async def side_listing(sdk: Client, kind: SideKind) -> list[Any]:  # Prompt, Resource or ResourceTemplate
    """Every prompt, resource or template an SDK `Client` (`mcp.Client`) lists, all pages (at most
    50 pages and 10 000 items); none when the server does not offer that capability."""
    try:
        caps = sdk.server_capabilities
    except Exception:  # not connected: nothing offered
        return []
    if (caps.prompts if kind == "prompts" else caps.resources) is None:
        return []
    out: list[Any] = []
    cursor: str | None = None
    for _ in range(_SIDE_PAGES):
        try:
            items, cursor = await _side_page(sdk, kind, cursor)
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == _METHOD_NOT_FOUND and not out:
                return []  # a server that offers resources but no templates, say
            raise
        out.extend(items)
        if not cursor or len(out) >= _SIDE_ITEMS:
            break
    return out[:_SIDE_ITEMS]
