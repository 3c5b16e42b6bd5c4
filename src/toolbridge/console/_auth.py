"""Who may see the console: operators signed in with their token, requests from the right place.

- **Operators** sign in once with their token (`POST /console/login`), compared with every
  operator's token in constant time (`hmac.compare_digest`); the token is never logged, never put
  in a page or a URL. A signed-in browser holds a random session cookie (`HttpOnly`,
  `SameSite=Strict`, `Path=/console/`, `Secure` over HTTPS) for `SESSION_S` at most. Scripts may
  send `Authorization: Bearer TOKEN` instead, for reading.
- **OAuth operators** (a gateway with `oauth` and `console.scopes`): an access token the
  gateway verifies as it would a client's (issuer, signature, audience = the gateway's resource,
  expiry) and that carries every console scope signs its subject (`sub`, else `client_id`) in,
  as `Authorization: Bearer` on each request or pasted once into the sign-in form; the session
  then ends when the token expires, or after `SESSION_S`, whichever is first. A token without
  the scopes is 403, a refused one 401, an authorization server that cannot be reached 503.
  A DPoP-bound token is refused (the console checks no proofs).
- **Forms** (approve, deny, sign out) carry the session's own CSRF token, compared in constant
  time, and must come from the console's own origin (an `Origin` naming another site is 403).
- **Host and Origin** follow `/mcp`'s rules: a gateway bound to a loopback address accepts only
  loopback `Host` headers (421 otherwise) and loopback `Origin`s (403 otherwise), which stops
  DNS-rebinding pages from reaching it.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import ToolbridgeError

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

__all__ = [
    "COOKIE",
    "MAX_SESSIONS",
    "SESSION_S",
    "OAuthOperators",
    "Operators",
    "Refusal",
    "Session",
    "TokenVerifier",
    "loopback_host",
    "place_problem",
    "same_origin",
]

COOKIE = "toolbridge_console"
SESSION_S = 12 * 3600.0
"""How long a sign-in lasts."""
MAX_SESSIONS = 1000
"""Signed-in sessions kept at once (one more ends the oldest)."""
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Session:
    """A signed-in browser: its operator and its CSRF token."""

    operator: str
    csrf: str
    expires: float


class Operators:
    """The operators (token -> name) and their signed-in sessions."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode("utf-8"), name) for token, name in tokens.items()]
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def who(self, token: str | bytes | None) -> str | None:
        """The operator whose token this is (every token compared, each in constant time)."""
        if not token:
            return None
        given = token.encode("utf-8", "replace") if isinstance(token, str) else token
        found: str | None = None
        for known, name in self._tokens:
            if hmac.compare_digest(given, known):
                found = name
        return found

    def sign_in(self, operator: str, *, until: float | None = None) -> str:
        """A new session of `operator` (ending after `SESSION_S`, or at `until`, a Unix time,
        when sooner); its id (the cookie's value)."""
        sid = secrets.token_urlsafe(32)
        last = SESSION_S if until is None else min(SESSION_S, until - time.time())
        self._sessions[sid] = Session(operator, secrets.token_urlsafe(32), time.monotonic() + last)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return sid

    def session(self, sid: str | None) -> Session | None:
        if not sid or len(sid) > 100:
            return None
        found = self._sessions.get(sid)
        if found is None:
            return None
        if found.expires <= time.monotonic():
            self._sessions.pop(sid, None)
            return None
        return found

    def sign_out(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)

    @staticmethod
    def csrf_ok(session: Session, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(
            session.csrf.encode(), (given or "").encode("utf-8", "replace")
        )


class TokenVerifier(Protocol):
    """What verifies the gateway's OAuth access tokens (the gateway's `OAuthVerifier`)."""

    async def check(self, token: str) -> AccessToken: ...


@dataclass(frozen=True)
class Refusal:
    """Why a token is not an operator's: the HTTP status and a fixed text (never token content)."""

    status: int
    reason: str
    retry_after_s: int = 0


_MAX_NAME = 100
INTROSPECTIONS_PER_MINUTE = 30
"""Unknown opaque tokens the console has the authorization server introspect per minute (all
visitors together; bursts of `INTROSPECTIONS_BURST`); past it 503 and nobody is asked. JWTs
and tokens the verifier's cache knows are never held back."""
INTROSPECTIONS_BURST = 10


class OAuthOperators:
    """Operators known by OAuth access tokens that carry every one of `scopes`.

    The gateway's own verifier checks the token (signature, issuer, audience, expiry; its cache
    and introspection limits apply); this adds the console's scopes and the operator's name.
    """

    def __init__(self, verifier: TokenVerifier, scopes: Sequence[str]) -> None:
        self.verifier = verifier
        self.scopes = tuple(scopes)
        self._budget = float(INTROSPECTIONS_BURST)
        self._budget_at = time.monotonic()

    def _may_introspect(self, token: str) -> bool:
        """False past `INTROSPECTIONS_PER_MINUTE` tokens the verifier would have to introspect."""
        would = getattr(self.verifier, "would_introspect", None)
        if would is None or not would(token):
            return True
        now = time.monotonic()
        self._budget = min(
            float(INTROSPECTIONS_BURST),
            self._budget + (now - self._budget_at) * INTROSPECTIONS_PER_MINUTE / 60.0,
        )
        self._budget_at = now
        if self._budget < 1.0:
            return False
        self._budget -= 1.0
        return True

    async def who(self, token: str) -> tuple[str, float | None] | Refusal:
        """(operator name, the token's expiry as a Unix time or None), or why not."""
        if not self._may_introspect(token):
            return Refusal(503, "too many unknown tokens tried at the console; try again later", 10)
        try:
            access = await self.verifier.check(token)
        except ToolbridgeError as exc:  # the gateway's TokenRejected / AuthUnavailable
            if exc.code == "ERR_GATEWAY_AUTH_UNAVAILABLE":
                return Refusal(503, "the authorization server cannot be reached; try again later", 5)
            reason = getattr(exc, "reason", "the token is refused")
            return Refusal(401, f"token refused: {reason}")
        except Exception:  # a verifier's bug is a refusal, not a traceback
            return Refusal(401, "token refused: it could not be verified")
        have = set(access.scopes)
        if any(s not in have for s in self.scopes):
            return Refusal(403, f"the token lacks the console's scope ({' '.join(self.scopes)})")
        claims = access.claims if isinstance(access.claims, dict) else {}
        cnf = claims.get("cnf")
        if isinstance(cnf, dict) and "jkt" in cnf:
            return Refusal(401, "token refused: a DPoP-bound token cannot sign in to the console")
        name = claims.get("sub") or access.client_id
        if not isinstance(name, str) or not name or len(name) > _MAX_NAME or not name.isprintable():
            return Refusal(403, "the token names no subject")
        return name, (float(access.expires_at) if access.expires_at is not None else None)


def loopback_host(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def _name_of(hostport: str) -> str:
    if hostport.startswith("["):
        return hostport[: hostport.find("]") + 1]
    return hostport.rsplit(":", 1)[0] if hostport.count(":") == 1 else hostport


def place_problem(
    host_header: str | None, origin: str | None, *, loopback_only: bool
) -> tuple[int, str] | None:
    """Why a request is refused for where it comes from (status, text), or None.

    `loopback_only` (the gateway listens on a loopback address): `Host` must name a loopback
    host, else 421; an `Origin`, when present, must be `http://` or `https://` a loopback host,
    else 403. Otherwise an `Origin` must name the `Host` the request was sent to (same origin).
    """
    host = host_header or ""
    if loopback_only and _name_of(host) not in _LOOPBACK:
        return 421, "Invalid Host header"
    if origin is None:
        return None
    scheme, _, rest = origin.partition("://")
    if scheme not in ("http", "https") or not rest:
        return 403, "Invalid Origin header"
    if loopback_only:
        return None if _name_of(rest) in _LOOPBACK else (403, "Invalid Origin header")
    return None if rest == host else (403, "Invalid Origin header")


def same_origin(host_header: str | None, origin: str | None, fetch_site: str | None = None) -> bool:
    """Whether a form comes from the console's own origin: its `Origin` names the `Host` it was
    sent to, and a browser's `Sec-Fetch-Site`, when sent, says `same-origin` (no `Origin`, as
    from a script: the CSRF token decides)."""
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    if origin is None:
        return True
    _, _, rest = origin.partition("://")
    return bool(host_header) and rest == host_header
