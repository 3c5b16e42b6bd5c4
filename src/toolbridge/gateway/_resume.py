"""Resumable event streams for the HTTP gateway, kept per session (SEP-1699).

With an event store, the SDK's Streamable HTTP transport opens every SSE stream with a priming
event (an id and no data, plus a `retry` field) and gives each message an event id, so a client
whose stream drops mid-call reconnects with `Last-Event-ID` and receives what it missed.

The SDK hands one store to every session and names streams by the client's own request ids
(`"1"` in one session is `"1"` in the next), so a store shared as it is would replay one
client's messages to another. Here each session has its own bounded store:
`ResumeScopes`, an ASGI middleware in front of the SDK's app, gives every request the store of
the session it names (a new one for a request that opens a session), and `SessionEventStore`
keeps and replays events only within it. A session's store lives as long as the session's own
task does (the SDK starts that task inside the opening request, which carries the store); an
event stored outside any session (none is known) is not kept, so nothing is replayed across
sessions.

Bounds per session: the last `MAX_EVENTS` events and at most `MAX_BYTES` of their JSON; an
older event is dropped first, and a message larger than the byte bound keeps its place but not
its text (a reconnect from before it skips it, one from it resumes after it).
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import weakref
from collections import deque
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter

from ._bulkhead import SESSION_HEADER, header

__all__ = ["MAX_BYTES", "MAX_EVENTS", "RETRY_MS", "ResumeScopes", "SessionEventStore"]

log = logging.getLogger("toolbridge.gateway")

MAX_EVENTS = 256
"""Events kept per session for a reconnecting client."""

MAX_BYTES = 256 << 10
"""Bytes of JSON kept per session (256 KiB)."""

RETRY_MS = 1000
"""The `retry` the gateway's streams suggest: a dropped stream is reconnected after 1 s."""


@dataclass(eq=False)
class _Events:
    """One session's kept events: (event id, stream id, JSON text; None for a priming event or
    a message too large to keep)."""

    prefix: str = field(default_factory=lambda: secrets.token_hex(8))
    kept: deque[tuple[str, str, str | None]] = field(default_factory=deque)
    size: int = 0
    count: int = 0

    def add(self, stream_id: str, text: str | None) -> str:
        self.count += 1
        event_id = f"{self.prefix}-{self.count}"
        if text is not None and len(text) > MAX_BYTES:  # its place is kept, not its text
            log.info("an event of %d bytes is not kept for a reconnecting client", len(text))
            text = None
        self.kept.append((event_id, stream_id, text))
        self.size += len(text or "")
        while len(self.kept) > MAX_EVENTS or self.size > MAX_BYTES:
            _, _, dropped = self.kept.popleft()
            self.size -= len(dropped or "")
        return event_id


_CURRENT: contextvars.ContextVar[_Events | None] = contextvars.ContextVar(
    "toolbridge_gateway_events", default=None
)


class SessionEventStore(EventStore):
    """The SDK's `EventStore`, each session's events apart (see the module docstring)."""

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = _CURRENT.get()
        if events is None:  # no session known: an id the client can hold, nothing kept
            return f"x-{secrets.token_hex(8)}"
        text = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        return events.add(str(stream_id), text)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        events = _CURRENT.get()
        if events is None:
            return None
        kept = list(events.kept)
        start = next((i for i, (eid, _, _) in enumerate(kept) if eid == last_event_id), None)
        if start is None:
            return None
        stream_id = kept[start][1]
        for event_id, sid, text in kept[start + 1 :]:
            if sid == stream_id and text is not None:
                await send_callback(EventMessage(jsonrpc_message_adapter.validate_json(text), event_id))
        return stream_id


class ResumeScopes:
    """ASGI middleware: each request runs with the event store of the session it names."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._sessions: weakref.WeakValueDictionary[str, _Events] = weakref.WeakValueDictionary()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        sid = header(scope, SESSION_HEADER)
        if sid is not None:
            token = _CURRENT.set(self._sessions.get(sid))
            try:
                await self.app(scope, receive, send)
            finally:
                _CURRENT.reset(token)
            return
        events = _Events()

        async def watched(message: MutableMapping[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                opened = header(message, SESSION_HEADER)
                if opened is not None:
                    self._sessions[opened] = events
            await send(message)

        token = _CURRENT.set(events)
        try:
            await self.app(scope, receive, watched)
        finally:
            _CURRENT.reset(token)
