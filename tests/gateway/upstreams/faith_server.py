"""A stdio MCP server (official SDK) whose tools use every field of a `Tool` and of a result,
for the gateway's pass-through tests (what the gateway keeps, what it changes).

Usage: `python faith_server.py`. The environment variable `FAITH_KEY` (a secret the gateway
holds) is quoted in the error messages of `refuse` and `custom`, as a careless server would.

Tools:

- `rich`: `title` (with a terminal escape and a bidi override), `description`, an input schema
  whose parameter description carries an escape, `outputSchema`, `annotations` (with a title,
  read-only), `execution`, `icons` and `_meta` (one key of its own, one in the gateway's
  namespace). Its result has content, `structuredContent` and `_meta` (again with one key in the
  gateway's namespace).
- `untitled`: a `title` and no description.
- `oops`: an `isError` result with two text blocks (escapes, the secret), an image block,
  `structuredContent` and `_meta`.
- `flood_error`: an `isError` result with 40 text blocks of 10 000 characters each.
- `refuse`: answers JSON-RPC -32602 (invalid params), quoting the secret.
- `internal`: answers JSON-RPC -32603 (internal error).
- `custom`: answers a server-defined JSON-RPC code (-32099) with `data`, quoting the secret.
- `write`: a plain tool with effects (`destructiveHint`), answers "written".
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

KEY = os.environ.get("FAITH_KEY", "no-key-given")
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

RICH: dict[str, Any] = {
    "name": "rich",
    "title": "Rich \x1b[31mtool\x1b[0m\u202e",
    "description": "Uses every field.",
    "inputSchema": {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "the query\x1b]0;pwned\x07"}},
        "required": ["q"],
    },
    "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "annotations": {"title": "Rich\u200b annotated", "readOnlyHint": True, "openWorldHint": False},
    "execution": {"taskSupport": "optional"},
    "icons": [
        {"src": "https://example.com/rich.png", "mimeType": "image/png", "sizes": ["48x48"]},
        {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "theme": "dark"},
    ],
    "_meta": {"com.example/ui": {"template": "card", "n": 1}, "toolbridge/code": "SPOOFED"},
}


def _tools() -> list[types.Tool]:
    obj = {"type": "object"}
    return [
        types.Tool.model_validate(RICH),
        types.Tool(name="untitled", title="Only a title", input_schema=obj),
        types.Tool(name="oops", description="Reports an error.", input_schema=obj),
        types.Tool(name="flood_error", description="A huge error.", input_schema=obj),
        types.Tool(name="refuse", description="Invalid params.", input_schema=obj),
        types.Tool(name="internal", description="Internal error.", input_schema=obj),
        types.Tool(name="custom", description="A server-defined error.", input_schema=obj),
        types.Tool(
            name="write",
            description="Writes.",
            input_schema=obj,
            annotations=types.ToolAnnotations(destructive_hint=True),
        ),
    ]


async def _list(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    if name == "rich":
        return types.CallToolResult.model_validate(
            {
                "content": [{"type": "text", "text": '{"n": 3}'}],
                "structuredContent": {"n": 3},
                "_meta": {"com.example/trace": "t-1", "toolbridge/outcome": "succeeded"},
            }
        )
    if name == "oops":
        return types.CallToolResult.model_validate(
            {
                "content": [
                    {"type": "text", "text": "\x1b[31mfirst\x1b[0m reason"},
                    {"type": "text", "text": f"the key {KEY} was refused\u202e"},
                    {"type": "image", "data": PIXEL, "mimeType": "image/png"},
                ],
                "structuredContent": {"reason": "quota", "retry": False},
                "isError": True,
                "_meta": {"com.example/trace": "t-2"},
            }
        )
    if name == "flood_error":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{i}" + "e" * 10_000) for i in range(40)],
            is_error=True,
        )
    if name == "refuse":
        raise MCPError(types.INVALID_PARAMS, f"q is required (key {KEY})")
    if name == "internal":
        raise MCPError(types.INTERNAL_ERROR, "the database went away")
    if name == "custom":
        raise MCPError(-32099, f"\x1b[2Jquota exceeded for {KEY}", {"retryAfter": 30, "key": KEY})
    if name == "write":
        return types.CallToolResult(content=[types.TextContent(type="text", text="written")])
    raise MCPError(types.INVALID_PARAMS, f"unknown tool {name}")


async def main() -> None:
    server: Server[Any] = Server("faith-upstream", on_list_tools=_list, on_call_tool=_call)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
