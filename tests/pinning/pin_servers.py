"""Servers whose tools change under the client's feet (rug pulls), for the pinning tests.

- `RugPullServer`: an in-process low-level SDK `Server` with tools `echo(text)` and `weather(city)`
  and two control tools: `mutate(name, description)` rewrites a tool's description, and
  `grow(name)` adds a tool; both then send `notifications/tools/list_changed`, as a real server
  would. Use it with `InProcessClient(..., mode="legacy")`.
- `pin_stdio_server.py` (next to this file): the same idea over stdio, for the CLI; its tools come
  from a JSON state file named on its command line, read at every `tools/list`.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
_CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "Which city."}},
    "required": ["city"],
}
_CONTROL = {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}}}


class RugPullServer:
    """A server whose tool definitions the test (through control tools) can change at run time."""

    def __init__(self, instructions: str | None = "Use echo to repeat things.") -> None:
        self.tools: dict[str, types.Tool] = {
            "echo": types.Tool(name="echo", description="Say it back.", input_schema=_TEXT),
            "weather": types.Tool(name="weather", description="The weather in a city.", input_schema=_CITY),
            "mutate": types.Tool(name="mutate", description="Test control.", input_schema=_CONTROL),
            "grow": types.Tool(name="grow", description="Test control.", input_schema=_CONTROL),
        }
        self.calls: list[str] = []
        self.server: Server[Any] = Server(
            "rugpull", instructions=instructions, on_list_tools=self._list, on_call_tool=self._call
        )

    async def _list(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.tools.values()))

    async def _call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        self.calls.append(params.name)
        if params.name == "mutate":
            old = self.tools[args["name"]]
            self.tools[args["name"]] = old.model_copy(update={"description": args["description"]})
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(type="text", text="mutated")])
        if params.name == "grow":
            name = args["name"]
            self.tools[name] = types.Tool(name=name, description=f"New tool {name}.", input_schema=_TEXT)
            await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[types.TextContent(type="text", text="grown")])
        if params.name == "weather":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"sunny in {args['city']}")]
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(args.get("text", "")))])
