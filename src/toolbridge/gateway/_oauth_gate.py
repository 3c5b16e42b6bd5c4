"""The gateway's HTTP door with OAuth: bearer tokens from secrets, and verified OAuth access tokens.

`OAuthGate` is an ASGI middleware in front of the SDK's Streamable HTTP app (it takes the place of
`BearerAuth` when the `Gateway` has `oauth`):

1. `GET /.well-known/oauth-protected-resource[/<resource path>]` answers the protected-resource
   metadata (RFC 9728, built by the SDK's `create_protected_resource_routes`): the resource URL,
   the authorization servers, the scopes, `bearer_methods_supported: ["header"]`.
2. Every other request needs `Authorization: Bearer TOKEN`. A token equal (in constant time) to
   a configured secret token names its identity, as without OAuth. Any other token is verified
   (`OAuthVerifier`: JWT/JWKS or introspection), and then mapped to an identity by the clients'
   rules (`ClientRule`, first match in manifest order: `sub`, `client_id`/`azp`, claims).
3. Refusals: no token, or a refused one, is **401** with `WWW-Authenticate: Bearer
   error="invalid_token", error_description="<reason>", resource_metadata="<url>"` (no error
   for a missing token, per RFC 6750); a token without a scope the gateway or the identity
   requires is **403** `insufficient_scope` with `scope="<needed>"`; a valid token that no
   client rule matches is **403** too. The body is `{"error", "error_description"}`. A token is
   never logged; a refusal is logged at INFO with its reason only.
4. When the gateway cannot decide (`AuthUnavailable`: the authorization server's key set or
   introspection endpoint is unreachable, too slow, or answers junk) the answer is **503** with
   `Retry-After` and `{"error": "temporarily_unavailable", ...}`, not 401: the client keeps its
   token and tries again. It is logged at WARNING as `ERR_GATEWAY_AUTH_UNAVAILABLE` with the
   cause (never the token): the first one, then at most one line per `UNAVAILABLE_LOG_EVERY_S`
   saying how many more there were.

A DPoP-bound token (`cnf.jkt` in its claims) is accepted only as `Authorization: DPoP` with a
valid proof for this request (`_dpop_proof.check_proof`), and refused as `Bearer`.

A verified token is also put where the SDK looks for it (`scope["user"]` as an
`AuthenticatedUser`, and the SDK's auth context): a Streamable HTTP session then belongs to the
principal that opened it (the SDK answers 404 to another token), and `get_access_token()` works
inside handlers.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._dpop_proof import NonceIssuer, ReplayCache, bound_key, check_proof
from ._oauth import AuthUnavailable, OAuthSettings, OAuthVerifier, TokenRejected

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from starlette.types import ASGIApp

    from ._replica_state import ReplicaState

__all__ = ["PRM_PREFIX", "UNAVAILABLE_LOG_EVERY_S", "ClientRule", "OAuthGate", "metadata_url"]

log = logging.getLogger("toolbridge.gateway.oauth")

PRM_PREFIX = "/.well-known/oauth-protected-resource"
ClaimValue = str | int | bool
UNAVAILABLE_LOG_EVERY_S = 10.0
"""During an outage of the authorization server, at most one 503 log line per this period."""


@dataclass(frozen=True)
class ClientRule:
    """Which verified tokens are one gateway identity, and the scopes that identity needs.

    Attributes:
        name: the identity (a `clients` entry's name).
        subject: the token's `sub` must equal this.
        client_id: the token's `client_id` (or `azp`) must equal this.
        claims: each claim must equal the value, or be a list containing it.
        scopes: scopes a token of this identity must carry (else 403 `insufficient_scope`).

    Every condition given must hold; a rule with none matches no token.
    """

    name: str
    subject: str | None = None
    client_id: str | None = None
    claims: Mapping[str, ClaimValue] = field(default_factory=dict)
    scopes: tuple[str, ...] = ()

    def matches(self, token: AccessToken) -> bool:
        if self.subject is None and self.client_id is None and not self.claims:
            return False
        claims = token.claims or {}
        if self.subject is not None and token.subject != self.subject:
            return False
        if self.client_id is not None and self.client_id not in (
            claims.get("client_id"),
            claims.get("azp"),
        ):
            return False
        for name, want in self.claims.items():
            have = claims.get(name)
            if isinstance(have, list):
                if not any(_same(item, want) for item in have):
                    return False
            elif not _same(have, want):
                return False
        return True


def _same(have: Any, want: ClaimValue) -> bool:
    return type(have) is type(want) and bool(have == want)


def metadata_url(resource: str) -> str:
    """Where the protected-resource metadata of `resource` is served (RFC 9728 §3.1)."""
    from mcp.server.auth.routes import build_resource_metadata_url
    from pydantic import AnyHttpUrl

    return str(build_resource_metadata_url(AnyHttpUrl(resource)))


def _quoted(text: str) -> str:
    return "".join(c for c in text if c not in '"\\' and 32 <= ord(c) < 127)


class AddressBuckets:
    """A token bucket per client address (`rate` per second, `burst` at most), for at most `size`
    addresses (the least recently seen are forgotten)."""

    def __init__(self, rate: float, *, burst: float, size: int = 10_000) -> None:
        self.rate = rate
        self.burst = burst
        self._size = size
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, address: str, now: float) -> bool:
        """Spend one token of `address`'s bucket; False when it is empty."""
        level, at = self._buckets.pop(address, (self.burst, now))
        level = min(self.burst, level + (now - at) * self.rate)
        allowed = level >= 1.0
        self._buckets[address] = (level - 1.0 if allowed else level, now)
        while len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        return allowed


class OAuthGate:
    """ASGI middleware: who the request is, by a secret token or a verified OAuth token.

    Args:
        app: the SDK's Streamable HTTP app.
        settings: the OAuth settings.
        rules: how verified tokens map to identities, in order.
        tokens: secret bearer tokens -> identity names (as without OAuth).
        verifier: the verifier (default: `OAuthVerifier(settings)`); the gate does not close it.
        identity_key: where the identity's name goes in the ASGI scope.
        resource_name: advertised in the metadata.
    """

    def __init__(
        self,
        app: ASGIApp,
        settings: OAuthSettings,
        rules: Sequence[ClientRule],
        *,
        tokens: Mapping[str, str] | None = None,
        verifier: Any = None,
        identity_key: str = "toolbridge.identity",
        resource_name: str | None = None,
        dpop_state: ReplicaState | None = None,
    ) -> None:
        from mcp.server.auth.middleware.auth_context import AuthContextMiddleware

        self.app = app
        self._authed_app = AuthContextMiddleware(app)
        self.settings = settings
        self.rules = tuple(rules)
        self._tokens = [(t.encode("utf-8"), name) for t, name in (tokens or {}).items()]
        self.verifier = verifier if verifier is not None else OAuthVerifier(settings)
        self._key = identity_key
        self.metadata_url = metadata_url(settings.resource)
        self._metadata = self._metadata_app(resource_name)
        required = set(settings.scopes)
        for rule in self.rules:
            required.update(rule.scopes)
        self.scopes_supported = sorted(required)
        self._unavailable_logged_at = -float("inf")
        self._unavailable_unlogged = 0
        rate = settings.introspections_per_minute
        self.introspection_limit = AddressBuckets(rate / 60.0, burst=10) if rate > 0 else None
        """Per client address: introspections of tokens the cache does not know."""
        self.replay = ReplayCache()
        """`jti`s of the DPoP proofs accepted in the proof window (see `_dpop_proof`)."""
        self.dpop_state = dpop_state
        """The replicas' shared replay window and nonce key (`_replica_state`), or None: this
        process's own (`replay`, a random nonce key)."""
        key = dpop_state.nonce_key if dpop_state is not None else None
        self.nonces = NonceIssuer(key) if settings.dpop_nonce else None
        """The gateway's DPoP nonces, when the settings ask for them (`_dpop_proof`)."""

    def _metadata_app(self, resource_name: str | None) -> ASGIApp:
        from mcp.server.auth.routes import create_protected_resource_routes
        from starlette.routing import Route, Router

        scopes = set(self.settings.scopes)
        for rule in self.rules:
            scopes.update(rule.scopes)
        # Strings, so that the SDK's metadata model keeps them as written (no "/" added to a
        # path-less issuer: RFC 8414 compares issuers as exact strings).
        servers: Any = list(self.settings.advertised_servers)
        resource: Any = self.settings.resource
        routes = create_protected_resource_routes(
            resource_url=resource,
            authorization_servers=servers,
            scopes_supported=sorted(scopes) or None,
            resource_name=resource_name,
        )
        if routes and routes[0].path != PRM_PREFIX:  # also at the root, for older clients
            routes.append(Route(PRM_PREFIX, endpoint=routes[0].endpoint, methods=["GET", "OPTIONS"]))
        return Router(routes=list(routes))

    def _static(self, given: bytes) -> str | None:
        found: str | None = None
        for token, name in self._tokens:  # compare with every token, in constant time each
            if hmac.compare_digest(given, token):
                found = name
        return found

    def identify(self, token: AccessToken) -> str:
        """The identity of a verified token.

        Raises:
            TokenRejected: 403 when a required scope is missing or no client rule matches.
        """
        have = set(token.scopes)
        missing = [s for s in self.settings.scopes if s not in have]
        if missing:
            raise TokenRejected(
                "the token lacks a required scope",
                status=403,
                error="insufficient_scope",
                scopes=self.settings.scopes,
            )
        for rule in self.rules:
            if rule.matches(token):
                needed = (*self.settings.scopes, *rule.scopes)
                if any(s not in have for s in needed):
                    raise TokenRejected(
                        "the token lacks a scope this client needs",
                        status=403,
                        error="insufficient_scope",
                        scopes=needed,
                    )
                return rule.name
        raise TokenRejected("the token names no client of this gateway", status=403, error="access_denied")

    def _may_introspect(self, scope: MutableMapping[str, Any], token: str) -> bool:
        """False when this client address has had too many unknown tokens introspected lately."""
        would = getattr(self.verifier, "would_introspect", None)
        if self.introspection_limit is None or would is None or not would(token):
            return True
        client = scope.get("client")
        address = str(client[0]) if client else "?"
        return self.introspection_limit.take(address, time.monotonic())

    @staticmethod
    async def _too_many(send: Any) -> None:
        log.info("ERR_GATEWAY_AUTH: too many unknown tokens introspected for one client address")
        body = b'{"error": "too_many_requests", "error_description": "too many unknown tokens"}'
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"10"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _check_binding(
        self, scope: MutableMapping[str, Any], access: AccessToken, token: str, dpop: bool
    ) -> tuple[str, float, float] | None:
        """RFC 9449: a bound token only with the DPoP scheme and a good proof; no proof for a bearer one.

        Returns the proof's `jti`, until when and now, when the replicas' shared window must
        still record it (`dpop_state`); else None.

        Raises:
            TokenRejected: the token or its proof is refused.
        """
        jkt = bound_key(access.claims)
        if jkt is None:
            if dpop:
                raise TokenRejected("the token is not DPoP-bound; send it as Bearer")
            return None
        if not dpop:
            raise TokenRejected("a DPoP-bound token presented as Bearer")
        proofs = [v for k, v in scope.get("headers") or [] if k == b"dpop"]
        if len(proofs) > 1:
            raise TokenRejected("more than one DPoP proof", error="invalid_dpop_proof")
        shared = self.dpop_state is not None
        use = check_proof(
            proofs[0].decode("ascii", "replace") if proofs else None,
            method=str(scope.get("method", "")),
            url=self.settings.resource,
            token=token,
            jkt=jkt,
            replay=None if shared else self.replay,
            nonces=self.nonces,
        )
        return use if shared else None

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind == "websocket":  # the gateway serves none: refuse rather than pass unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        if kind != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        if str(scope.get("path", "")).startswith(PRM_PREFIX):
            await self._metadata(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers") or [] if k == b"authorization"), None)
        dpop_scheme = header is not None and header[:5].lower() == b"dpop "
        if header is None or not (dpop_scheme or header[:7].lower() == b"bearer ") or not header[7:].strip():
            await self._refuse(send, None)
            return
        given = header[5:].strip() if dpop_scheme else header[7:].strip()
        who = None if dpop_scheme else self._static(given)
        if who is not None:
            scope[self._key] = who
            await self.app(scope, receive, send)
            return
        try:
            text = given.decode("ascii")
            if not self._may_introspect(scope, text):
                await self._too_many(send)
                return
            access = await self.verifier.check(text)
            use = self._check_binding(scope, access, text, dpop_scheme)
            who = self.identify(access)
            if use is not None and self.dpop_state is not None and not await self.dpop_state.first_use(*use):
                raise TokenRejected("DPoP proof replayed", error="invalid_dpop_proof")
        except UnicodeDecodeError:
            await self._refuse(send, TokenRejected("malformed token"))
            return
        except TokenRejected as exc:
            log.info("ERR_GATEWAY_AUTH: a request was refused: %s", exc.reason)
            await self._refuse(send, exc)
            return
        except AuthUnavailable as exc:
            self._log_unavailable(exc)
            await self._unavailable(send, exc.retry_after_s)
            return
        except Exception as exc:  # a verifier's bug must not become a 500 with a traceback
            log.warning("ERR_GATEWAY_AUTH: a token could not be verified (%s)", type(exc).__name__)
            await self._refuse(send, TokenRejected("the token could not be verified"))
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from starlette.authentication import AuthCredentials

        scope[self._key] = who
        scope["user"] = AuthenticatedUser(access)
        scope["auth"] = AuthCredentials(list(access.scopes))
        await self._authed_app(scope, receive, send)

    def _log_unavailable(self, exc: AuthUnavailable) -> None:
        now = time.monotonic()
        if now - self._unavailable_logged_at < UNAVAILABLE_LOG_EVERY_S:
            self._unavailable_unlogged += 1
            return
        more = self._unavailable_unlogged
        self._unavailable_logged_at, self._unavailable_unlogged = now, 0
        log.warning(
            "ERR_GATEWAY_AUTH_UNAVAILABLE: a request was answered 503: %s%s",
            exc.message,
            f" ({more} more since the last such line)" if more else "",
        )

    @staticmethod
    async def _unavailable(send: Any, retry_after_s: int) -> None:
        body = json.dumps(
            {
                "error": "temporarily_unavailable",
                "error_description": "the token cannot be verified now: the authorization server "
                "cannot be reached; try again later",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(retry_after_s).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _refuse(self, send: Any, exc: TokenRejected | None) -> None:
        parts: list[str] = []
        dpop_errors = ("invalid_dpop_proof", "use_dpop_nonce")
        scheme = "DPoP" if exc is not None and exc.error in dpop_errors else "Bearer"
        if exc is not None:
            error = exc.error if exc.error != "access_denied" else "insufficient_scope"
            parts += [f'error="{error}"', f'error_description="{_quoted(exc.reason)}"']
            if exc.scopes:
                parts.append(f'scope="{_quoted(" ".join(exc.scopes))}"')
        elif self.scopes_supported:
            parts.append(f'scope="{_quoted(" ".join(self.settings.scopes or self.scopes_supported))}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        status = exc.status if exc is not None else 401
        body = json.dumps(
            {
                "error": exc.error if exc is not None else "invalid_token",
                "error_description": exc.reason if exc is not None else "a bearer token is required",
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", (f"{scheme} " + ", ".join(parts)).encode()),
        ]
        if exc is not None and exc.error == "use_dpop_nonce" and self.nonces is not None:
            headers.append((b"dpop-nonce", self.nonces.current().encode("ascii")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
