"""The gateway as an MCP server, on the official SDK's low-level server API (both protocol eras).

`create_server(gateway)` builds the SDK `Server` whose handlers ask the `GatewayCore`;
`serve_stdio` / `serve_http` run it (the serving plumbing is `toolbridge._serving`'s, shared
with `serve-tasks`), together with the watcher that notices when the union changes and tells
every client (`_events.EventHub`: handshake-era connections get `notifications/tools/list_changed`,
2026-07-28 clients hear it on their `subscriptions/listen` streams, which `create_server` serves).

Who calls: over stdio, the local user (the manifest's `local: true` client, else `local:<user>`
under the runtime's own grants); over HTTP, the identity whose bearer token the request carries
(`BearerAuth`, an ASGI middleware in front of the SDK's app: a missing or wrong token is 401
before any MCP message is read). Without any token in the manifest, HTTP clients are
`anonymous`, under the runtime's grants.
"""

from __future__ import annotations

import functools
import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

from .._version import __version__
from ..calls import ToolBinding, ToolTarget
from ..errors import bounded
from ..runtime import keep_leases
from ._answers import page_of
from ._breaker import UNAVAILABLE, Watched
from ._bulkhead import InFlight, SessionBulkhead
from ._context import GatewayContext
from ._core import GatewayCore, Identity
from ._discovery import META_TOOLS
from ._events import LISTEN_HOLD_S, MAX_SUBSCRIPTIONS
from ._passthrough import add_passthrough
from ._resume import RETRY_MS, ResumeScopes, SessionEventStore
from ._scrub import ScrubbingServer
from ._upstream import CallContext

if TYPE_CHECKING:
    from ._build import OpenGateway

__all__ = ["BearerAuth", "create_server", "serve_http", "serve_stdio"]

log = logging.getLogger("toolbridge.gateway")

UPSTREAM_DOWN = "the server of this tool keeps failing; calls to it are paused, try again later"
STALE_KEY = "toolbridge/stale"
"""`_meta` key of a listed tool whose server could not be listed lately: its last good definition."""

LIMITED = "LIMIT_EXCEEDED"
TOO_MANY_CALLS = "too many calls of this client in flight; try again when one has ended"

IDENTITY_KEY = "toolbridge.identity"
"""Where `BearerAuth` leaves the caller's identity name in the ASGI scope."""


class _GatewayServer(ScrubbingServer):
    """The SDK server, announcing that its lists change (the gateway says when); every message it
    sends is scrubbed of registered secrets (`_scrub`)."""

    def create_initialization_options(
        self, notification_options: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        options = notification_options or NotificationOptions(
            tools_changed=True, resources_changed=True, prompts_changed=True
        )
        return super().create_initialization_options(options, *args, **kwargs)


def create_server(gateway: OpenGateway) -> Server[dict[str, object]]:
    """An SDK `Server` serving `gateway` (see the module docstring)."""
    core: GatewayCore = gateway.core
    hub = gateway.events
    inflight = InFlight(gateway.bulkheads.max_calls_in_flight_per_identity)

    def identity_of(ctx: GatewayContext) -> Identity:
        request = ctx.request
        if request is None:
            identity = gateway.local_identity
        else:
            name = request.scope.get(IDENTITY_KEY)
            found = gateway.identities.get(name) if isinstance(name, str) else None
            if found is None:
                raise MCPError(types.INVALID_REQUEST, "unauthenticated")
            identity = found
        hub.seen(ctx.session, identity)
        return identity

    async def listen(
        ctx: GatewayContext, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 client's event stream: list changes, and the resources it may read."""
        identity = identity_of(ctx)
        wanted = params.notifications.resource_subscriptions or []
        holder = object()
        kept: list[str] = []
        try:
            slot = hub.listen_slot(identity)
            slot.__enter__()
        except LookupError as exc:  # one client may not take every stream of the gateway
            raise MCPError(types.INVALID_REQUEST, str(exc)) from None
        try:
            with anyio.move_on_after(LISTEN_HOLD_S):  # URIs not held by then are not honored
                for uri in wanted[:MAX_SUBSCRIPTIONS]:
                    candidates = hub.candidates(identity, uri) if isinstance(uri, str) else []
                    if candidates and await hub.hold(holder, uri, candidates, owner=identity.name):
                        kept.append(uri)
            notifications = params.notifications.model_copy(update={"resource_subscriptions": kept or None})
            result: types.SubscriptionsListenResult = await hub.listen_handler(
                ctx, params.model_copy(update={"notifications": notifications})
            )
            return result
        finally:
            slot.__exit__(None, None, None)
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await hub.release(holder)

    async def list_tools(
        ctx: GatewayContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        identity = identity_of(ctx)
        tools = await core.tools(identity)
        if gateway.discovery is not None:  # past its threshold: meta tools and a working set
            tools = await gateway.discovery.listed(identity, ctx.session, tools)
        if gateway.stale():
            tools = _marked(tools, _stale_names(gateway))
        page, nxt = page_of(tools, params.cursor if params else None, core.page_size)
        return types.ListToolsResult(tools=page, next_cursor=nxt)

    async def call_tool(
        ctx: GatewayContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        identity = identity_of(ctx)
        session = ctx.session
        if gateway.discovery is not None and params.name in META_TOOLS:
            meta = await gateway.discovery.handle(identity, session, ctx.request_id, params)
            if isinstance(meta, types.CallToolResult):
                return meta
            params = meta or params  # `call_tool`: the call it stands for, governed as any
        upstream = _upstream_of(core, params.name)
        if upstream is not None and upstream.breaker.opened_at is not None and not upstream.breaker.allow():
            return await core.refused(identity, params.name, params.arguments, UNAVAILABLE, UPSTREAM_DOWN)
        if not inflight.enter(identity.name):  # one identity takes only its share of the gateway
            return await core.refused(identity, params.name, params.arguments, LIMITED, TOO_MANY_CALLS)
        try:
            return await forward(ctx, identity, session, params)
        finally:
            inflight.leave(identity.name)

    async def forward(
        ctx: GatewayContext, identity: Identity, session: ServerSession, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            try:
                await session.report_progress(value, total, message)
            except Exception:  # the client went away; the call itself decides what happens
                log.debug("progress could not be forwarded")

        context = CallContext.of(identity, session, ctx.request_id, progress, core.approval_timeout_s)
        return await core.call(
            identity,
            params.name,
            params.arguments,
            context=context,
            input_responses=params.input_responses,
            request_state=params.request_state,
        )

    server = _GatewayServer(
        gateway.name,
        version=__version__,
        instructions=f"toolbridge gateway {gateway.name}: governed tools of several MCP servers.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=listen,
        get_tool_input_schema=core.input_schema,
    )
    add_passthrough(server, gateway, identity_of, hub)
    server.middleware = [
        _Traced(m) if isinstance(m, OpenTelemetryMiddleware) else m for m in server.middleware
    ]
    return server


class _Traced:
    """The SDK's OpenTelemetry middleware, run only when a tracer provider is configured.

    Without one, its span is a no-op that still costs about a tenth of the gateway's own time per
    forwarded call (building attributes, entering the proxy tracer's context managers).
    """

    def __init__(self, inner: OpenTelemetryMiddleware) -> None:
        self.inner = inner

    async def __call__(self, ctx: GatewayContext, call_next: CallNext) -> HandlerResult:
        if _tracing():
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def _tracing() -> bool:
    configured = getattr(_otel_trace(), "_TRACER_PROVIDER", True) is not None  # private: read defensively
    return configured or "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


@functools.cache
def _otel_trace() -> Any:
    """OpenTelemetry's `trace` module, imported once (not by an import statement per request)."""
    from opentelemetry import trace

    return trace


def _upstream_of(core: GatewayCore, name: str) -> Watched | None:
    """The upstream that serves tool `name` (as last listed), or None (unknown, not an upstream)."""
    catalog = core.catalog.last()
    target = catalog.targets.get(name) if catalog is not None else None
    return _watched(target) if target is not None else None


def _watched(target: ToolTarget) -> Watched | None:
    """The upstream (as the gateway watches it) behind `target`, or None (a declared tool, a task)."""
    binding = target.binding
    provider = binding.provider if isinstance(binding, ToolBinding) else None
    return provider if isinstance(provider, Watched) else None


def _stale_names(gateway: OpenGateway) -> set[str]:
    catalog = gateway.core.catalog.last()
    if catalog is None:
        return set()
    return {
        name
        for name, target in catalog.targets.items()
        if (watched := _watched(target)) is not None and watched.stale
    }


def _marked(tools: list[types.Tool], stale: set[str]) -> list[types.Tool]:
    """`tools`, those in `stale` with `_meta["toolbridge/stale"]: true`."""
    if not stale:
        return tools
    return [
        t.model_copy(update={"meta": {**(t.meta or {}), STALE_KEY: True}}) if t.name in stale else t
        for t in tools
    ]


async def _watch(gateway: OpenGateway, interval_s: float) -> None:
    """Notice changes of the union (upstream changes, a renewed lock, an upstream served from
    its last good listing or recovered) and tell every client.

    `refresh` lists every upstream at once, each within its own deadline: one that hangs
    delays this loop by its deadline at most, and never the clients' listings or calls.
    """
    last = (await gateway.core.signature(), gateway.stale())
    while True:
        await anyio.sleep(interval_s)
        try:
            await gateway.refresh()
            now = (await gateway.core.signature(), gateway.stale())
        except Exception as exc:  # a source that cannot be listed now: try again later
            log.info("the gateway's watcher could not list: %s", bounded(str(exc), 200))
            continue
        if now != last:
            last = now
            await gateway.events.changed("tools")


async def serve_stdio(gateway: OpenGateway, *, watch_interval_s: float = 1.0) -> None:
    """Serve over stdin/stdout until the client closes the connection.

    On pipes (what an MCP client gives), the event loop reads and writes them itself (`_stdio`);
    otherwise `toolbridge._serving.run_stdio` does (bounded lines, read by a thread).
    """
    from .._serving import run_stdio
    from ._stdio import pipe_stdio, pipes_usable

    server = create_server(gateway)
    async with gateway.events.running(), anyio.create_task_group() as tg:
        tg.start_soon(_watch, gateway, watch_interval_s)
        tg.start_soon(keep_leases, gateway.local_identity.runtime)
        if pipes_usable():
            async with pipe_stdio() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        else:
            await run_stdio(server)
        tg.cancel_scope.cancel()


ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: the request's bearer token names its identity, or the answer is 401."""

    def __init__(self, app: ASGIApp, tokens: dict[str, str], *, anonymous: str | None = None) -> None:
        self.app = app
        self._tokens = [(token.encode("utf-8"), name) for token, name in tokens.items()]
        self._anonymous = anonymous

    def _who(self, header: bytes | None) -> str | None:
        if not self._tokens:
            return self._anonymous
        if header is None or header[:7].lower() != b"bearer ":
            return None
        given = header[7:].strip()
        found: str | None = None
        for token, name in self._tokens:  # compare with every token, in constant time each
            if hmac.compare_digest(given, token):
                found = name
        return found

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers") or [] if k == b"authorization"), None)
        who = self._who(header)
        if who is None:
            body = json.dumps(
                {"error": "unauthorized", "error_description": "a valid bearer token is required"}
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        scope[IDENTITY_KEY] = who
        await self.app(scope, receive, send)


async def serve_http(
    gateway: OpenGateway,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    stateless: bool = False,
    watch_interval_s: float = 1.0,
    on_listening: Callable[[str, int], None] | None = None,
) -> None:
    """Serve Streamable HTTP at `http://host:port/mcp` until interrupted (`on_listening(host,
    port)` is told the bound port, the real one for port 0, before serving starts)."""
    from .._serving import run_http

    limits = gateway.bulkheads
    if gateway.discovery is not None:  # no sessions: working sets are kept per identity
        gateway.discovery.stateless = stateless
    server = create_server(gateway)
    app: Any = server.streamable_http_app(
        host=host,
        stateless_http=stateless,
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.session_idle_timeout_s,
        event_store=None if stateless else SessionEventStore(),
        retry_interval=None if stateless else RETRY_MS,
    )
    if not stateless:  # resumable streams, each session's own; sessions bound to their identity
        app = ResumeScopes(app)
        app = SessionBulkhead(app, IDENTITY_KEY, limits.sessions_per_identity, limits.session_idle_timeout_s)
    wrapped: Any = BearerAuth(app, gateway.tokens, anonymous=gateway.anonymous)
    # Replicas on one PostgreSQL journal share DPoP's replay window and nonce key, and the
    # 2026-07-28 rounds' key and single use (`_replica_state`).
    from ._replica_state import open_replica_state

    shared = await open_replica_state(gateway.journal_location, gateway.name)
    if shared is not None:
        gateway.core.share_rounds(shared)
    if gateway.oauth is not None:  # OAuth resource-server mode (`_oauth_gate`)
        from ._oauth_gate import OAuthGate

        wrapped = OAuthGate(
            app,
            gateway.oauth,
            gateway.oauth_rules,
            tokens=gateway.tokens,
            identity_key=IDENTITY_KEY,
            resource_name=gateway.name,
            dpop_state=shared,
        )
    served, close_console = wrapped, None
    if gateway.operators or gateway.console_scopes:  # the operator's console at /console/ (docs/console.md)
        from ..console import console_for

        served, close_console = console_for(gateway, wrapped, host=host)
    try:
        async with gateway.events.running(), anyio.create_task_group() as tg:
            tg.start_soon(_watch, gateway, watch_interval_s)
            tg.start_soon(keep_leases, gateway.local_identity.runtime)
            await run_http(served, host=host, port=port, on_listening=on_listening)
            tg.cancel_scope.cancel()
    finally:
        if close_console is not None:
            close_console()
        if shared is not None:
            shared.close()
        closing = getattr(getattr(wrapped, "verifier", None), "aclose", None)
        if closing is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await closing()
