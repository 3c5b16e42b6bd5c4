"""A stdio MCP server (official SDK) whose tool definitions hide things from a reader.

Its one tool, `lookup`, carries ESC sequences, BEL, zero-width and bidi characters in its title,
its description, and in the parameter schema's titles, descriptions and enum strings at several
depths (a property, a nested object, an array's items, `$defs`, an `anyOf` branch). A model must
see none of them; the caller still gets the raw definition. Calling `lookup` answers `"ok"`.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

ESC = "\x1b[2J\x1b]0;owned\x07"
BEL = "\x07"
ZW = "\u200b\u200d\ufeff"
BIDI = "\u202e\u2066"
HIDDEN = (ESC, BEL, ZW, BIDI)


def dirty(text: str) -> str:
    """`text` with every kind of hidden character inside it."""
    return f"{text[:2]}{ESC}{text[2:4]}{BEL}{text[4:6]}{ZW}{text[6:]}{BIDI}"


TITLE = dirty("Lookup tool")
DESCRIPTION = dirty("Weather in a city")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": dirty("Lookup arguments"),
    "description": dirty("What to look up"),
    "properties": {
        "city": {"type": "string", "title": dirty("City name"), "description": dirty("The city to look up")},
        "unit": {
            "type": "string",
            "description": dirty("Unit of measure"),
            "enum": [dirty("celsius"), "kelvin"],
        },
        "options": {
            "type": "object",
            "description": dirty("Options object"),
            "properties": {
                "depth": {
                    "type": "object",
                    "properties": {"level": {"type": "integer", "description": dirty("Deeply nested level")}},
                },
                "tags": {"type": "array", "items": {"type": "string", "description": dirty("One tag here")}},
            },
        },
        "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null", "title": dirty("No mode at all")}]},
    },
    "required": ["city"],
    "$defs": {"Mode": {"type": "string", "description": dirty("The mode to use"), "const": dirty("fast")}},
}


async def _list(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name="lookup", title=TITLE, description=DESCRIPTION, input_schema=SCHEMA)]
    )


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


async def main() -> None:
    server: Server[Any] = Server("hostile-schema", on_list_tools=_list, on_call_tool=_call)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
