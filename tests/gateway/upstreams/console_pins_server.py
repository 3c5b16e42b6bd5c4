"""A stdio MCP server (official SDK) whose prompts and resources a test changes under the gateway's
pins, for the console's Pins page.

Usage: `python console_pins_server.py STATE_DIR`. At every listing: the prompt `greeting`'s
description is STATE_DIR/greeting.txt (default "Say hello."), the resource `pins://readme`'s
description is STATE_DIR/readme.txt (default "The readme."), and the resource `pins://extra` is
listed only while STATE_DIR/extra exists (a new resource). Also a tool `echo` and a template
`pins://items/{id}`, which never change.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

STATE = Path(sys.argv[1])


def _text(name: str, default: str) -> str:
    path = STATE / name
    return path.read_text(encoding="utf-8") if path.exists() else default


async def _tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo", description="Echo.", input_schema=schema)])


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def _prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    prompt = {"name": "greeting", "description": _text("greeting.txt", "Say hello."), "arguments": []}
    return types.ListPromptsResult.model_validate({"prompts": [prompt]})


async def _prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    message = {"role": "user", "content": {"type": "text", "text": "hello"}}
    return types.GetPromptResult.model_validate({"messages": [message]})


async def _resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    resources: list[dict[str, Any]] = [
        {"uri": "pins://readme", "name": "readme", "description": _text("readme.txt", "The readme.")}
    ]
    if (STATE / "extra").exists():
        resources.append({"uri": "pins://extra", "name": "extra", "description": "Appeared later."})
    return types.ListResourcesResult.model_validate({"resources": resources})


async def _templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = {"uriTemplate": "pins://items/{id}", "name": "item", "description": "One item."}
    return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": [template]})


async def _read(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    content = {"uri": str(params.uri), "mimeType": "text/plain", "text": f"contents of {params.uri}"}
    return types.ReadResourceResult.model_validate({"contents": [content]})


async def main() -> None:
    server: Server[Any] = Server(
        "console-pins-upstream",
        on_list_tools=_tools,
        on_call_tool=_call,
        on_list_prompts=_prompts,
        on_get_prompt=_prompt,
        on_list_resources=_resources,
        on_list_resource_templates=_templates,
        on_read_resource=_read,
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
