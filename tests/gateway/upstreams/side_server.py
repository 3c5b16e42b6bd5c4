"""A stdio MCP server (official SDK) with prompts, resources, templates and completions that use
every field the protocol defines, for the gateway's side-door tests.

Usage: `python side_server.py STATE_DIR`. The description of the prompt `story` is read from
STATE_DIR/story.txt at every listing (default "Tell a story."), so a test can change it under
the gateway; the tool `retell` writes that file from inside and sends
`notifications/prompts/list_changed`. Every prompts/get, resources/read and completion that
reaches this server is appended to STATE_DIR/side.log (`get:NAME`, `read:URI`, `complete:ARG`).

- prompts: `story` (title, icons, `_meta`, two arguments with titles and descriptions, one
  required), `hostile` (ESC/OSC sequences in its title, description, an argument's description
  and its message text);
- resources: `side://doc` (title, description, mimeType, size, icons, annotations, `_meta`),
  `side://escape` (escapes in its description and text), `side://fail` (read fails: JSON-RPC
  error -32002 "no such resource ...\x1b[31m sk-side-secret-0123456789" with data), `side://hang`
  (read never answers);
- templates: `side://items/{id}` (every field); a read of `side://items/N` answers `item N`;
- `confirm` (not listed): in the 2026-07-28 era, a get without the answer `ok` is an
  `InputRequiredResult` (an elicitation, request state `st-1`); with it, the prompt says the colour;
- completions: `story`'s `genre` and the template's `id` (values with an escape in one).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

STATE = Path(sys.argv[1])
ESC = "\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x07link\x1b]8;;\x07"
SECRET = "sk-side-secret-0123456789"
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}

PROMPTS: list[dict[str, Any]] = [
    {
        "name": "story",
        "title": "Story teller",
        "icons": [ICON],
        "_meta": {"example.com/kind": "narrative", "n": 1},
        "arguments": [
            {"name": "genre", "title": "Genre", "description": "What kind of story.", "required": True},
            {"name": "length", "title": "Length", "description": "How many words.", "required": False},
        ],
    },
    {
        "name": "hostile",
        "title": f"Hostile {ESC}",
        "description": f"Looks harmless {ESC}",
        "arguments": [{"name": "x", "description": f"an argument {ESC}"}],
    },
]
RESOURCES: list[dict[str, Any]] = [
    {
        "uri": "side://doc",
        "name": "doc",
        "title": "The document",
        "description": "A document with every field.",
        "mimeType": "text/markdown",
        "size": 1234,
        "icons": [ICON],
        "annotations": {
            "audience": ["user", "assistant"],
            "priority": 0.5,
            "lastModified": "2026-01-01T00:00:00Z",
        },
        "_meta": {"example.com/owner": "docs"},
    },
    {"uri": "side://escape", "name": "escape", "description": f"escapes {ESC}", "mimeType": "text/plain"},
    {"uri": "side://fail", "name": "fail", "mimeType": "text/plain"},
    {"uri": "side://hang", "name": "hang", "mimeType": "text/plain"},
]
TEMPLATES: list[dict[str, Any]] = [
    {
        "uriTemplate": "side://items/{id}",
        "name": "item",
        "title": "An item",
        "description": "One item by id.",
        "mimeType": "application/json",
        "icons": [ICON],
        "annotations": {"audience": ["assistant"], "priority": 1.0},
        "_meta": {"example.com/family": "items"},
    }
]


def _log(line: str) -> None:
    with (STATE / "side.log").open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _story() -> str:
    path = STATE / "story.txt"
    return path.read_text(encoding="utf-8") if path.exists() else "Tell a story."


async def _tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(
        tools=[types.Tool(name="retell", description="Change the story.", input_schema=schema)]
    )


async def _call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", "Tell another story."))
    (STATE / "story.txt").write_text(text, encoding="utf-8")
    await ctx.session.send_prompt_list_changed()
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


async def _prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    prompts = [dict(PROMPTS[0], description=_story()), PROMPTS[1]]
    return types.ListPromptsResult.model_validate({"prompts": prompts})


async def _prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    _log(f"get:{params.name}")
    args = dict(params.arguments or {})
    if params.name == "story":
        return types.GetPromptResult.model_validate(
            {
                "description": "A story prompt.",
                "_meta": {"example.com/trace": "t1"},
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": f"Tell a {args.get('genre')} story."},
                    },
                    {
                        "role": "assistant",
                        "content": {
                            "type": "resource",
                            "resource": {"uri": "side://doc", "mimeType": "text/markdown", "text": "# Doc"},
                        },
                    },
                ],
            }
        )
    if params.name == "confirm":  # 2026-07-28: asks the client first (an InputRequiredResult round)
        answer = (params.input_responses or {}).get("ok")
        if answer is None or params.request_state != "st-1":
            ask = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message="Which colour?",
                    requested_schema={"type": "object", "properties": {"colour": {"type": "string"}}},
                )
            )
            return types.InputRequiredResult(input_requests={"ok": ask}, request_state="st-1")  # type: ignore[return-value]
        colour = getattr(answer, "content", None) or {}
        return types.GetPromptResult.model_validate(
            {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": f"colour {colour.get('colour')}"}}
                ]
            }
        )
    if params.name == "hostile":
        return types.GetPromptResult.model_validate(
            {
                "description": f"hostile {ESC}",
                "messages": [{"role": "user", "content": {"type": "text", "text": f"Hi {ESC} there"}}],
            }
        )
    raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name}")


async def _resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult.model_validate({"resources": RESOURCES})


async def _templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": TEMPLATES})


async def _read(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    _log(f"read:{uri}")
    if uri == "side://fail":
        raise MCPError(-32002, f"no such resource {uri}\x1b[31m {SECRET}", {"uri": uri, "secret": SECRET})
    if uri == "side://hang":
        await anyio.sleep_forever()
    if uri == "side://escape":
        text = f"text {ESC} end"
    elif uri.startswith("side://items/"):
        text = f"item {uri.rsplit('/', 1)[-1]}"
    else:
        text = "# Doc"
    return types.ReadResourceResult.model_validate(
        {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text, "_meta": {"example.com/v": 2}}]}
    )


async def _complete(
    ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
) -> types.CompleteResult:
    _log(f"complete:{params.argument.name}")
    if params.argument.name == "genre":
        values = [v for v in ("fantasy", "fable", f"farce {ESC}") if v.startswith(params.argument.value)]
    else:
        values = ["1", "2", "3"]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def main() -> None:
    server: Server[Any] = Server(
        "side-upstream",
        on_list_tools=_tools,
        on_call_tool=_call,
        on_list_prompts=_prompts,
        on_get_prompt=_prompt,
        on_list_resources=_resources,
        on_list_resource_templates=_templates,
        on_read_resource=_read,
        on_completion=_complete,
    )
    async with stdio_server() as (read, write):
        await server.run(
            read,
            write,
            server.create_initialization_options(
                NotificationOptions(prompts_changed=True, resources_changed=True)
            ),
        )


if __name__ == "__main__":
    anyio.run(main)
