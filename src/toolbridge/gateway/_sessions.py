"""Per-identity upstream sessions: one upstream connection per identity, bounded and idle-closed.

By default every identity's calls share one connection to an upstream (see docs/gateway.md). A
binding with `sessions: perIdentity` gives each identity a connection of its own (a stdio
process, an HTTP session), made on its first call from the binding's client document with the
same settings. So a handshake-era upstream that elicits or samples sees one identity per
connection, and its questions reach their person whenever that identity has one call in flight.

Bounds: at most `maxSessions` connections per binding (default 16); one idle (no call in flight)
for `sessionIdleMs` (default 300 000) is closed at the next call that finds it so, and when all
are taken the least recently used idle one is closed for a newcomer. When every connection is
busy, the call goes over the shared connection, where the one-call-in-flight rule still applies.
Listing, resources, prompts and log subscriptions stay on the shared connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from ..clients import CallRequestKind, ConnectionClient

__all__ = ["DEFAULT_IDLE_S", "DEFAULT_MAX_SESSIONS", "CapabilityClients", "IdentitySessions"]

log = logging.getLogger("toolbridge.gateway")

DEFAULT_MAX_SESSIONS = 16
"""Connections per binding with `sessions: perIdentity`, at most."""

DEFAULT_IDLE_S = 300.0
"""Seconds an identity's connection may stay idle before it is closed."""

_CLOSE_WAIT_S = 30.0


async def _close_quietly(client: ConnectionClient) -> None:
    """Close an upstream connection the gateway made for some callers, within `_CLOSE_WAIT_S`."""
    try:
        with anyio.move_on_after(_CLOSE_WAIT_S):
            await client.aclose()
    except Exception as exc:  # a connection that fails to close is gone anyway
        log.debug("an upstream connection did not close cleanly: %s", type(exc).__name__)


@dataclass
class _Session:
    client: ConnectionClient
    inflight: int = 0
    last: float = 0.0


@dataclass
class IdentitySessions:
    """The per-identity connections of one binding (see the module docstring).

    Args:
        make: builds a new, unconnected client of the binding's upstream.
        max_sessions: connections at most.
        idle_s: seconds of idleness after which a connection is closed.
    """

    make: Callable[[], Awaitable[ConnectionClient]]
    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_s: float = DEFAULT_IDLE_S
    opened: int = 0
    """Connections made so far (for tests and logs)."""
    _open: dict[str, _Session] = field(default_factory=dict)
    _closing: set[asyncio.Task[None]] = field(default_factory=set)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def acquire(self, identity: str) -> ConnectionClient | None:
        """`identity`'s connection (made if needed), or None: use the shared one."""
        session = self._open.get(identity)
        now = time.monotonic()
        if session is None:
            async with self._lock:  # one identity's first calls make one connection
                session = self._open.get(identity)
                if session is None:
                    self._close_idle(now)
                    if len(self._open) >= self.max_sessions and not self._evict():
                        return None
                    client = await self.make()
                    self.opened += 1
                    session = self._open[identity] = _Session(client)
        session.inflight += 1
        session.last = now
        return session.client

    def release(self, identity: str) -> None:
        session = self._open.get(identity)
        if session is not None:
            session.inflight -= 1
            session.last = time.monotonic()

    def _close_idle(self, now: float) -> None:
        for identity, session in list(self._open.items()):
            if session.inflight <= 0 and now - session.last >= self.idle_s:
                self._close(identity)

    def _evict(self) -> bool:
        idle = [(s.last, i) for i, s in self._open.items() if s.inflight <= 0]
        if not idle:
            return False
        self._close(min(idle)[1])
        return True

    def _close(self, identity: str) -> None:
        session = self._open.pop(identity)
        task = asyncio.get_running_loop().create_task(_close_quietly(session.client))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every connection (the gateway is closing)."""
        for identity in list(self._open):
            self._close(identity)
        with anyio.CancelScope(shield=True):
            for task in list(self._closing):
                await task


@dataclass
class CapabilityClients:
    """Connections to one 2026-07-28 upstream over HTTP, one per set of client capabilities.

    The SDK's 2026-07-28 client writes its own capabilities into every request's `_meta`, with
    no per-request override, so over the shared connection an upstream would see the gateway's
    capabilities (everything it relays) instead of the calling client's. A call whose client
    declared fewer goes over the connection that declares exactly those (sampling, elicitation,
    roots: at most 8 sets, each made on its first call; over HTTP in this era a connection is a
    pooled HTTP client, no process and no handshake), so the upstream checks the capabilities
    the caller really has, and answers -32021 itself when one is missing.

    Args:
        make: builds a new, unconnected client of the binding's upstream offering `kinds`.
    """

    make: Callable[[frozenset[CallRequestKind]], Awaitable[ConnectionClient]]
    opened: int = 0
    _open: dict[frozenset[CallRequestKind], ConnectionClient] = field(default_factory=dict)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def acquire(self, kinds: frozenset[CallRequestKind]) -> ConnectionClient:
        """The connection that declares exactly `kinds` (made on first use)."""
        client = self._open.get(kinds)
        if client is None:
            async with self._lock:
                client = self._open.get(kinds)
                if client is None:
                    client = self._open[kinds] = await self.make(kinds)
                    self.opened += 1
        return client

    async def aclose(self) -> None:
        """Close every connection (the gateway is closing)."""
        clients, self._open = list(self._open.values()), {}
        with anyio.CancelScope(shield=True):
            for client in clients:
                await _close_quietly(client)
