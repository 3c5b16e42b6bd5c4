"""Bulkheads of the gateway's HTTP door: sessions bound to their identity, each identity's share.

`SessionBulkhead` is an ASGI middleware between the gateway's authentication (`BearerAuth` or
`OAuthGate`, which put the caller's identity in the ASGI scope) and the SDK's Streamable HTTP app:

- **Bound to the identity that opened it.** The session id the SDK hands out (the response's
  `Mcp-Session-Id`) is remembered with the identity of the request that opened it. A request of
  another identity carrying that id (POST, GET or DELETE) is answered 404 "Session not found",
  exactly as an unknown id is, so its existence does not leak. Bearer tokens and OAuth alike
  (the SDK itself binds OAuth sessions only to the token's principal, and bearer sessions not
  at all).
- **Each identity's share.** An identity holds at most `per_identity` open sessions. Opening one
  more first closes that identity's oldest idle session (no request in flight on it, a GET
  stream counts as one; closed with a DELETE through the SDK, so its client sees 404 and opens
  a new one, as after the idle timeout); when every one of its sessions is busy, the request is
  answered **429** with `Retry-After`. Other identities are not affected. Sessions idle for
  longer than the SDK's idle timeout are forgotten (the SDK has closed them).

`InFlight` counts each identity's calls in flight (`tools/call`); past its bound a call is
refused with `LIMIT_EXCEEDED` before anything is sent.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "SESSION_HEADER",
    "Bulkheads",
    "InFlight",
    "SessionBulkhead",
    "header",
    "per_identity_default",
]

log = logging.getLogger("toolbridge.gateway")

DEFAULT_MAX_SESSIONS = 10_000
"""The SDK's own cap on open HTTP sessions (all identities together)."""

RETRY_AFTER_S = 5
"""`Retry-After` of a 429: when every session of the identity is busy, try again after this."""

SESSION_HEADER = b"mcp-session-id"

ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


def per_identity_default(max_sessions: int) -> int:
    """The default share of one identity: a tenth of the gateway's sessions (at least 1)."""
    return max(1, max_sessions // 10)


@dataclass(frozen=True)
class Bulkheads:
    """The gateway's limits and deadlines (the `Gateway` document's fields; defaults documented
    in docs/gateway.md, "Limits and defaults").

    Attributes:
        max_sessions: open HTTP sessions, all identities together (`maxSessions`).
        max_sessions_per_identity: open HTTP sessions of one identity (`maxSessionsPerIdentity`;
            None: a tenth of `max_sessions`).
        session_idle_timeout_s: an HTTP session without a request for this long is closed.
        max_calls_in_flight_per_identity: `tools/call` requests of one identity in flight.
        upstream_start_timeout_s: the longest one upstream's first listing may take (its start-up
            and handshake included).
        upstream_list_timeout_s: the longest one upstream's later `tools/list` may take.
        breaker_failures: consecutive failures of one upstream that open its breaker.
        breaker_cooldown_s: how long an open breaker fails calls fast before one probe.
    """

    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_sessions_per_identity: int | None = None
    session_idle_timeout_s: float = 1800.0
    max_calls_in_flight_per_identity: int = 64
    upstream_start_timeout_s: float = 30.0
    upstream_list_timeout_s: float = 10.0
    breaker_failures: int = 3
    breaker_cooldown_s: float = 30.0

    @property
    def sessions_per_identity(self) -> int:
        given = self.max_sessions_per_identity
        return given if given is not None else per_identity_default(self.max_sessions)


@dataclass
class _Session:
    owner: str
    user: Any
    """The opener's `scope["user"]` (OAuth): what the SDK compares a DELETE with."""
    last: float
    inflight: int = 0


@dataclass
class SessionBulkhead:
    """ASGI middleware: sessions bound to their identity, at most `per_identity` each.

    Args:
        app: the SDK's Streamable HTTP app.
        identity_key: where the authentication left the identity's name in the scope.
        per_identity: the most sessions one identity holds open.
        idle_timeout_s: the SDK's session idle timeout (a session idle longer is gone).
    """

    app: ASGIApp
    identity_key: str
    per_identity: int
    idle_timeout_s: float
    _sessions: dict[str, _Session] = field(default_factory=dict, repr=False)
    _by_owner: dict[str, dict[str, _Session]] = field(default_factory=dict, repr=False)
    _opening: dict[str, int] = field(default_factory=dict, repr=False)
    """Opening requests in flight per identity (a burst cannot pass the bound together)."""

    def open_sessions(self, identity: str) -> int:
        """How many sessions `identity` holds open (as far as the gateway knows)."""
        self._prune(identity)
        return len(self._by_owner.get(identity, {}))

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        who = scope.get(self.identity_key)
        sid = header(scope, SESSION_HEADER)
        if not isinstance(who, str):  # the authentication let it through unnamed: the SDK decides
            await self.app(scope, receive, send)
            return
        if sid is None:
            await self._open(who, scope, receive, send)
            return
        session = self._sessions.get(sid)
        if session is not None and session.owner != who:
            log.info("a request of %r named a session of another identity: answered 404", who)
            await _answer(send, 404, "Session not found")
            return
        if session is None:  # unknown here: the SDK answers 404 (or a session of stateless mode)
            await self.app(scope, receive, send)
            return
        session.inflight += 1
        status = 0

        async def watched(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 0))
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            session.inflight -= 1
            session.last = time.monotonic()
            if status == 404 or (scope.get("method") == "DELETE" and 200 <= status < 300):
                self._forget(sid)

    async def _open(self, who: str, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") != "POST":  # a GET or DELETE without a session: the SDK refuses it
            await self.app(scope, receive, send)
            return
        full = self.open_sessions(who) + self._opening.get(who, 0) >= self.per_identity
        if full and not await self._evict_one(who, scope):
            log.info("identity %r holds %d busy sessions: a new one was refused", who, self.per_identity)
            await _answer(
                send,
                429,
                "Too many open sessions for this identity",
                [(b"retry-after", str(RETRY_AFTER_S).encode())],
            )
            return
        counted = True
        self._opening[who] = self._opening.get(who, 0) + 1

        def uncount() -> None:
            nonlocal counted
            if counted:
                counted = False
                left = self._opening.pop(who, 1) - 1
                if left > 0:
                    self._opening[who] = left

        async def watched(message: MutableMapping[str, Any]) -> None:
            if message.get("type") == "http.response.start" and int(message.get("status", 500)) < 400:
                opened = header(message, SESSION_HEADER)
                if opened is not None:  # known before the client can name it
                    self._remember(opened, who, scope.get("user"))
                    uncount()
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            uncount()

    def _remember(self, sid: str, who: str, user: Any) -> None:
        if sid in self._sessions:
            return
        session = _Session(who, user, time.monotonic())
        self._sessions[sid] = session
        self._by_owner.setdefault(who, {})[sid] = session

    def _forget(self, sid: str) -> None:
        session = self._sessions.pop(sid, None)
        if session is not None:
            mine = self._by_owner.get(session.owner)
            if mine is not None:
                mine.pop(sid, None)
                if not mine:
                    del self._by_owner[session.owner]

    def _prune(self, who: str) -> None:
        """Forget `who`'s sessions idle past the SDK's idle timeout (the SDK closed them)."""
        mine = self._by_owner.get(who)
        if not mine:
            return
        horizon = time.monotonic() - self.idle_timeout_s
        for sid in [s for s, v in mine.items() if v.inflight == 0 and v.last < horizon]:
            self._forget(sid)

    async def _evict_one(self, who: str, scope: MutableMapping[str, Any]) -> bool:
        """Close `who`'s oldest idle session (a DELETE through the SDK); False when none is idle."""
        mine = self._by_owner.get(who)
        if not mine:
            return False
        for _, sid in sorted((v.last, s) for s, v in mine.items() if v.inflight == 0):
            session = mine.get(sid)
            if session is None or session.inflight:  # taken meanwhile by a request or another opening
                continue
            headers = [
                (k, v)
                for k, v in scope.get("headers") or []
                if k not in (SESSION_HEADER, b"content-length", b"content-type", b"transfer-encoding")
            ]
            headers.append((SESSION_HEADER, sid.encode("latin-1")))
            delete = {**scope, "method": "DELETE", "headers": headers}
            if session.user is not None:
                delete["user"] = session.user
            else:
                delete.pop("user", None)
            session.inflight += 1  # chosen: no concurrent opening closes it a second time
            try:
                status = await _status_of(self.app, delete)
            except Exception as exc:  # the SDK could not close it: not evicted
                log.warning("an idle session could not be closed: %s", type(exc).__name__)
                status = 0
            finally:
                session.inflight -= 1
            if 200 <= status < 300 or status == 404:  # closed now, or unknown to the SDK already
                self._forget(sid)
                log.info(
                    "identity %r was at its %d sessions: its oldest idle one was closed",
                    who,
                    self.per_identity,
                )
                return True
        return False


async def _status_of(app: ASGIApp, scope: MutableMapping[str, Any]) -> int:
    """Run one bodiless request through `app`; the status it answered (0 for none)."""
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message.get("type") == "http.response.start":
            status = int(message.get("status", 0))

    await app(scope, receive, send)
    return status


def header(holder: MutableMapping[str, Any], name: bytes) -> str | None:
    """The value of header `name` (lower-case bytes) of an ASGI scope or response start message."""
    for key, value in holder.get("headers") or []:
        if len(key) == len(name) and bytes(key).lower() == name:  # no lower() of every other name
            try:
                return bytes(value).decode("latin-1")
            except (TypeError, ValueError):
                return None
    return None


async def _answer(
    send: Any, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A JSON-RPC error body without id, as the SDK answers (404 is its "Session not found")."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    body = json.dumps(error, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@dataclass
class InFlight:
    """Each identity's calls in flight, at most `limit` each."""

    limit: int
    _counts: dict[str, int] = field(default_factory=dict, repr=False)

    def enter(self, who: str) -> bool:
        """Count one more call of `who`; False (and nothing counted) when at the limit."""
        n = self._counts.get(who, 0)
        if n >= self.limit:
            return False
        self._counts[who] = n + 1
        return True

    def leave(self, who: str) -> None:
        n = self._counts.get(who, 0) - 1
        if n > 0:
            self._counts[who] = n
        else:
            self._counts.pop(who, None)
