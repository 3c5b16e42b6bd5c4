"""Serving a Telo application's `McpServer.StdioServer` / `McpServer.HttpEndpoint` with the
official SDK's server.

`create_mcp_server(live, name, principal=)` builds an `mcp.server.Server` (the low-level server
the task tools and the gateway serve through; both protocol eras) whose `tools/list` gives the
entries of the server's `McpServer.Tools` bundles and whose `tools/call`:

1. refuses an unknown tool with JSON-RPC -32602, and arguments that break `argumentsSchema`
   with a tool result `isError` (`ERR_INVALID_INPUT: ...`);
2. runs the call governed, as the gateway does: one `GovernedSession` per call (a journal run
   whose principal is who called: `local:<user>` on stdio, `anonymous` over HTTP) under the
   manifest's `Runtime` (its grants: `tool:NAME` and `effect:EFFECTS` of the entry, its limits
   and journal), or, without one, under a runtime in memory that grants exactly the served tools;
   a refused call (`PERMISSION_DENIED`, `LIMIT_EXCEEDED`, ...) is a tool result `isError`
   with the runtime's code and generic message, and its journal row;
3. fills the handler's inputs from the entry's `inputs` (`!cel` over `request`:
   `{name, arguments}`), or passes the arguments themselves;
4. runs the handler (`Ai.Agent`, `Ai.Text`, `Ai.Image`, `McpClient.ToolsCall`,
   `McpClient.ToolsList`, built once per application);
5. answers the entry's `result` (`!cel` over `request` and `result`) as the `CallToolResult`,
   or by default: an agent's or a model's text (with the whole result as structured content),
   an image's image blocks, a `ToolsCall`'s result as the server answered it, anything else as
   JSON; a result with `isError` is journaled `TOOL_ERROR`;
6. a failure (`ToolbridgeError`: its `code` and `message`) is answered by the first `catches`
   entry whose `code` matches and whose `when` holds (over `request` and `error`) as that
   JSON-RPC error, or else as a tool result `isError` with `CODE: message` (journaled
   `TOOL_FAILED` / `TOOL_ERROR`).

Its `McpServer.Resources` and `McpServer.Prompts` are served by `_mcp_server_reads`.

`serve_stdio_target(manifest, name)` opens the manifest and serves it on stdin/stdout until the
client closes the connection; `serve_http_target(manifest, name, host=, port=)` serves an
`McpServer.HttpEndpoint` over Streamable HTTP at `http://host:port/mcp` (stateless unless the
endpoint says `stateful: true`) until interrupted. Everything built is closed then.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._json import JsonObject, JsonValue
from ..errors import PolicyError, ToolbridgeError, ToolError
from ._kinds_mcp_server import HttpEndpointDoc, McpServerDoc, McpServerToolsDoc, ToolEntryDoc
from ._mcp_server_reads import bundle_entries, caught, mapped, served_reads

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    from ..catalog import ToolCatalog
    from ..runtime import Runtime, ToolContext
    from ._build import LiveManifest, Manifest

__all__ = ["create_mcp_server", "serve_http_target", "serve_stdio_target"]

DEFAULT_LIMITS = {"max_duration_ms": 600_000, "max_output_bytes": 64 * 1024 * 1024, "max_tool_calls": 1}
"""The limits of a served call without a `Runtime` (one call of at most 10 minutes, whose
result may hold images)."""


def _entries(live: LiveManifest, server: McpServerDoc) -> dict[str, ToolEntryDoc]:
    entries: dict[str, ToolEntryDoc] = {}
    for entry in bundle_entries(live, server.tools, McpServerToolsDoc):
        entries.setdefault(entry.name, entry)
    return entries


def _default_result(kind: str, output: JsonObject) -> JsonObject:
    if kind == "Mcp.ToolsCall":
        return dict(output)
    if kind == "Ai.Image":
        images = output.get("images")
        blocks: list[JsonValue] = [
            {"type": "image", "data": i["data"], "mimeType": i["mediaType"]}
            for i in (images if isinstance(images, list) else [])
            if isinstance(i, dict)
        ]
        text: list[JsonValue] = [{"type": "text", "text": f"no image: {output.get('finishReason')}"}]
        return {"content": blocks or text, "isError": False}
    if isinstance(output.get("text"), str):
        return {"content": [{"type": "text", "text": output["text"]}], "structuredContent": dict(output)}
    dumped = json.dumps(output, ensure_ascii=False)
    return {"content": [{"type": "text", "text": dumped}], "structuredContent": dict(output)}


@dataclass
class _Answer:
    """What one served call answers, set by the declared tool that runs its handler: a JSON-RPC
    error (a `catches` entry) or a `CallToolResult` that is not a success."""

    rpc: MCPError | None = None
    result: JsonObject | None = None


_ANSWER: ContextVar[_Answer] = ContextVar("toolbridge_served_answer")


def _failed(code: str, message: str) -> JsonObject:
    return {"content": [{"type": "text", "text": f"{code}: {message}"}], "isError": True}


def _handler_of(
    live: LiveManifest, entry: ToolEntryDoc
) -> Callable[[JsonObject, ToolContext], Awaitable[JsonObject]]:
    """The declared tool's `execute` for `entry`: runs the handler and shapes its answer; a
    failure or an `isError` answer raises (for the journal) with the answer in `_ANSWER`."""
    import mcp_types as types

    what = f"McpServer.Tools tool {entry.name}"
    kind = live._doc(entry.handler.name).kind

    def default(output: JsonObject) -> JsonValue:
        return _default_result(kind, output)

    async def execute(arguments: JsonObject, ctx: ToolContext) -> JsonObject:
        answer = _ANSWER.get()
        request = {"name": entry.name, "arguments": arguments}
        try:
            value = await mapped(live, entry, request, arguments, default, what)
        except ToolbridgeError as exc:
            answer.rpc = caught(entry.catches, request, exc, what)
            if answer.rpc is not None:
                raise ToolError(exc.message, code=exc.code) from None
            answer.result = _failed(exc.code, exc.message)
            raise ToolError(exc.message, code=exc.code, details={"is_error": True}) from None
        try:
            checked = types.CallToolResult.model_validate(value)
        except ValueError:
            answer.result = _failed("ERR_MANIFEST_EXPRESSION", f"{what}: `result` is not a CallToolResult")
            raise ToolError("the result is not a CallToolResult", details={"is_error": True}) from None
        dumped: JsonObject = checked.model_dump(by_alias=True, mode="json", exclude_none=True)
        if checked.is_error:
            answer.result = dumped
            raise ToolError("the tool answered isError", details={"is_error": True})
        return dumped

    return execute


async def _governance(live: LiveManifest, entries: dict[str, ToolEntryDoc]) -> tuple[Runtime, ToolCatalog]:
    """The runtime served calls run under, and the catalog of the served tools as declared tools."""
    from ..catalog import ToolCatalog, check_declared
    from ..runtime import create_runtime, define_tool

    runtime = await live.runtime()
    if runtime is None:
        grants = [f"tool:{n}" for n in entries] + ["effect:read", "effect:write", "effect:host"]
        grants += ["resources:*", "prompts:*"]  # every served resource and prompt
        runtime = await live._own(create_runtime(permissions={"allow": grants}, limits=DEFAULT_LIMITS))
    timeout_ms = max(runtime.limits.tool_timeout_ms, runtime.limits.max_duration_ms)
    tools = [
        define_tool(
            e.name,
            "1",
            (e.description or e.name)[:4096],
            {"type": "object"},  # the arguments are checked against `argumentsSchema` before
            {"type": "object"},
            e.effects,
            [],
            timeout_ms=timeout_ms,
            execute=_handler_of(live, e),
        )
        for e in entries.values()
    ]
    return runtime, ToolCatalog((), check_declared(tools, "McpServer.Tools"))


async def create_mcp_server(live: LiveManifest, name: str, *, principal: str) -> Server:
    """An SDK low-level `Server` for the `McpServer.StdioServer` or `McpServer.HttpEndpoint`
    document `name` (see the module docstring); `live` is the open manifest, which owns
    everything the handlers use; `principal` is who calls (the journal's principal)."""
    import jsonschema  # type: ignore[import-untyped]
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    from ..runtime import GovernedSession

    server = live._doc(name).model
    assert isinstance(server, McpServerDoc)
    entries = _entries(live, server)
    runtime, catalog = await _governance(live, entries)
    label = f"mcp-server {server.server_info.name}"
    tools = [
        types.Tool(name=e.name, description=e.description, input_schema=dict(e.arguments_schema))
        for e in entries.values()
    ]
    validators = {
        n: jsonschema.validators.validator_for(e.arguments_schema)(e.arguments_schema)
        for n, e in entries.items()
    }

    def failed(code: str, message: str) -> types.CallToolResult:
        return types.CallToolResult.model_validate(_failed(code, message))

    async def list_tools(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        entry = entries.get(params.name)
        if entry is None:
            known = ", ".join(entries) or "none"
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:200]!r} (tools: {known})")
        arguments = dict(params.arguments or {})
        problems = sorted(validators[entry.name].iter_errors(arguments), key=lambda e: list(e.path))
        if problems:
            where = "/".join(str(p) for p in problems[0].path) or "(arguments)"
            return failed("ERR_INVALID_INPUT", f"invalid arguments at {where}: {problems[0].message[:200]}")
        answer = _Answer()
        token = _ANSWER.set(answer)
        try:
            async with GovernedSession(runtime, principal=principal, label=label, catalog=catalog) as session:
                result = await session.call_tool(entry.name, arguments)
        except PolicyError as exc:
            if answer.rpc is not None:
                raise answer.rpc from None
            if answer.result is not None:
                return types.CallToolResult.model_validate(answer.result)
            return failed(exc.code, exc.message)  # refused or failed by the runtime's rules
        finally:
            _ANSWER.reset(token)
        return types.CallToolResult.model_validate(result.structured)

    return Server(
        server.server_info.name,
        version=server.server_info.version,
        instructions=server.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **served_reads(live, server, runtime=runtime, principal=principal, label=label),
    )


def _local_principal() -> str:
    try:
        return f"local:{getpass.getuser()}"
    except (KeyError, OSError):
        return "local:unknown"


async def serve_stdio_target(manifest: Manifest, name: str) -> None:
    """Open `manifest` and serve its `McpServer.StdioServer` `name` on stdin/stdout until the
    client closes the connection; then close everything built."""
    from .._serving import run_stdio

    async with manifest.open() as live:
        await run_stdio(await create_mcp_server(live, name, principal=_local_principal()))


async def serve_http_target(
    manifest: Manifest,
    name: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    on_listening: Callable[[str, int], None] | None = None,
    path: str = "/mcp",
) -> None:
    """Open `manifest` and serve its `McpServer.HttpEndpoint` `name` over Streamable HTTP at
    `http://host:port/mcp` (or `path`) until interrupted (`on_listening(host, port)` is told the bound port,
    the real one for port 0); then close everything built."""
    from .._serving import run_http

    async with manifest.open() as live:
        endpoint = live._doc(name).model
        stateful = isinstance(endpoint, HttpEndpointDoc) and endpoint.stateful
        server = await create_mcp_server(live, name, principal="anonymous")
        app = server.streamable_http_app(host=host, stateless_http=not stateful, streamable_http_path=path)
        await run_http(app, host=host, port=port, on_listening=on_listening)
