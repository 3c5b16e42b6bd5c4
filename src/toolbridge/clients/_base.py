"""The shared client machinery: one persistent connection, owned by one task, used by many calls.

Design
------
The SDK's `mcp.Client` is an async context manager that must be entered and exited in the same
task (its task groups and the stdio process live in that task's scopes). A toolbridge client, on the
other hand, is called from anywhere: many agent steps, many concurrent tool calls, sometimes
without an `async with` around it. So each connection gets an **owner task**, which alone
enters and exits the SDK client; callers reach the shared session through `_connection()`:

```
caller tasks ──call_tool()──►  _Connection.sdk (mcp.Client)  ◄── entered/exited by ──  owner task
      │                             ▲                                                      │
      └──── _connection() ──────────┘  starts the owner lazily; waits for `ready`          │
                                                         aclose() / retire: `stop` ───────►┘
```

- The owner task is started lazily by the first call (or `connect()`) and reaped by `aclose()`.
  It enters the SDK client, sets `ready`, then waits for `stop`; leaving its `async with` shuts
  the server down (stdio: close stdin, then SIGTERM, then SIGKILL to the process group).
- Calls run in their own tasks on the shared `ClientSession` (the SDK correlates responses).
- A per-call deadline (`timeout=` or the client-wide `DEFAULT_TIMEOUT`) is a cancel scope around
  the SDK call, pushed back by each progress notification; when it expires the server is told to
  cancel, a late response is dropped, and the caller gets `McpTimeoutError`.
- Arguments no server could read fail their own call with `ERR_INVALID_INPUT` (`_outbound`). The
  SDK's `REQUEST_TIMEOUT` is never used (a server's -32001 is a plain JSON-RPC error).
- When the connection ends, every pending call fails with `TransportError`, the connection is
  retired, and the next call starts a fresh one. A Streamable HTTP session rejected with 404 is
  re-established once, then `SessionInvalidError`.
- `tools/list` walks `nextCursor` (at most `TOOLS_LIST_PAGE_CAP` pages) and caches the list; how
  long the cache is trusted and the `subscriptions/listen` stream are in `_changes`. A change,
  or a fresh connection after the first, increments `generation`.
- Closing a connection first ends its change stream (bounded wait), then leaves the SDK client.
- Server-to-client requests answered per call (`offer_call_requests`, `call_tool(requests=)`,
  the 2026-07-28 input rounds): `_call_requests`.

The owner task is an asyncio task (toolbridge runs on asyncio); everything inside it uses anyio.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import (
    ConfigError,
    McpTimeoutError,
    SessionInvalidError,
    ToolbridgeError,
    TransportError,
)
from ..sanitize import visible_text
from ..telemetry import clear_current, record_mcp_operation
from ._call_requests import CallRequests, InFlightCalls, PerCallRequests, call_with_requests
from ._call_support import RollingDeadline, finish_rounds, resend_after, settle_protocol
from ._changes import (
    DEFAULT_TOOLS_TTL,
    TOOLS_LIST_PAGE_CAP,
    CachedTools,
    ChangeChannel,
    cache_trusted,
    fetch_all_tools,
    keep_listening,
    note_capabilities,
)
from ._content_guard import PreservingDispatcher, guard_dispatcher_of
from ._contract import McpClient, ProgressHandler, call_result_to_dict
from ._errors import map_exception, unwrap_group
from ._handlers import ElicitationHandler, RootsSpec, SamplingHandler, roots_callback
from ._outbound import _plain, check_arguments, check_text
from ._stdio_transport import DEFAULT_MAX_MESSAGE_BYTES, make_logging_callback

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOOLS_TTL",
    "TOOLS_LIST_PAGE_CAP",
    "ConnectionClient",
    "McpClient",
    "ProgressHandler",
    "call_result_to_dict",
]

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds allowed for starting a server and completing the handshake."""

DEFAULT_TIMEOUT = 300.0
"""Seconds every request may wait for its answer unless the client or the call says otherwise.

For `tools/call` each progress notification of the call starts the wait anew, so a tool that
reports progress may run longer. Pass `timeout=None` to a client to wait without limit.
"""

_TEARDOWN_MARGIN = 5.0
"""Seconds allowed for a connection's teardown beyond the server's shutdown grace period."""

_CHANNEL_SETTLE_WAIT = 2.0
"""Seconds a listing waits for a new connection's change stream to be acknowledged first."""

_LISTEN_DRAIN_WAIT = 2.0
"""Seconds a closing connection waits for the SDK to abandon its change stream's request."""


class _Connection:
    """One connection's state, shared between its owner task and the calls that use it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.ready = anyio.Event()
        self.stop = anyio.Event()
        self.done = anyio.Event()
        self.sdk: Client | None = None
        self.error: BaseException | None = None
        self.scope: anyio.CancelScope | None = None
        self.task: asyncio.Task[None] | None = None
        self.transport: Any = None  # the transport object, when the subclass exposes one
        self.retired = False
        self.session_rejected = False  # set by the HTTP layer when the server rejects the session
        self.auth_rejected: str | None = None  # set by the HTTP layer while credentials are refused
        self.dispatcher: Any = None  # the SDK session's own dispatcher, kept once connected
        self.guard: PreservingDispatcher | None = None  # our wrapper around it
        self.list_changed = False  # the server advertises tools.listChanged
        self.channel = ChangeChannel()
        self.calls = InFlightCalls()  # the calls that take server-to-client requests
        self.get_stream_open = False  # HTTP: the server accepted the GET stream (set by HttpClient)
        self.listed = False
        """This connection's SDK session holds the server's current tool listing (or needs none):
        on a 2026-07-28 connection the SDK mirrors `x-mcp-header` arguments into `Mcp-Param-*`
        headers from the last listing, so `call_tool` lists first when this is False."""
        self.up = False
        """Seen `ready` and `settled` once (both events are only ever set, never cleared): the
        fast path then checks only what can still change (liveness, errors, the loop)."""

    @property
    def settled(self) -> bool:
        """True once calls may take the fast path: at once, or, when a `subscriptions/listen`
        stream is wanted, once its first outcome is known, so a change made by a first call is
        not missed."""
        return self.channel.known.is_set()

    def dispatcher_closed(self) -> bool:
        """Whether the SDK dispatcher has seen the connection end (private attribute, read defensively)."""
        if self.dispatcher is not None:
            return bool(getattr(self.dispatcher, "_closed", False))
        sdk = self.sdk
        session = getattr(sdk, "_session", None) if sdk is not None else None
        dispatcher = getattr(session, "_dispatcher", None)
        return bool(getattr(dispatcher, "_closed", False))


class ConnectionClient(PerCallRequests):
    """Base of the toolbridge clients: lazy, persistent, shared connection (see the module docstring).

    Subclasses implement `_open()` (return what `mcp.Client` connects to) and may override
    `_describe()`, `_stderr_tail()`, `_transport_closed()`, and `_shutdown_grace_s`.

    Args:
        client_info: name and version announced to the server (default: toolbridge and its version).
        timeout: client-wide deadline of every request in seconds (default `DEFAULT_TIMEOUT`;
            None: none); a call's progress notifications push it back.
        sampling_handler: answers `sampling/createMessage` (default: sampling not offered).
        elicitation_handler: answers `elicitation/create` (default: elicitation not offered).
        roots: roots to advertise (default: none, and the roots capability is not offered).
        logger_name: the Python logger for the server's stderr and log messages.
        connect_timeout: seconds allowed to start the server and finish the handshake.
        mode: protocol negotiation, as in `mcp.Client`: `"auto"` (probe 2026-07-28 `server/discover`,
            fall back to the `initialize` handshake), `"legacy"` (handshake only, no probe),
            `"modern"` (the newest 2026-era revision, no handshake) or a modern revision string.
        max_message_bytes: the largest single message the transport accepts (None: the transport
            has no message framing to cap, as in process); kept as `self.max_message_bytes`.
        tools_ttl: seconds a cached tool list is trusted when the server has no live change
            channel (`DEFAULT_TOOLS_TTL`; 0: never; None: until the connection is renewed). See
            `_changes` for the rule.

    Raises:
        ConfigError: a limit is not positive or `mode` is unknown.
    """

    _shutdown_grace_s: float = 5.0
    _net = "inproc"  # `network.transport` of the `mcp.client.operation.duration` metric
    _param_headers = False  # the transport carries `Mcp-Param-*` headers (HTTP; see call_tool)
    accepts_deadline = True
    """`call_tool` takes a caller's `deadline=` (the governed runtime gives it its tool timeout)."""

    def __init__(
        self,
        *,
        client_info: types.Implementation | Mapping[str, Any] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: RootsSpec | None = None,
        logger_name: str = "toolbridge.server",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        mode: str = "auto",
        max_message_bytes: int | None = None,
        tools_ttl: float | None = DEFAULT_TOOLS_TTL,
    ) -> None:
        from .._version import __version__

        if max_message_bytes is not None and max_message_bytes <= 0:
            raise ConfigError(
                f"{type(self).__name__}: max_message_bytes must be positive, got {max_message_bytes}"
            )
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout must be positive or None, got {timeout!r}")
        if connect_timeout <= 0:
            raise ConfigError(f"connect_timeout must be positive, got {connect_timeout!r}")
        if mode == "modern":
            mode = MODERN_PROTOCOL_VERSIONS[-1]
        if tools_ttl is not None and (not isinstance(tools_ttl, int | float) or not tools_ttl >= 0):
            raise ConfigError(f"tools_ttl must be a number >= 0 or None, got {tools_ttl!r}")
        if mode not in ("auto", "legacy") and mode not in MODERN_PROTOCOL_VERSIONS:
            raise ConfigError(
                f"mode must be 'auto', 'legacy', 'modern' or a modern protocol version, got {mode!r}"
            )
        if client_info is None:
            self._client_info = types.Implementation(name="toolbridge", version=__version__)
        elif isinstance(client_info, types.Implementation):
            self._client_info = client_info
        else:
            self._client_info = types.Implementation.model_validate(dict(client_info))
        self.max_message_bytes = max_message_bytes
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._mode = mode
        self._sampling_handler = sampling_handler
        self._elicitation_handler = elicitation_handler
        self._roots_callback = roots_callback(roots) if roots is not None else None
        self.logger = logging.getLogger(logger_name)
        self._conn: _Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owners: set[_Connection] = set()
        self._connections_made = 0
        self._closed = False
        self._tools_ttl = None if tools_ttl is None else float(tools_ttl)
        self._cache: CachedTools | None = None
        self._generation = 0
        self._seen: list[types.Tool] | None = None  # the last listing a caller was given
        self._skipped_tools: set[str] = set()

    # -- subclass hooks --------------------------------------------------------------------------

    async def _open(self, stack: AsyncExitStack, conn: _Connection) -> Any:
        """Prepare one connection; return what `mcp.Client` should connect to (a Transport or server)."""
        raise NotImplementedError

    def _describe(self) -> str:
        """A short name of the server for messages."""
        return "MCP server"

    def _stderr_tail(self, conn: _Connection | None) -> str:
        """The last lines the server wrote to stderr on this connection ("" if unknown)."""
        return ""

    def _transport_closed(self, conn: _Connection) -> bool:
        """Whether the transport itself knows the connection is over (stdio: the process exited)."""
        return False

    async def _after_connect_failure(self, conn: _Connection) -> None:
        """Called in the owner task after a failed connect, before the error is published."""

    def _legacy_channel_live(self, conn: _Connection) -> bool:
        """On a 2025-11-25 connection whose server advertises `tools.listChanged`: whether its
        change notifications can reach the client now (the connection itself carries them)."""
        return True

    # -- public surface -------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Grows each time the tool list changes or may have changed: the server said so, a new
        connection replaced an old one, the change stream died or came back, a cached list expired
        (see `_changes`), or a listing fetched (however: TTL expiry, `refresh=True`, reconnect)
        differs from the last one given. A consumer that caches the list by it (the agent) follows.
        """
        cache = self._cache
        if cache is not None and not self._trusted(cache):
            self._cache = None
            self._generation += 1
        return self._generation

    @property
    def closed(self) -> bool:
        """True once `aclose()` was called."""
        return self._closed

    @property
    def instructions(self) -> str | None:
        """The server's instructions (None before the first connection or when it gave none)."""
        sdk = self._current_sdk()
        return sdk.instructions if sdk is not None else None

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version (None before the first connection or if it did not say)."""
        sdk = self._current_sdk()
        return sdk.server_info if sdk is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version (None before the first connection)."""
        sdk = self._current_sdk()
        return sdk.protocol_version if sdk is not None else None

    def _current_sdk(self) -> Client | None:
        conn = self._conn
        if conn is None or conn.sdk is None:
            return None
        try:
            conn.sdk.session  # noqa: B018 - raises once the SDK client has exited
        except RuntimeError:
            return None
        return conn.sdk

    async def connect(self) -> None:
        """Connect now instead of at the first call (a no-op when already connected).

        Raises:
            TransportError: the server could not be started or reached (the message quotes the
                last lines of a stdio server's stderr).
            McpTimeoutError: the handshake did not finish within `connect_timeout`.
            ProtocolError, JsonRpcError: the handshake failed.
        """
        await self._connection()

    async def list_tools(self, *, refresh: bool = False) -> list[types.Tool]:
        """All the server's tools, following pagination, from the cache while it is trusted (while
        a live change channel exists, otherwise for `tools_ttl` seconds: see `_changes`).

        Args:
            refresh: ask the server, whatever the cache holds.

        Raises:
            TransportError: the connection failed.
            ProtocolError: more than `TOOLS_LIST_PAGE_CAP` pages, a repeating cursor, or an invalid
                listing.
            McpTimeoutError: the listing took longer than the client-wide timeout.
            JsonRpcError: the server answered with an error.
        """
        cache = self._cache
        if cache is not None and not refresh:
            conn = self._conn
            if conn is cache.conn and conn is not None and self._alive(conn) and self._trusted(cache):
                return list(cache.tools)
        generation = self._generation
        with anyio.move_on_after(self._timeout) as deadline:
            conn = await self._connection()
            channel = conn.channel
            if not channel.known.is_set():
                # A new connection's change stream: list once it is live, so the listing is trusted.
                with anyio.move_on_after(_CHANNEL_SETTLE_WAIT):
                    await channel.known.wait()
            epoch = self._live_epoch(conn)
            started = time.monotonic()
            try:
                tools = await fetch_all_tools(self._sdk_of(conn), self._describe)
                conn.listed = True
            except BaseException as exc:
                self._raise_mapped(exc, conn, lambda: "tools/list")
                raise  # pragma: no cover - _raise_mapped always raises
        if deadline.cancelled_caught:
            raise McpTimeoutError(
                f"tools/list of {self._describe()}: no complete answer within {self._timeout}s"
            )
        if generation == self._generation and conn is self._conn:
            self._cache = CachedTools(tools, conn, epoch, started)
        self._generation += self._seen is not None and tools != self._seen  # changed, however refreshed
        self._seen = tools
        return list(tools)

    def _live_epoch(self, conn: _Connection) -> int | None:
        """The change channel's epoch when it is live now, else None (see `_changes`)."""
        channel = conn.channel
        if channel.wanted:
            return channel.epoch if channel.live else None
        if conn.list_changed and self._legacy_channel_live(conn):
            return 0
        return None

    def _trusted(self, cache: CachedTools) -> bool:
        """Whether a cached listing may still be served (the rule of `_changes`)."""
        conn = cache.conn
        if not isinstance(conn, _Connection):  # pragma: no cover - always a connection
            return False
        return cache_trusted(cache, self._live_epoch(conn), conn.channel, self._tools_ttl)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a deadline per call is the API
        progress: ProgressHandler | None = None,
        deadline: float | None = None,
        requests: CallRequests | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        allow_input_required: bool = False,
    ) -> dict[str, Any]:
        """Call one tool and return its result in wire form (see `call_result_to_dict`).

        A result with `isError: true` is returned, not raised: deciding what a tool failure means
        is the caller's business (`McpToolProvider` raises `ToolError`).

        Args:
            name: the tool's name.
            arguments: the arguments object (default: empty).
            timeout: deadline in seconds for this call (default: the client-wide timeout); each
                progress notification of the call starts it anew.
            progress: receives the server's progress notifications for this call.
            deadline: the caller's own deadline, in event-loop time (`anyio.current_time()`),
                enforced in the call's one cancel scope together with `timeout` (progress never
                moves it). When it passes first, the call raises `TimeoutError` instead of
                `McpTimeoutError`: the caller's limit ran out, not the client's (the governed
                runtime's tool timeout comes this way, so a governed call enters one scope).
            requests: this call's answers to the server's sampling, elicitation and roots
                requests (kinds offered with `offer_call_requests`; see `_call_requests`).
            input_responses, request_state: resume a 2026-07-28 `InputRequiredResult`.
            allow_input_required: return a 2026-07-28 `InputRequiredResult` (its wire form, with
                `resultType: "input_required"`) instead of answering it with `requests`.

        Raises:
            ConfigError: `ERR_INVALID_INPUT`: the name or the arguments cannot be sent (a lone
                surrogate, NaN or an infinity, nesting deeper than `MAX_ARGUMENT_DEPTH`); nothing
                was sent and the connection is untouched.
            McpTimeoutError: no answer (nor progress) within the deadline (the server was told to
                cancel).
            TransportError: the connection failed or the server died (the next call reconnects).
            SessionInvalidError: an HTTP session was rejected, and so was a fresh one.
            ProtocolError: the result broke the protocol (for example structured content that does
                not match the tool's output schema).
            JsonRpcError: the server answered with a JSON-RPC error.
            TimeoutError: `deadline` passed before the client's own deadline (the server was told
                to cancel).
        """
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout must be positive or None, got {timeout!r}")
        if deadline is not None and (type(deadline) not in (float, int) or math.isnan(deadline)):
            raise ConfigError(f"deadline must be a time of the event loop's clock, got {deadline!r}")
        limit = timeout if timeout is not None else self._timeout
        args = dict(arguments) if arguments else {}

        def what() -> str:  # the operation's name, built only for a message
            return self._call_what(name)

        if type(name) is not str or not name.isascii():  # an ASCII name holds no lone surrogate
            check_text(name, what, "the tool name")
        if not _plain(args):  # the common case, proven without the full walk
            check_arguments(args, what)
        per_call = (name, args, requests, input_responses, request_state, allow_input_required)
        offered = self._call_requests or input_responses is not None or request_state is not None
        started = time.monotonic()
        # One deadline for the whole call: connecting (if needed), and a retry on a new session;
        # each progress notification of the call pushes it back by `limit`. The attempts run
        # here, not in helpers: every coroutine layer is paid again at each suspension.
        rolling = RollingDeadline(limit, progress, deadline)
        caller_timeout: TimeoutError | None = None
        try:
            for attempt in range(2):
                timed: types.CallToolResult | types.InputRequiredResult | None = None
                try:
                    with rolling.scope_class() as scope:  # anyio.CancelScope()
                        rolling.arm(scope)
                        conn: _Connection | None = None
                        try:
                            conn = self._ready_connection() or await self._connection()
                            sdk = self._sdk_of(conn)
                            if not conn.listed:
                                await self._list_for_param_headers(conn, sdk)
                            if not offered:
                                # The SDK session's call, not `sdk.call_tool`: see `resend_after`.
                                report = rolling.callback
                                try:
                                    timed = await sdk.session.call_tool(
                                        name, args, progress_callback=report, allow_input_required=True
                                    )
                                except MCPError as refused:
                                    timed = await resend_after(refused, sdk, name, args, report)
                                if type(timed) is not types.CallToolResult:
                                    timed = await finish_rounds(timed, sdk, name, args, report)
                            else:
                                timed = await call_with_requests(
                                    conn.calls, sdk.session, rolling.callback, *per_call
                                )
                        except BaseException as exc:
                            if conn is None:  # connecting failed: its errors are already ours
                                raise
                            try:
                                self._raise_mapped(exc, conn, what)
                            except SessionInvalidError:
                                self._retire(conn)
                                raise
                            raise  # pragma: no cover - _raise_mapped always raises
                        finally:
                            rolling.disarm(scope)
                except SessionInvalidError:
                    if attempt == 0:
                        self.logger.info("%s: HTTP session rejected; opening a new session", what())
                        continue
                    raise
                if scope.cancelled_caught or timed is None:
                    if rolling.caller_first:
                        caller_timeout = TimeoutError(
                            f"{what()}: the caller's deadline passed; the server was told to cancel"
                        )
                        raise caller_timeout
                    raise McpTimeoutError(
                        f"{what()}: no answer within {limit}s (nor progress); the server was told to cancel"
                    )
                result = (
                    call_result_to_dict(timed)
                    if type(timed) is types.CallToolResult
                    else timed.model_dump(by_alias=True, mode="json", exclude_none=True)
                )
                break
            else:  # pragma: no cover - the second attempt returns or raises
                raise AssertionError("unreachable")
        except BaseException as exc:
            # The caller's deadline is recorded as it was when the caller had a scope of its own:
            # a call that its caller cancelled.
            error = asyncio.CancelledError() if exc is caller_timeout else exc
            record_mcp_operation("tools/call", started, tool=name, error=error, transport=self._net)
            raise
        record_mcp_operation("tools/call", started, tool=name, transport=self._net)
        return result

    async def _list_for_param_headers(self, conn: _Connection, sdk: Client) -> None:
        """Before a call on a connection that has not listed the server's current tools: on a
        2026-07-28 HTTP connection, list them, so the SDK knows each tool's `x-mcp-header`
        parameters and mirrors them into the call's `Mcp-Param-*` headers (SEP-2243; a 2026
        server refuses a call whose headers and arguments disagree). A connection made only to
        call (the gateway's per-identity and per-capability connections) or whose tools changed
        lists once; a handshake-era connection, or one without headers (stdio, in-process), never
        needs to. The listing feeds the SDK only: the client's own cache (`list_tools`) and its
        generation are left as they were. A listing that fails is not retried before each call
        (the calls go without the headers until the tools change; the server says what it
        misses)."""
        conn.listed = True
        if not self._param_headers or sdk.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            await fetch_all_tools(sdk, self._describe)
        except Exception as exc:  # the call still goes; the server says what it misses
            self.logger.debug("%s: listing before a call failed: %s", self._describe(), type(exc).__name__)

    def _call_what(self, name: str) -> str:
        """The operation's name in messages (built only when a message needs it)."""
        return f"tools/call {name!r} on {self._describe()}"

    async def aclose(self) -> None:
        """Close the connection and stop the server. Idempotent; later calls raise `TransportError`.

        Teardown is shielded from cancellation and bounded by the shutdown grace period.
        """
        self._closed = True
        conns = list(self._owners)
        self._conn = None
        with anyio.CancelScope(shield=True):
            for conn in conns:
                self._signal_stop(conn)
            for conn in conns:
                await self._reap(conn)

    async def __aenter__(self) -> Any:
        if self._closed:
            raise TransportError(f"{self._describe()}: the client is closed")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- connection management ------------------------------------------------------------------

    def _sdk_of(self, conn: _Connection) -> Client:
        if conn.sdk is None:  # pragma: no cover - _connection() guarantees it
            raise TransportError(f"{self._describe()}: not connected")
        return conn.sdk

    def _alive(self, conn: _Connection) -> bool:
        return (
            not conn.retired
            and not conn.stop.is_set()
            and not conn.dispatcher_closed()
            and not self._transport_closed(conn)
        )

    def _raise_mapped(self, exc: BaseException, conn: _Connection, what: Callable[[], str]) -> None:
        """Re-raise `exc`, raised by an SDK operation on `conn`, as a toolbridge error (see `_errors`).

        The error boundary of every operation, written as a plain function called from an
        `except` clause, so that a call that succeeds pays nothing for it; `what` builds the
        operation's name only when an error needs it. A `TransportError` retires `conn`.

        Raises:
            TransportError, ProtocolError, JsonRpcError, SessionInvalidError: the mapped error.
            BaseException: `exc` itself when it is not mapped (a cancellation, a bug).
        """
        try:
            mapped = map_exception(
                exc,
                what=what(),
                connection_closed=lambda: not self._alive(conn) or conn.dispatcher_closed(),
                stderr_tail=lambda: self._stderr_tail(conn),
                session_rejected=lambda: conn.session_rejected,
                auth_rejected=lambda: conn.auth_rejected,
            )
            if mapped is exc:
                raise exc
            raise mapped from unwrap_group(exc)
        except TransportError:
            self._retire(conn)
            raise

    def _ready_connection(self) -> _Connection | None:
        """The current connection when it is up and usable right now, without waiting (else None).

        The fast path of every call: the checks `_connection()` makes of a live connection, with
        no await (so no extra event-loop iteration). None sends the caller to `_connection()`,
        which handles every other case (first use, a dead connection, a new event loop, closing,
        a `subscriptions/listen` stream not yet acknowledged).
        """
        conn = self._conn
        if conn is None:
            return None
        if not conn.up:
            if not conn.settled or not conn.ready.is_set():
                return None
            conn.up = True
        if (
            self._closed
            or conn.sdk is None
            or conn.error is not None
            or asyncio.get_running_loop() is not self._loop
            or not self._alive(conn)
        ):
            return None
        return conn

    async def _connection(self) -> _Connection:
        if self._closed:
            raise TransportError(f"{self._describe()}: the client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop and self._owners:
            # Used again from a new event loop (a second `asyncio.run`): the old connection belongs
            # to a loop that is gone and can be neither reused nor closed from here.
            self.logger.warning(
                "%s: used from a new event loop; the old connection is abandoned "
                "(close a client in the event loop that used it)",
                self._describe(),
            )
            self._conn = None
            self._owners.clear()
        self._loop = loop
        conn = self._conn
        if conn is None or (conn.ready.is_set() and not self._alive(conn)):
            if conn is not None:
                self._retire(conn)
            conn = self._start()
        await conn.ready.wait()
        if conn.error is not None:
            self._retire(conn)
            error = conn.error
            mapped = map_exception(
                error,
                what=f"connecting to {self._describe()}",
                connection_closed=lambda: True,
                stderr_tail=lambda: self._stderr_tail(conn),
                auth_rejected=lambda: conn.auth_rejected,
            )
            if isinstance(mapped, ToolbridgeError):
                raise mapped from unwrap_group(error)
            raise TransportError(
                f"connecting to {self._describe()}: {type(error).__name__}: {error}"
            ) from error
        if conn.sdk is None or self._closed:
            raise TransportError(f"{self._describe()}: the client is closed")
        return conn

    def _start(self) -> _Connection:
        """Create a connection and its owner task (synchronous: no other task can interleave)."""
        self._connections_made += 1
        conn = _Connection(self._connections_made)
        if self._connections_made > 1:
            # A renewed connection may be a restarted server with other tools.
            self._cache = None
            self._generation += 1
        self._conn = conn
        self._owners.add(conn)
        conn.task = asyncio.get_running_loop().create_task(
            self._own(conn), name=f"toolbridge-connection-{self._describe()}-{conn.number}"
        )
        return conn

    def _retire(self, conn: _Connection) -> None:
        """Stop using `conn`; its owner tears it down in the background (reaped by `aclose()`)."""
        if self._conn is conn:
            self._conn = None
        self._signal_stop(conn)

    def _signal_stop(self, conn: _Connection) -> None:
        conn.retired = True
        conn.stop.set()
        if not conn.ready.is_set() and conn.scope is not None:
            conn.scope.cancel()

    async def _reap(self, conn: _Connection) -> None:
        """Wait (bounded) for a connection's owner task to finish; cancel it if it overstays."""
        with anyio.move_on_after(self._shutdown_grace_s + _TEARDOWN_MARGIN):
            await conn.done.wait()
        task = conn.task
        if task is not None and not task.done():
            self.logger.warning("%s: connection teardown overran; cancelling it", self._describe())
            task.cancel()
            with anyio.move_on_after(_TEARDOWN_MARGIN):
                await asyncio.wait([task])

    def _build_sdk_client(self, target: Any, conn: _Connection) -> Client:
        return Client(
            target,
            mode=self._mode,
            cache=None,
            client_info=self._client_info,
            logging_callback=make_logging_callback(self.logger),
            message_handler=cast(MessageHandlerFnT, self._message_handler(conn)),
            **self._sdk_callbacks(conn.calls),
        )

    async def _own(self, conn: _Connection) -> None:
        """The owner task: enter the SDK client, publish it, wait for `stop`, exit the client.

        The connect deadline is the deadline of the owner's outer cancel scope, lifted once the
        handshake is done (a scope opened around the handshake alone would be exited while the
        SDK's task groups, entered inside it, are still open).
        """
        clear_current()  # the connection outlives the span that happened to open it
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout) as scope:
                conn.scope = scope
                if conn.stop.is_set():
                    return
                async with AsyncExitStack() as stack:
                    target = await self._open(stack, conn)
                    sdk = self._build_sdk_client(target, conn)
                    await stack.enter_async_context(sdk)
                    conn.dispatcher, conn.guard = guard_dispatcher_of(sdk.session, self._tool_skipped)
                    await settle_protocol(self.logger, self._mode, self._describe(), sdk)
                    scope.deadline = math.inf
                    conn.sdk = sdk
                    self._note_capabilities(conn, sdk)
                    conn.ready.set()
                    async with anyio.create_task_group() as tg:
                        if conn.channel.wanted:
                            tg.start_soon(self._keep_listening, conn, sdk)
                        await conn.stop.wait()
                        tg.cancel_scope.cancel()
                    # The change stream is ended (its request abandoned): let the SDK act on that
                    # before the session closes under the stream (see the module docstring).
                    if conn.guard is not None:
                        await conn.guard.wait_listens_done(_LISTEN_DRAIN_WAIT)
            if scope.cancelled_caught and not conn.ready.is_set() and not conn.stop.is_set():
                conn.error = McpTimeoutError(
                    f"connecting to {self._describe()}: no handshake within {self._connect_timeout}s"
                )
        except Exception as exc:  # the owner is a top-level task: record the failure for the callers
            if not conn.ready.is_set():
                conn.error = exc
            else:
                self.logger.debug("%s: connection ended with %r", self._describe(), exc)
        except anyio.get_cancelled_exc_class():
            pass  # cancelled by its owner (aclose, or the event loop shutting down): nothing to report
        finally:
            if conn.error is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                    await self._after_connect_failure(conn)
            conn.retired = True
            if self._conn is conn:
                self._conn = None
            self._owners.discard(conn)
            conn.channel.known.set()
            conn.ready.set()
            conn.done.set()

    # -- tool-list changes ----------------------------------------------------------------------

    def _tools_changed(self, conn: _Connection) -> None:
        conn.listed = False  # the SDK's x-mcp-header maps may be stale: the next call lists
        if conn is self._conn:
            self._cache = None
            self._generation += 1

    def _tool_skipped(self, name: str, detail: str) -> None:
        """A listed tool the SDK would refuse was left out (logged once per tool name, shown
        through `visible_text`: a server's name may hold terminal escapes)."""
        if name not in self._skipped_tools and len(self._skipped_tools) < 1000:
            self._skipped_tools.add(name)
            self.logger.warning(
                "%s: tool '%s' left out of the listing: its definition is invalid (%s)",
                self._describe(),
                visible_text(name),
                visible_text(detail),
            )

    def _message_handler(self, conn: _Connection) -> Callable[[Any], Awaitable[None]]:
        async def handler(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                self._tools_changed(conn)
            elif isinstance(message, Exception):
                self.logger.warning(
                    "%s: transport reported %s: %s", self._describe(), type(message).__name__, message
                )
            await anyio.lowlevel.checkpoint()

        return handler

    def _note_capabilities(self, conn: _Connection, sdk: Client) -> None:
        """Record whether the server announces tool-list changes, and how (see `_changes`)."""
        conn.list_changed = note_capabilities(sdk, conn.channel)

    async def _keep_listening(self, conn: _Connection, sdk: Client) -> None:
        await keep_listening(
            sdk,
            conn.channel,
            changed=lambda: self._tools_changed(conn),
            logger=self.logger,
            describe=self._describe,
        )
