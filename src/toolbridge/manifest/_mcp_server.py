"""Serving a Telo application's `McpServer.StdioServer` with the official SDK's server.

`create_mcp_server(live, name)` builds an `mcp.server.Server` (the low-level server the task
tools and the gateway serve through; both protocol eras) whose `tools/list` gives the entries of
the server's `McpServer.Tools` bundles and whose `tools/call`:

1. refuses an unknown tool with JSON-RPC -32602, and arguments that break `argumentsSchema`
   with a tool result `isError` (`ERR_INVALID_INPUT: ...`);
2. fills the handler's inputs from the entry's `inputs` (`!cel` over `request`:
   `{name, arguments}`), or passes the arguments themselves;
3. runs the handler (`Ai.Agent`, `Ai.Text`, `Ai.Image`, `McpClient.ToolsCall`,
   `McpClient.ToolsList`, built once per application);
4. answers the entry's `result` (`!cel` over `request` and `result`) as the `CallToolResult`,
   or by default: an agent's or a model's text (with the whole result as structured content),
   an image's image blocks, a `ToolsCall`'s result as the server answered it, anything else as
   JSON;
5. a failure (`ToolbridgeError`: its `code` and `message`) is answered by the first `catches`
   entry whose `code` matches and whose `when` holds (over `request` and `error`) as that
   JSON-RPC error, or else as a tool result `isError` with `CODE: message`.

`serve_stdio_target(manifest, name)` opens the manifest and serves it on stdin/stdout until the
client closes the connection; everything built is closed then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ToolbridgeError, ToolError
from ._kinds_mcp_server import McpServerToolsDoc, StdioServerDoc, ToolEntryDoc
from ._kinds_run import telo_truthy
from ._targets import _fill

__all__ = ["create_mcp_server", "serve_stdio_target"]


def _entries(live: Any, server: StdioServerDoc) -> dict[str, ToolEntryDoc]:
    entries: dict[str, ToolEntryDoc] = {}
    for ref in server.tools:
        bundle = live._doc(ref.name).model
        assert isinstance(bundle, McpServerToolsDoc)
        for entry in bundle.entries:
            entries.setdefault(entry.name, entry)
    return entries


def _default_result(kind: str, output: Any) -> dict[str, Any]:
    if kind == "Mcp.ToolsCall" and isinstance(output, Mapping):
        return dict(output)
    if kind == "Ai.Image" and isinstance(output, Mapping):
        blocks = [
            {"type": "image", "data": i["data"], "mimeType": i["mediaType"]} for i in output.get("images", [])
        ]
        text = [{"type": "text", "text": f"no image: {output.get('finishReason')}"}]
        return {"content": blocks or text, "isError": False}
    if isinstance(output, Mapping) and isinstance(output.get("text"), str):
        return {"content": [{"type": "text", "text": output["text"]}], "structuredContent": dict(output)}
    dumped = json.dumps(output, ensure_ascii=False)
    structured = {"structuredContent": dict(output)} if isinstance(output, Mapping) else {}
    return {"content": [{"type": "text", "text": dumped}], **structured}


def _error_text(result: Mapping[str, Any]) -> str:
    for block in result.get("content") or []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            return " ".join(str(block.get("text", "")).split())[:500]
    return "the tool answered isError"


def create_mcp_server(live: Any, name: str) -> Any:
    """An SDK low-level `Server` for the `McpServer.StdioServer` document `name` (see the module
    docstring); `live` is the open manifest, which owns everything the handlers use."""
    import jsonschema  # type: ignore[import-untyped]
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    server = live._doc(name).model
    assert isinstance(server, StdioServerDoc)
    entries = _entries(live, server)
    tools = [
        types.Tool(name=e.name, description=e.description, input_schema=dict(e.arguments_schema))
        for e in entries.values()
    ]
    validators = {
        n: jsonschema.validators.validator_for(e.arguments_schema)(e.arguments_schema)
        for n, e in entries.items()
    }

    def failed(code: str, message: str) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{code}: {message}")], is_error=True
        )

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = entries.get(params.name)
        if entry is None:
            known = ", ".join(entries) or "none"
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:200]!r} (tools: {known})")
        arguments = dict(params.arguments or {})
        problems = sorted(validators[entry.name].iter_errors(arguments), key=lambda e: list(e.path))
        if problems:
            where = "/".join(str(p) for p in problems[0].path) or "(arguments)"
            return failed("ERR_INVALID_INPUT", f"invalid arguments at {where}: {problems[0].message[:200]}")
        request = {"name": entry.name, "arguments": arguments}
        what = f"McpServer.Tools tool {entry.name}"
        handler = live._doc(entry.handler.name)
        try:
            inputs = (
                _fill(entry.inputs, {"request": request}, what) if entry.inputs is not None else arguments
            )
            runnable = await live.runnable(entry.handler.name)
            output = await runnable.invoke(inputs)
            if handler.kind == "Mcp.ToolsCall" and output.get("isError"):
                # as Telo's ToolsCall throws it: a failure `catches` may answer
                raise ToolError(
                    f"tool {inputs.get('name')!r}: {_error_text(output)}", code="ERR_MCP_TOOL_ERROR"
                )
            if entry.result is not None:
                value = _fill(entry.result, {"request": request, "result": output}, what)
            else:
                value = _default_result(handler.kind, output)
        except ToolbridgeError as exc:
            error = {"code": exc.code, "message": exc.message}
            for catch in entry.catches:
                if catch.code is not None and catch.code != exc.code:
                    continue
                scope = {"request": request, "error": error}
                if catch.when is not None and not telo_truthy(_fill(catch.when, scope, what)):
                    continue
                message = (
                    _fill(catch.error.message, scope, what)
                    if catch.error.message is not None
                    else exc.message
                )
                data = _fill(catch.error.data, scope, what) if catch.error.data is not None else None
                raise MCPError(catch.error.code, str(message)[:2000], data) from None
            return failed(exc.code, exc.message)
        try:
            return types.CallToolResult.model_validate(value)
        except ValueError:
            return failed("ERR_MANIFEST_EXPRESSION", f"{what}: `result` is not a CallToolResult")

    return Server(
        server.server_info.name,
        version=server.server_info.version,
        instructions=server.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio_target(manifest: Any, name: str) -> None:
    """Open `manifest` and serve its `McpServer.StdioServer` `name` on stdin/stdout until the
    client closes the connection; then close everything built."""
    from .._serving import run_stdio

    async with manifest.open() as live:
        await run_stdio(create_mcp_server(live, name))
