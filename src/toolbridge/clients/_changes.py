"""How long a client may trust its cached tool list, and the change stream that lets it trust it.

The rule
--------
A client caches the server's tool list. Whether it may answer `list_tools()` from that cache
depends on whether a **live change channel** exists, a way for the server to say "my tools
changed" that the client is known to be receiving:

- **2026-07-28 connections** whose server advertises `tools.listChanged`: the channel is a
  `subscriptions/listen` stream the client opens. It is live from the server's acknowledgment
  until the stream ends. A dead stream (the server restarted, the stream broke) drops the cache,
  increments `generation`, and is reopened with backoff (`LISTEN_RETRY_FIRST` doubling up to
  `LISTEN_RETRY_MAX`, at most `LISTEN_RETRY_ATTEMPTS` tries in a row; a stream that dies within
  `LISTEN_STABLE_AFTER` seconds of opening counts as a failed try). Until it is back, the list is
  not cached at all: every `list_tools()` asks the server. When it is back, the cache is dropped and
  `generation` incremented once more (changes made while it was down were not announced). After the
  last try the connection is treated as having no channel (the TTL below).
- **2025-11-25 connections** whose server advertises `tools.listChanged`: the connection itself is
  the channel (`notifications/tools/list_changed` arrives on it): live while it is alive. Over HTTP
  the notifications need the server's GET stream, so the channel is live only once the server
  accepted that stream.
- **Otherwise** (no `tools.listChanged`, or a stream that could not be kept): there is no channel,
  and a cached list expires `tools_ttl` seconds after it was fetched (`DEFAULT_TOOLS_TTL`; `0`
  disables the cache; `None` keeps it until the connection is renewed, the old behaviour). Expiry
  increments `generation`, and so does a fetched listing that differs from the last one given
  (however it was refreshed), so consumers that re-list on a generation change (the agent) follow
  the same rule.

A cache entry is trusted without expiry only if it was fetched while the channel was live and the
channel has stayed live since (`ChangeChannel.epoch` counts the live periods).
`list_tools(refresh=True)` always asks the server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import ProtocolError

__all__ = [
    "DEFAULT_TOOLS_TTL",
    "LISTEN_ACK_TIMEOUT",
    "LISTEN_RETRY_ATTEMPTS",
    "LISTEN_RETRY_FIRST",
    "LISTEN_RETRY_MAX",
    "LISTEN_STABLE_AFTER",
    "TOOLS_LIST_PAGE_CAP",
    "CachedTools",
    "ChangeChannel",
    "cache_trusted",
    "fetch_all_tools",
    "keep_listening",
    "note_capabilities",
]

DEFAULT_TOOLS_TTL = 30.0
"""Seconds a cached tool list is trusted when the server has no live change channel."""

TOOLS_LIST_PAGE_CAP = 100
"""At most this many `tools/list` pages are followed; a longer walk is a `ProtocolError`."""

LISTEN_ACK_TIMEOUT = 10.0
"""Seconds allowed for the server to acknowledge a `subscriptions/listen` stream."""

LISTEN_RETRY_FIRST = 0.5
"""Seconds before the first attempt to reopen a dead change stream (doubled at each failure)."""

LISTEN_RETRY_MAX = 30.0
"""The longest wait between two attempts to reopen a change stream."""

LISTEN_RETRY_ATTEMPTS = 8
"""Attempts in a row to reopen a change stream before the connection falls back to the TTL."""

LISTEN_STABLE_AFTER = 10.0
"""Seconds a reopened stream must stay live before its backoff starts over; a stream that keeps
dying sooner (a flapping server) counts as failing, so reopening it stays bounded."""

# JSON-RPC codes with which the SDK reports a stream that broke (rather than a server's refusal).
_BROKEN_CODES = frozenset({types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT})


@dataclass
class ChangeChannel:
    """The state of one connection's change channel (see the module docstring).

    Attributes:
        wanted: the connection relies on a `subscriptions/listen` stream.
        live: the channel is live now.
        epoch: grows by one each time the channel becomes live.
        gave_up: a wanted stream could not be kept; the TTL rule applies.
        known: set once the first outcome is known (acknowledged, refused, failed, or not wanted).
    """

    wanted: bool = False
    live: bool = False
    epoch: int = 0
    gave_up: bool = False
    known: anyio.Event = field(default_factory=anyio.Event)

    def relies_on_stream(self) -> bool:
        """A wanted stream that is not live now and not given up: nothing may be cached."""
        return self.wanted and not self.live and not self.gave_up


@dataclass
class CachedTools:
    """One cached listing: the tools, the connection and channel epoch it was fetched on, and when."""

    tools: list[types.Tool]
    conn: object
    epoch: int | None  # the channel's epoch if it was live when the listing started, else None
    at: float


def cache_trusted(
    cache: CachedTools, live_epoch: int | None, channel: ChangeChannel, ttl: float | None
) -> bool:
    """Whether a cached listing may still be served.

    Args:
        cache: the listing.
        live_epoch: the epoch of the connection's change channel if it is live now, else None.
        channel: the connection's change channel.
        ttl: the client's `tools_ttl`.
    """
    if cache.epoch is not None and cache.epoch == live_epoch:
        return True  # fetched while the channel was live, and it has been live since
    if channel.relies_on_stream():
        return False  # the stream the cache relies on is down: ask until it is back
    return ttl is None or time.monotonic() - cache.at < ttl


def note_capabilities(sdk: Client, channel: ChangeChannel) -> bool:
    """Whether the connected server advertises `tools.listChanged`; sets `channel.wanted` when a
    `subscriptions/listen` stream is needed for it (a 2026-07-28 connection)."""
    try:
        modern = sdk.protocol_version in MODERN_PROTOCOL_VERSIONS
        tools = sdk.server_capabilities.tools
    except RuntimeError:
        modern, tools = False, None
    list_changed = tools is not None and bool(tools.list_changed)
    channel.wanted = modern and list_changed
    if not channel.wanted:
        channel.known.set()
    return list_changed


async def fetch_all_tools(sdk: Client, describe: Callable[[], str]) -> list[types.Tool]:
    """Every tool of the server, following `nextCursor` (at most `TOOLS_LIST_PAGE_CAP` pages).

    Raises:
        ProtocolError: a cursor came back twice, or there were more pages than the cap.
        Exception: whatever the SDK raises (the caller maps it).
    """
    tools: list[types.Tool] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(TOOLS_LIST_PAGE_CAP):
        page = await sdk.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise ProtocolError(f"tools/list of {describe()}: the server repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise ProtocolError(f"tools/list of {describe()}: more than {TOOLS_LIST_PAGE_CAP} pages")


async def keep_listening(
    sdk: Client,
    channel: ChangeChannel,
    *,
    changed: Callable[[], None],
    logger: logging.Logger,
    describe: Callable[[], str],
) -> None:
    """Hold a `subscriptions/listen` stream open, reopening it with backoff when it dies.

    Runs until cancelled (the connection's owner cancels it at close) or until it gives up.
    Events on the stream reach the client's message handler through the SDK; this task only
    keeps the stream and `channel` up to date. `changed()` is called when the list can no longer
    be trusted (the stream died) and when a reopened stream is live again.
    """
    failures = 0
    delay = LISTEN_RETRY_FIRST
    opened_before = False
    live_since: float | None = None
    try:
        while True:
            reason = "the server closed it"
            try:
                async with AsyncExitStack() as stack:
                    with anyio.fail_after(LISTEN_ACK_TIMEOUT):
                        subscription = await stack.enter_async_context(sdk.listen(tools_list_changed=True))
                    channel.live = True
                    channel.epoch += 1
                    channel.known.set()
                    live_since = time.monotonic()
                    if opened_before:
                        logger.info("%s: tool-list change stream reopened", describe())
                        changed()  # changes made while it was down were never announced
                    opened_before = True
                    async for _event in subscription:
                        pass  # the SDK also hands each event to the message handler, which acts on it
            except ListenNotSupportedError:
                return  # not a 2026-07-28 connection after all: no stream, the TTL applies
            except MCPError as exc:
                if exc.code not in _BROKEN_CODES and not opened_before:
                    logger.info(
                        "%s: the server refused a tool-list change stream (%s); "
                        "tool lists are cached for a limited time",
                        describe(),
                        exc.message,
                    )
                    return
                reason = f"{exc.message} ({exc.code})"
            except TimeoutError:
                reason = f"no acknowledgment within {LISTEN_ACK_TIMEOUT}s"
            except RuntimeError as exc:  # SubscriptionLost, or the session ending under it
                reason = str(exc) or type(exc).__name__
            finally:
                channel.known.set()
                if channel.live:
                    channel.live = False
                    changed()  # the list is no longer known to be current
            if live_since is not None and time.monotonic() - live_since >= LISTEN_STABLE_AFTER:
                failures, delay = 0, LISTEN_RETRY_FIRST  # it was up for a good while: start over
            live_since = None
            failures += 1
            if failures > LISTEN_RETRY_ATTEMPTS:
                logger.warning(
                    "%s: tool-list change stream lost (%s); gave up after %d attempts, "
                    "tool lists are now cached for a limited time",
                    describe(),
                    reason,
                    LISTEN_RETRY_ATTEMPTS,
                )
                return
            logger.info(
                "%s: tool-list change stream lost (%s); reopening in %.1fs", describe(), reason, delay
            )
            await anyio.sleep(delay)
            delay = min(delay * 2, LISTEN_RETRY_MAX)
    finally:
        channel.gave_up = True
        channel.known.set()
