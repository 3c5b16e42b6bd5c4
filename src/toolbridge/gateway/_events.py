"""Change notifications, resource updates and log messages: from the upstreams to the clients.

`EventHub` is the gateway's one place for everything a client hears outside its own calls.

- **Sources of events.** The union's tool list changed (the gateway's watcher says so), an
  upstream said its resources or prompts changed, an upstream sent `notifications/resources/updated`
  or a log message (`notifications/message`). Upstream notifications are tapped from each upstream
  client's message handler (`tap`), rate-limited per upstream (`UPSTREAM_BURST` at once, then
  `UPSTREAM_PER_SECOND`; beyond that they are dropped and counted): a flooding upstream costs a
  counter, not memory, and never stalls the upstream's reader (the tap never waits on a client).
- **Handshake-era connections** (2025-11-25 and earlier, with a channel for server messages): each
  one seen gets a bounded outbox (`OUTBOX_SIZE`) drained by its own sender task; a send that does
  not finish within `SEND_TIMEOUT_S` is given up. A full outbox drops the new message and counts
  it (a warning says how many, at most once per `WARN_EVERY_S` per connection); at most
  `MAX_LINKS_PER_IDENTITY` connections of one identity are remembered (past that its own least
  recently active one hears no more), `MAX_LINKS` in all; "list changed"
  and "resource updated" are level triggers, so one pending copy is enough (no duplicates are
  queued). A slow client only loses its own messages: the others have their own outboxes.
- **2026-07-28 connections** hear through `subscriptions/listen` streams (the SDK's
  `ListenHandler` over an in-process bus): list changes, and the resource URIs the stream asked
  for that the identity may read. A stream whose client stops reading is ended by the SDK at
  `LISTEN_BUFFER` events (the client listens again; events carry no state worth replaying).
  At most `MAX_LISTEN_STREAMS` streams are open at once, and at most `MAX_LISTEN_PER_IDENTITY`
  of them for one identity (a further one is refused), so one client cannot take them all.
- **Resource subscriptions** are shared: the first holder of a URI (a handshake-era connection's
  `resources/subscribe`, or a listen stream) subscribes the upstream (`resources/subscribe` on a
  handshake-era upstream, a `subscriptions/listen` stream for the URI on a 2026-07-28 one), the
  last one to let go unsubscribes it. An update goes only to the holders of that URI on that
  upstream. One holder holds at most `MAX_SUBSCRIPTIONS` URIs, one identity at most
  `MAX_HELD_PER_IDENTITY` across all its connections and streams. Subscribing and unsubscribing
  an upstream is serialised per upstream, never across upstreams: a hung upstream delays only the
  subscriptions it serves (each exchange within `SUBSCRIBE_TIMEOUT_S`), and a listen request
  spends at most `LISTEN_HOLD_S` holding its URIs (those not held by then are not honored).
- **Log messages** go to handshake-era connections that asked with `logging/setLevel` (at or above
  their level; the upstreams are set to the most verbose level any connection asked for), to
  2026-07-28 calls in flight on that upstream whose request opted in (`_meta` log level), and
  only when the identity holds `logs:<prefix>` or `logs:*` for a binding of that upstream. The
  `logger` says which upstream: `NAME` or `NAME/LOGGER` (NAME: the binding's provider document).
  Text is cleaned (escapes, invisible characters) and bounded (`LOG_DATA_LIMIT`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import bounded
from ..sanitize import clean_text
from ._events_parts import LOG_DATA_LIMIT, Bucket, clean_data

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp import Client
    from mcp.server.session import ServerSession

    from ..clients import ConnectionClient
    from ._core import Identity, Source
    from ._upstream import CallContext, InFlight

__all__ = [
    "LEVELS",
    "LISTEN_BUFFER",
    "LISTEN_HOLD_S",
    "LOG_DATA_LIMIT",
    "MAX_HELD_PER_IDENTITY",
    "MAX_LINKS",
    "MAX_LINKS_PER_IDENTITY",
    "MAX_LISTEN_PER_IDENTITY",
    "MAX_SUBSCRIPTIONS",
    "OUTBOX_SIZE",
    "SEND_TIMEOUT_S",
    "SUBSCRIBE_TIMEOUT_S",
    "UPSTREAM_BURST",
    "UPSTREAM_PER_SECOND",
    "EventHub",
]

log = logging.getLogger("toolbridge.gateway")

LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
OUTBOX_SIZE = 256
"""Messages waiting for one handshake-era connection; more are dropped (counted)."""
SEND_TIMEOUT_S = 2.0
"""The longest one message may take to leave for a client."""
MAX_LINKS = 1024
"""Handshake-era connections remembered (the least recently active is forgotten first)."""
MAX_LINKS_PER_IDENTITY = 256
"""Handshake-era connections of one identity remembered: past that, its own least recently
active one is forgotten (not another identity's)."""
MAX_SUBSCRIPTIONS = 256
"""Resource URIs one connection (or one listen stream) may hold."""
MAX_URI_CHARS = 4096
LISTEN_BUFFER = 256
"""Events waiting on one listen stream before the SDK ends it."""
MAX_LISTEN_STREAMS = 1024
MAX_LISTEN_PER_IDENTITY = 64
"""Listen streams one identity may have open at once."""
MAX_HELD_PER_IDENTITY = 1024
"""Resource subscriptions one identity may hold, over all its connections and listen streams."""
SUBSCRIBE_TIMEOUT_S = 10.0
"""The longest one upstream `resources/subscribe` (or unsubscribe, or listen opening) may take."""
LISTEN_HOLD_S = 15.0
"""The longest a listen request spends subscribing its URIs before it is answered."""
UPSTREAM_BURST = 200
UPSTREAM_PER_SECOND = 100.0
WARN_EVERY_S = 10.0
CALL_LOG_PENDING = 64
"""Log messages waiting to reach one 2026-07-28 call; more are dropped (counted)."""

_TIMEOUT_S = 30.0
_Item = tuple[Any, ...]


@dataclass
class _Link:
    """One handshake-era client connection and its outbox."""

    key: int
    session: ServerSession
    identity: Identity
    send: MemoryObjectSendStream[_Item]
    recv: MemoryObjectReceiveStream[_Item]
    level: types.LoggingLevel | None = None
    pending: set[_Item] = field(default_factory=set)
    dropped: int = 0
    warned_at: float = -1e9
    scope: anyio.CancelScope | None = None


@dataclass
class _Upstream:
    client: ConnectionClient
    sources: list[Source] = field(default_factory=list)
    connections: int = 0
    """Connections made to it so far (a new one after the first: the upstream restarted)."""
    bucket: Bucket = field(default_factory=lambda: Bucket(UPSTREAM_BURST, UPSTREAM_PER_SECOND))


SendUpstream = Callable[["ConnectionClient", str, bool], Awaitable[None]]
"""`(upstream client, uri, subscribe)`: (un)subscribe the upstream to a resource."""


def _offers_logging(sdk: Client) -> bool:
    """Whether the upstream behind `sdk` offers `logging` (its `logging/setLevel`)."""
    server = sdk.server_capabilities
    return server is not None and server.logging is not None


class EventHub:
    """Delivers events to clients (see the module docstring)."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.listen_handler = ListenHandler(
            self.bus, max_subscriptions=MAX_LISTEN_STREAMS, max_buffered_events=LISTEN_BUFFER
        )
        self._links: OrderedDict[int, _Link] = OrderedDict()
        self._upstreams: dict[int, _Upstream] = {}
        self._tg: TaskGroup | None = None
        # (id(upstream client), uri) -> holders; holder -> its (client id, uri) keys
        self._held: dict[tuple[int, str], set[object]] = {}
        self._holdings: dict[object, set[tuple[int, str]]] = {}
        self._owners: dict[object, str] = {}
        """holder -> the identity it belongs to (for `MAX_HELD_PER_IDENTITY`)."""
        self._held_by: dict[str, int] = {}
        """identity name -> subscriptions its holders hold."""
        self._locks: dict[int, anyio.Lock] = {}
        """id(upstream client) -> the lock serialising its (un)subscriptions."""
        self._listening: dict[str, int] = {}
        """identity name -> its open listen streams."""
        self._upstream_level: types.LoggingLevel | None = None
        self._listens: dict[tuple[int, str], anyio.CancelScope] = {}
        self.routers: dict[int, InFlight] = {}
        """id(upstream client) -> its `InFlight` (the gateway's calls in flight on it)."""
        self.dropped = 0
        """Messages dropped for slow clients, in total."""
        self.candidates: Callable[[Identity, str], list[Source]] = lambda identity, uri: []
        """The sources that may serve `uri` to `identity`, best first (set by the passthrough)."""

    # ------------------------------------------------------------------------------ lifetime

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Deliver while the block runs (serve_stdio / serve_http hold it)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                self.listen_handler.close()
                tg.cancel_scope.cancel()

    # ------------------------------------------------------------------------------ upstreams

    def tap(self, client: Any, source: Source) -> None:
        """Hear `client`'s notifications (before its first connection); `source` binds it."""
        entry = self._upstreams.get(id(client))
        if entry is not None:
            entry.sources.append(source)
            return
        entry = self._upstreams[id(client)] = _Upstream(client, [source])
        original = client._message_handler

        def make(conn: Any) -> Callable[[Any], Awaitable[None]]:
            inner = original(conn)
            entry.connections += 1
            if entry.connections > 1 and self._tg is not None:  # a restarted upstream
                self._tg.start_soon(self._renew, entry)

            async def handler(message: Any) -> None:
                try:
                    await self.from_upstream(client, message)
                except Exception as exc:  # the tap must never break the upstream's reader
                    log.debug("an upstream notification was not delivered: %s", type(exc).__name__)
                await inner(message)

            return handler

        client._message_handler = make

    async def from_upstream(self, client: ConnectionClient, message: object) -> None:
        """One notification of an upstream: rate-limited, then delivered without waiting."""
        kind: _Item
        if isinstance(message, types.LoggingMessageNotification):
            p = message.params
            kind = ("log", p.level, p.logger, p.data)
        elif isinstance(message, types.ResourceUpdatedNotification):
            kind = ("updated", str(message.params.uri))
        elif isinstance(message, types.ResourceListChangedNotification):
            kind = ("resources",)
        elif isinstance(message, types.PromptListChangedNotification):
            kind = ("prompts",)
        else:
            return
        entry = self._upstreams.get(id(client))
        if entry is None or (kind[0] != "log" and not any(s.resources for s in entry.sources)):
            return
        if not entry.bucket.take():
            self._warn_flood(entry)
            return
        if kind[0] == "log":
            self._deliver_log(entry, kind)
        elif kind[0] == "updated":
            await self._deliver_updated(entry, str(kind[-1]))
        elif kind[0] == "resources":
            await self.changed("resources")
        else:
            await self.changed("prompts")

    @staticmethod
    def _warn_flood(entry: _Upstream) -> None:
        now = time.monotonic()
        if now - entry.bucket.warned_at >= WARN_EVERY_S:
            entry.bucket.warned_at = now
            name = entry.sources[0].name if entry.sources else "?"
            log.warning(
                "upstream %s sends notifications faster than %d a second; %d dropped so far",
                name,
                int(UPSTREAM_PER_SECOND),
                entry.bucket.dropped,
            )

    # ------------------------------------------------------------------------------ connections

    def seen(self, session: ServerSession, identity: Identity) -> None:
        """A request arrived on `session`: remember a handshake-era connection that has a channel."""
        conn = session._connection  # the SDK's per-connection state: the key of its link
        if self._tg is None:
            return
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28: events ride subscriptions/listen streams
        if not conn.has_standalone_channel:
            return
        key = id(conn)
        link = self._links.get(key)
        if link is not None:
            self._links.move_to_end(key)
            return
        send, recv = anyio.create_memory_object_stream[_Item](OUTBOX_SIZE)
        link = _Link(key, session, identity, send, recv)
        self._links[key] = link
        self._tg.start_soon(self._pump, link)
        try:
            conn.exit_stack.push_async_callback(self._forget, key)
        except Exception:  # no exit stack: forgotten when sending fails or by age
            log.debug("connection without an exit stack")
        mine = [k for k, other in self._links.items() if other.identity.name == identity.name]
        if len(mine) > MAX_LINKS_PER_IDENTITY:  # its own least recently active one goes
            self._drop_link(mine[0])
            self._tg.start_soon(self._forget, mine[0])
        while len(self._links) > MAX_LINKS:  # the least recently active one is forgotten
            oldest = next(iter(self._links))
            self._drop_link(oldest)
            self._tg.start_soon(self._forget, oldest)

    def link_of(self, session: ServerSession) -> _Link | None:
        return self._links.get(id(session._connection))

    def _drop_link(self, key: int) -> _Link | None:
        link = self._links.pop(key, None)
        if link is not None:
            if link.scope is not None:
                link.scope.cancel()
            link.send.close()
        return link

    async def _forget(self, key: int) -> None:
        """The connection `key` is gone: stop its sender, let go of its subscriptions."""
        self._drop_link(key)
        with anyio.CancelScope(shield=True), anyio.move_on_after(2 * _TIMEOUT_S):
            await self.release(key)
            await self._apply_level()

    def _queue(self, link: _Link, item: _Item) -> None:
        trigger = item[0] != "log"
        if trigger and item in link.pending:
            return  # a level trigger already waiting: one is enough
        try:
            link.send.send_nowait(item)
        except anyio.WouldBlock:
            self._count_drop(link, 1)
            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        if trigger:
            link.pending.add(item)

    def _count_drop(self, link: _Link, n: int) -> None:
        link.dropped += n
        self.dropped += n
        now = time.monotonic()
        if now - link.warned_at >= WARN_EVERY_S:
            link.warned_at = now
            log.warning(
                "client %s is not reading fast enough: %d notification(s) dropped so far",
                bounded(link.identity.name, 100),
                link.dropped,
            )

    async def _pump(self, link: _Link) -> None:
        try:
            await self._drain(link)
        except Exception as exc:  # never takes the gateway down: this connection hears no more
            log.warning("notifications to client %s stopped: %s", bounded(link.identity.name, 100), exc)
            self._drop_link(link.key)
            if self._tg is not None:
                self._tg.start_soon(self._forget, link.key)

    async def _drain(self, link: _Link) -> None:
        with anyio.CancelScope() as scope:
            link.scope = scope
            async with link.recv:
                async for item in link.recv:
                    if item[0] != "log":
                        link.pending.discard(item)
                    try:
                        with anyio.fail_after(SEND_TIMEOUT_S):
                            await self._send(link.session, item)
                    except TimeoutError:
                        self._count_drop(link, 1)
                    except Exception as exc:  # the connection is gone (or the message cannot be sent)
                        log.debug("a client connection went away: %s", type(exc).__name__)
                        self._drop_link(link.key)
                        if self._tg is not None:
                            self._tg.start_soon(self._forget, link.key)
                        return

    @staticmethod
    async def _send(session: ServerSession, item: _Item) -> None:
        what = item[0]
        if what == "tools":
            await session.send_notification(types.ToolListChangedNotification())
        elif what == "resources":
            await session.send_notification(types.ResourceListChangedNotification())
        elif what == "prompts":
            await session.send_notification(types.PromptListChangedNotification())
        elif what == "updated":
            await session.send_notification(
                types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=item[1]))
            )
        else:
            _, level, logger, data = item
            await session.send_notification(
                types.LoggingMessageNotification(
                    params=types.LoggingMessageNotificationParams(level=level, logger=logger, data=data)
                )
            )

    # ------------------------------------------------------------------------------ events

    async def changed(self, what: str) -> None:
        """The union's `tools`, `resources` or `prompts` changed: tell every client."""
        for link in list(self._links.values()):
            self._queue(link, (what,))
        event: ServerEvent
        if what == "tools":
            event = ToolsListChanged()
        elif what == "resources":
            event = ResourcesListChanged()
        else:
            event = PromptsListChanged()
        await self.bus.publish(event)

    async def _deliver_updated(self, entry: _Upstream, uri: str) -> None:
        holders = self._held.get((id(entry.client), uri))
        if not holders:
            return  # nobody subscribed to it through the gateway
        listening = False
        for holder in holders:
            if isinstance(holder, int):
                link = self._links.get(holder)
                if link is not None:
                    self._queue(link, ("updated", uri))
            else:
                listening = True
        if listening:
            await self.bus.publish(ResourceUpdated(uri=uri))

    def _deliver_log(self, entry: _Upstream, item: _Item) -> None:
        _, level, logger, data = item
        if level not in LEVELS:
            return
        self._deliver_log_to_calls(entry, item)
        rank = LEVELS.index(level)
        prepared: _Item | None = None
        for link in list(self._links.values()):
            if link.level is None or rank < LEVELS.index(link.level):
                continue
            source = next((s for s in entry.sources if _may(link.identity, "logs", s)), None)
            if source is None:
                continue
            if prepared is None:
                name = clean_text(source.name)
                if isinstance(logger, str) and logger:
                    name = f"{name}/{bounded(clean_text(logger), 100)}"
                prepared = ("log", level, name, clean_data(data))
            self._queue(link, prepared)

    def _deliver_log_to_calls(self, entry: _Upstream, item: _Item) -> None:
        """A log message reaches the call in flight on that upstream, related to its request, only
        when it is the one call in flight there (otherwise nothing tells whose message it is, and
        it must not reach another identity), at most `CALL_LOG_PENDING` waiting per call: in the
        2026-07-28 era when its request opted in (`io.modelcontextprotocol/logLevel` in `_meta`;
        the SDK filters by it); in the handshake era when its connection did not ask for logs with
        `logging/setLevel` (one that did hears them through that, below, at its level), as a
        server speaking to that client directly would send them."""
        inflight = self.routers.get(id(entry.client))
        if inflight is None or self._tg is None:
            return
        call = inflight.sole()
        if call is None:
            return
        _, level, logger, data = item
        session = call.session
        if session is None:
            return
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            link = self.link_of(session)
            if link is not None and link.level is not None:
                return  # it asked with logging/setLevel: it hears them through that, at its level
        elif level not in getattr(session, "_allowed_log_levels", ()):
            return  # this request did not opt in at that level
        source = next((s for s in entry.sources if _may(call.identity, "logs", s)), None)
        if source is None:
            return
        if call.pending_logs >= CALL_LOG_PENDING:
            self.dropped += 1
            return
        name = clean_text(source.name)
        if isinstance(logger, str) and logger:
            name = f"{name}/{bounded(clean_text(logger), 100)}"
        call.log_started()
        self._tg.start_soon(self._send_call_log, call, level, name, clean_data(data))

    @staticmethod
    async def _send_call_log(call: CallContext, level: types.LoggingLevel, logger: str, data: object) -> None:
        try:
            with anyio.fail_after(SEND_TIMEOUT_S), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                assert call.session is not None
                await call.session.send_log_message(level, data, logger, related_request_id=call.request_id)
        except Exception as exc:  # the call ended, or the client is slow: this one is dropped
            log.debug("a log message did not reach a call: %s", type(exc).__name__)
        finally:
            call.log_ended()

    # ------------------------------------------------------------------------------ logging level

    async def set_level(self, session: ServerSession, level: types.LoggingLevel) -> None:
        """A handshake-era connection asked for log messages at `level` and above."""
        link = self.link_of(session)
        if link is not None:
            link.level = level
        await self._apply_level()

    async def _apply_level(self) -> None:
        """Set every upstream offering logging to the most verbose level a connection asked for."""
        levels = [LEVELS.index(link.level) for link in self._links.values() if link.level in LEVELS]
        wanted = LEVELS[min(levels)] if levels else None
        if wanted is None or wanted == self._upstream_level:
            return
        self._upstream_level = wanted
        from ._passthrough import sdk_client

        for entry in self._upstreams.values():
            if not any(s.resources for s in entry.sources):
                continue
            try:
                with anyio.fail_after(_TIMEOUT_S):
                    sdk = await sdk_client(entry.client)
                    if _offers_logging(sdk):
                        with warnings.catch_warnings():  # deprecated in 2026-07-28, the handshake era's
                            warnings.simplefilter("ignore", MCPDeprecationWarning)
                            await sdk.set_logging_level(wanted)
            except Exception as exc:
                log.info("logging/setLevel upstream failed: %s", type(exc).__name__)

    # ------------------------------------------------------------------------------ subscriptions

    def _lock_of(self, client_id: int) -> anyio.Lock:
        lock = self._locks.get(client_id)
        if lock is None:
            lock = self._locks[client_id] = anyio.Lock()
        return lock

    def _take(self, holder: object, key: tuple[int, str]) -> None:
        self._holdings.setdefault(holder, set()).add(key)
        owner = self._owners.get(holder)
        if owner is not None:
            self._held_by[owner] = self._held_by.get(owner, 0) + 1

    def _drop(self, holder: object, key: tuple[int, str]) -> None:
        mine = self._holdings.get(holder)
        if mine is None or key not in mine:
            return
        mine.discard(key)
        owner = self._owners.get(holder)
        if owner is not None:
            left = self._held_by.get(owner, 1) - 1
            if left > 0:
                self._held_by[owner] = left
            else:
                self._held_by.pop(owner, None)
        if not mine:
            del self._holdings[holder]

    def held_by(self, owner: str) -> int:
        """The resource subscriptions the holders of identity `owner` hold."""
        return self._held_by.get(owner, 0)

    async def hold(
        self,
        holder: object,
        uri: str,
        candidates: Sequence[Source],
        upstream: SendUpstream | None = None,
        *,
        owner: str | None = None,
    ) -> bool:
        """`holder` (of identity `owner`) subscribes to `uri` on the first of `candidates` that takes it.

        The upstream is subscribed only when `holder` is its first holder of `uri`, within
        `SUBSCRIBE_TIMEOUT_S`, under that upstream's lock only.
        Returns False when no candidate took it, or `holder` (or its identity) holds too many.
        """
        if owner is not None:
            self._owners.setdefault(holder, owner)
        owner = self._owners.get(holder)
        try:
            for source in candidates:
                client = source.client
                if client is None:  # not an MCP upstream: nothing to subscribe to
                    continue
                key = (id(client), uri)
                async with self._lock_of(key[0]):
                    mine = self._holdings.get(holder, set())
                    if key in mine:
                        return True
                    if self.limit_reached(holder, owner, uri) is not None:
                        return False
                    holders = self._held.get(key)
                    if holders is None:  # (an empty set: let go, not yet unsubscribed: reused)
                        try:
                            with anyio.fail_after(SUBSCRIBE_TIMEOUT_S):
                                await (upstream or self.upstream_subscription)(client, uri, True)
                        except LookupError:
                            continue  # this upstream has no subscriptions
                        except Exception as exc:
                            log.info("resources/subscribe on %s failed: %s", source.name, type(exc).__name__)
                            continue
                        holders = self._held[key] = set()
                    holders.add(holder)
                    self._take(holder, key)
                    return True
            return False
        finally:
            if holder not in self._holdings:
                self._owners.pop(holder, None)

    def limit_reached(self, holder: object, owner: str | None, uri: str) -> str | None:
        """Why `hold` would refuse `uri` for `holder` whatever the upstreams say, or None."""
        if len(uri) > MAX_URI_CHARS:
            return f"a resource URI is at most {MAX_URI_CHARS} characters"
        if len(self._holdings.get(holder, ())) >= MAX_SUBSCRIPTIONS:
            return f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per connection"
        if owner is not None and self._held_by.get(owner, 0) >= MAX_HELD_PER_IDENTITY:
            return f"at most {MAX_HELD_PER_IDENTITY} resource subscriptions per client"
        return None

    async def let_go(self, holder: object, uri: str | None, upstream: SendUpstream | None = None) -> bool:
        """`holder` lets go of `uri` (None: of everything); the last holder unsubscribes the upstream.

        The bookkeeping is done at once; the upstream exchanges follow, each within
        `SUBSCRIBE_TIMEOUT_S` under its upstream's lock (a URI held again meanwhile stays).
        """
        send = upstream or self.upstream_subscription
        keys = [k for k in self._holdings.get(holder, ()) if uri is None or k[1] == uri]
        for key in keys:
            self._drop(holder, key)
            holders = self._held.get(key)
            if holders is not None:
                holders.discard(holder)
        if holder not in self._holdings:
            self._owners.pop(holder, None)
        for key in keys:
            if key not in self._held or self._held[key]:
                continue  # held by others (or already unsubscribed)
            async with self._lock_of(key[0]):
                if self._held.get(key) != set():
                    continue  # held again meanwhile, or unsubscribed by another
                del self._held[key]
                entry = self._upstreams.get(key[0])
                if entry is None:
                    continue
                try:
                    with anyio.fail_after(SUBSCRIBE_TIMEOUT_S):
                        await send(entry.client, key[1], False)
                except Exception as exc:
                    log.info("resources/unsubscribe upstream failed: %s", type(exc).__name__)
        return bool(keys)

    @contextmanager
    def listen_slot(self, identity: Identity) -> Iterator[None]:
        """One listen stream of `identity` while the block runs.

        Raises:
            LookupError: the identity has `MAX_LISTEN_PER_IDENTITY` streams open already.
        """
        name = identity.name
        if self._listening.get(name, 0) >= MAX_LISTEN_PER_IDENTITY:
            raise LookupError(f"at most {MAX_LISTEN_PER_IDENTITY} listen streams per client")
        self._listening[name] = self._listening.get(name, 0) + 1
        try:
            yield
        finally:
            left = self._listening.get(name, 1) - 1
            if left > 0:
                self._listening[name] = left
            else:
                self._listening.pop(name, None)

    async def release(self, holder: object) -> None:
        await self.let_go(holder, None)

    async def _renew(self, entry: _Upstream) -> None:
        """The upstream restarted (a new connection): subscribe it again to what is held, and set
        its logging level again."""
        await anyio.lowlevel.checkpoint()  # let the connection that made the handler get on its way
        keys = [key for key in self._held if key[0] == id(entry.client)]
        for key in keys:
            self._listens.pop(key, anyio.CancelScope()).cancel()  # a stream of the old connection
            try:
                await self.upstream_subscription(entry.client, key[1], True)
            except Exception as exc:  # the holders hear nothing until they subscribe again
                log.info("a subscription could not be renewed upstream: %s", type(exc).__name__)
        if keys:
            log.info("renewed %d resource subscription(s) of a restarted upstream", len(keys))
        level = self._upstream_level
        if level is not None and any(s.resources for s in entry.sources):
            from ._passthrough import sdk_client

            try:  # the log level the connections asked for, too
                with anyio.fail_after(_TIMEOUT_S):
                    sdk = await sdk_client(entry.client)
                    if _offers_logging(sdk):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", MCPDeprecationWarning)
                            await sdk.set_logging_level(level)
            except Exception as exc:
                log.info("the logging level could not be renewed upstream: %s", type(exc).__name__)

    async def upstream_subscription(self, client: ConnectionClient, uri: str, subscribe: bool) -> None:
        """The default `SendUpstream`: (un)subscribe `client`'s upstream to `uri`.

        A handshake-era upstream gets `resources/subscribe` / `unsubscribe`; a 2026-07-28 one a
        `subscriptions/listen` stream for the URI, held by a task of the hub until let go (its
        events reach the tap like any notification).

        Raises:
            LookupError: the upstream does not offer resource subscriptions.
        """
        from ._passthrough import sdk_client

        key = (id(client), uri)
        if not subscribe and key in self._listens:
            self._listens.pop(key).cancel()
            return
        with anyio.fail_after(_TIMEOUT_S):
            sdk = await sdk_client(client)
            server = sdk.server_capabilities
            caps = server.resources if server is not None else None
            if caps is None or not caps.subscribe:
                raise LookupError("no resource subscriptions")
            if sdk.protocol_version in MODERN_PROTOCOL_VERSIONS:
                if subscribe:
                    await self._listen_upstream(sdk, key)
                return
            with warnings.catch_warnings():  # removed in 2026-07-28: handshake-era upstreams only
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                if subscribe:
                    await sdk.subscribe_resource(uri)
                else:
                    await sdk.unsubscribe_resource(uri)

    async def _listen_upstream(self, sdk: Client, key: tuple[int, str]) -> None:
        """Open a listen stream for one URI on a 2026-07-28 upstream, held until cancelled."""
        if self._tg is None:
            raise LookupError("the gateway is not serving")
        scope = anyio.CancelScope()
        opened = anyio.Event()
        failure: list[BaseException] = []

        async def hold_stream() -> None:
            with scope:
                try:
                    async with sdk.listen(resource_subscriptions=[key[1]]) as stream:
                        opened.set()
                        async for _event in stream:
                            pass  # each event also reaches the tap, which delivers it
                except Exception as exc:  # refused, or the upstream went away
                    failure.append(exc)
                    log.info("an upstream listen stream ended: %s", type(exc).__name__)
                finally:
                    opened.set()
                    if self._listens.get(key) is scope:
                        del self._listens[key]

        self._listens[key] = scope
        self._tg.start_soon(hold_stream)
        try:
            await opened.wait()
        except BaseException:  # timed out or cancelled while opening: nothing is held
            scope.cancel()
            raise
        if failure and not scope.cancel_called:
            raise failure[0]


def _may(identity: Identity, what: str, source: Source) -> bool:
    missing = identity.runtime.permissions.missing
    return not missing([f"{what}:{source.binding.prefix}"]) or not missing([f"{what}:*"])
