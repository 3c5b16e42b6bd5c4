"""Serving task tools as a real MCP server, with the official SDK's low-level server API.

`create_server(toolset)` builds an `mcp.server.Server` whose `tools/list` gives the task tools
(`outputSchema` = the task envelope) and whose `tools/call` runs the task and returns the
envelope as `structuredContent` plus a JSON text block (and image blocks for screenshots), with
`isError` when the status is not `success`. When the client sent a progress token, the
scheduler's per-instruction progress is forwarded as `notifications/progress` (the SDK's
`report_progress` does nothing otherwise). An unknown tool name is a JSON-RPC error -32602
(invalid params), as the specification says, naming the tools there are. When the client
declared the elicitation capability and the connection can carry server-to-client requests (the
handshake era), actions that need a person (`userGuide`) ask through `elicitation/create`;
otherwise they fail with a message saying so.

The SDK's server serves both protocol eras: over stdio, `Server.run` decides per connection from
the client's first request (the `initialize` handshake, or the 2026-07-28 per-request envelope);
the Streamable HTTP app does the same per request.

`serve_stdio` and `serve_http` own the tool set's lifetime: the browser is closed when serving
ends, however it ends.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from .. import telemetry
from .._serving import run_http, run_stdio
from .._version import __version__
from ._provider import TaskToolSet
from ._scheduler import ElicitFn

__all__ = ["create_server", "run_http", "run_stdio", "serve_http", "serve_stdio"]

SERVER_NAME = "toolbridge-tasks"


def create_server(toolset: TaskToolSet, *, name: str = SERVER_NAME) -> Server[Any]:
    """An SDK low-level `Server` offering `toolset`'s tools (the caller closes the tool set)."""
    tools = [types.Tool.model_validate(d) for d in toolset.mcp_definitions()]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if toolset.get(params.name) is None:
            known = ", ".join(toolset.names) or "none"
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:200]!r} (tools: {known})")

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(value, total, message)

        # Under the SDK's server span, whose parent is the trace context of the request's `_meta`.
        with telemetry.task_span(params.name, params.arguments) as span:
            outcome = await toolset.run(params.name, params.arguments, progress, elicit=_elicitation(ctx))
            span.set("toolbridge.task.status", outcome.status)
            if not outcome.ok:
                span.fail("tool_error")
        return types.CallToolResult.model_validate(outcome.to_call_result())

    return Server(
        name,
        version=__version__,
        instructions="Task tools: each tool runs a sequence of browser and service actions.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _elicitation(ctx: Any) -> ElicitFn | None:
    """`elicit(message, schema)` over this request's session, when the client offers elicitation."""
    session = ctx.session
    caps = session.client_capabilities
    if caps is None or caps.elicitation is None or not session.can_send_request:
        # the 2026-07-28 era asks through InputRequiredResult round trips instead, which task
        # tools do not do (yet): there the person cannot be asked, and userGuide says so
        return None

    async def elicit(message: str, schema: dict[str, object]) -> dict[str, object]:
        result = await session.elicit_form(message, schema, related_request_id=ctx.request_id)
        return {"action": result.action, "content": dict(result.content or {})}

    return elicit


async def serve_stdio(toolset: TaskToolSet, *, name: str = SERVER_NAME) -> None:
    """Serve over stdin/stdout until the client closes the connection; then close the tool set."""
    server = create_server(toolset, name=name)
    try:
        await run_stdio(server)
    finally:
        with anyio.CancelScope(shield=True):
            await toolset.aclose()


async def serve_http(
    toolset: TaskToolSet, *, host: str = "127.0.0.1", port: int = 8000, name: str = SERVER_NAME
) -> None:
    """Serve Streamable HTTP at `http://host:port/mcp` until interrupted; then close the tool set."""
    server = create_server(toolset, name=name)
    app = server.streamable_http_app(host=host)
    try:
        await run_http(app, host=host, port=port)
    finally:
        with anyio.CancelScope(shield=True):
            await toolset.aclose()
