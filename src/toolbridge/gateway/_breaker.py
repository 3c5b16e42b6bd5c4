"""Bulkheads between upstreams: each one listed within its own deadline, served from its last good
listing while it is slow or down, and a breaker that stops calling one that keeps failing.

`Watched` wraps every MCP upstream's provider (pinned or not) for the gateway's catalog:

- `generation` is the provider's plus `bumps` (a renewed lock, a listing that changed or
  recovered): the catalog lists a provider again only when it changed.
- `list_tools()` lists within `list_timeout_s` (`start_timeout_s` until it listed once: that
  includes starting the upstream and its handshake). When that fails or times out, or while
  the breaker is open, it returns the **last good listing** and the upstream is `stale` (its
  tools are marked `toolbridge/stale` in `tools/list`); an upstream never listed has no tools
  to serve until it lists (withheld).
- `call_tool()` counts the upstream's transport failures (no answer, a broken connection, a
  protocol violation) for the breaker; an answer of any kind (a result, a tool error, a
  JSON-RPC error) counts as success. A call the caller cancelled counts as neither.

`Breaker`: after `failures` consecutive failures (listings or calls) it opens; while open, calls
to that upstream are refused at once (`UPSTREAM_UNAVAILABLE`, see `_server`) and listings serve
the last good one; after `cooldown_s` one listing or call goes through (half-open): success
closes it, failure opens it for another cool-down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio

from ..errors import McpError, ProtocolError, SessionInvalidError, TransportError, bounded
from ..tools import ToolProvider, ToolResult, ToolSpec, provider_generation

if TYPE_CHECKING:
    from ._upstream import CallContext

__all__ = ["UNAVAILABLE", "Breaker", "Watched", "why_failed"]

log = logging.getLogger("toolbridge.gateway")

UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
"""The code of a call refused because its upstream's breaker is open."""

_FAILURES = (TransportError, ProtocolError, SessionInvalidError, TimeoutError, OSError)
"""What an upstream did wrong (as opposed to an answer, or the caller giving up)."""


@dataclass
class Breaker:
    """One upstream's circuit breaker (see the module docstring).

    Attributes:
        failures: consecutive failures that open it.
        cooldown_s: how long it stays open before one probe.
    """

    failures: int = 3
    cooldown_s: float = 30.0
    count: int = 0
    """Consecutive failures so far."""
    opened_at: float | None = None
    """When it opened (or its last probe was let through); None while closed."""
    opened: int = 0
    """How many times it opened (for tests and logs)."""

    @property
    def state(self) -> str:
        """`closed`, `open`, or `half-open` (open, but the next request is a probe)."""
        if self.opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self.opened_at >= self.cooldown_s else "open"

    def allow(self) -> bool:
        """Whether a request may go to the upstream now: closed, or the one probe of a cool-down."""
        if self.opened_at is None:
            return True
        now = time.monotonic()
        if now - self.opened_at < self.cooldown_s:
            return False
        self.opened_at = now  # one probe per cool-down; its outcome closes or keeps it open
        return True

    def success(self) -> None:
        self.count = 0
        self.opened_at = None

    def failure(self) -> bool:
        """Count one failure; True when this opened the breaker."""
        self.count += 1
        if self.count < self.failures:
            return False
        was_closed = self.opened_at is None
        self.opened_at = time.monotonic()
        if was_closed:
            self.opened += 1
        return was_closed


@runtime_checkable
class _TakesContext(Protocol):
    """A provider whose `call_tool` takes the gateway's `CallContext` (`accepts_context`)."""

    @property
    def accepts_context(self) -> bool: ...

    async def call_tool(
        self, name: str, args: Mapping[str, object], context: CallContext | None = None
    ) -> ToolResult: ...


@dataclass
class Watched:
    """An upstream's provider as the gateway's catalog sees it (see the module docstring)."""

    inner: ToolProvider
    name: str
    list_timeout_s: float = 10.0
    start_timeout_s: float = 30.0
    """The deadline of its first listing (the upstream's start-up and handshake included)."""
    breaker: Breaker = field(default_factory=Breaker)
    bumps: int = 0
    stale: bool = False
    """Its last listing failed (or was not tried: breaker open): its last good one is served."""
    good: list[ToolSpec] | None = field(default=None, repr=False)
    """Its last good listing (None: never listed)."""
    _takes_context: _TakesContext | None = field(init=False, default=None, repr=False)
    """`inner`, when its `call_tool` takes the gateway's `CallContext` (else None)."""

    def __post_init__(self) -> None:
        inner = self.inner
        if isinstance(inner, _TakesContext) and inner.accepts_context is True:
            self._takes_context = inner

    @property
    def generation(self) -> int:
        return provider_generation(self.inner) + self.bumps

    @property
    def deadline_s(self) -> float:
        """How long its next listing may take: the start-up deadline until it listed once."""
        return (
            self.list_timeout_s if self.good is not None else max(self.start_timeout_s, self.list_timeout_s)
        )

    async def list_tools(self) -> list[ToolSpec]:
        """The upstream's tools within the deadline, else its last good listing (see the module)."""
        if not self.breaker.allow():
            return self._last_good()
        try:
            with anyio.fail_after(self.deadline_s):
                specs = list(await self.inner.list_tools())
        except Exception as exc:  # slow, down, or answering junk: the others are served meanwhile
            self.failed(f"its tools could not be listed ({why_failed(exc)})", listing=True)
            return self._last_good()
        self.breaker.success()
        self.good, self.stale = specs, False
        return specs

    def _last_good(self) -> list[ToolSpec]:
        self.stale = True
        return list(self.good or ())

    def failed(self, what: str, *, listing: bool = False) -> None:
        """Count one failure of the upstream for its breaker (logged when it opens); a failed
        listing makes it stale (its last good listing is served until one succeeds)."""
        if listing:
            self.stale = True
        if self.breaker.failure():
            log.warning(
                "%s: upstream %s: %s %d times in a row; calls fail fast for %gs (breaker open)",
                UNAVAILABLE,
                self.name,
                what,
                self.breaker.count,
                self.breaker.cooldown_s,
            )

    def recovered(self) -> None:
        """The upstream answered a listing again: close the breaker; a stale listing is renewed."""
        self.breaker.success()
        if self.stale:
            self.bumps += 1  # the catalog lists it again, and the stale mark goes

    accepts_context = True
    """`call_tool` passes the gateway's `CallContext` on (to a provider that takes one)."""

    async def call_tool(
        self, name: str, args: Mapping[str, object], context: CallContext | None = None
    ) -> ToolResult:
        try:
            if context is not None and self._takes_context is not None:
                result = await self._takes_context.call_tool(name, args, context=context)
            else:
                result = await self.inner.call_tool(name, args)
        except _FAILURES as exc:
            self.failed(f"a call failed ({why_failed(exc)})")
            raise
        except McpError:  # a JSON-RPC error: the upstream answered
            self.breaker.success()
            raise
        self.breaker.success()
        return result


def why_failed(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError) and not str(exc):
        return "no answer in time"
    return bounded(f"{type(exc).__name__}: {exc}", 200)
