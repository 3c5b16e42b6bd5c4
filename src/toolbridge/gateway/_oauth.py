"""OAuth 2.1 resource-server mode: verifying the access tokens HTTP clients bring to the gateway.

Two ways to verify a token, either or both:

- **JWT / JWKS** (`JwtVerifier`): the token is a JWT signed by the authorization server. Its
  header's `alg` must be one of the allowed asymmetric algorithms (never `none`, never `HS*`: a
  symmetric key in the key set is ignored, so a token "signed" with the public key as an HMAC
  secret has no key to verify with); its `kid` names a key of the server's JWKS, fetched over
  HTTPS (plain HTTP only to a loopback address), cached for `jwks_ttl_s`, fetched again once when
  a token names an unknown `kid` (at most every `jwks_min_refetch_s`), every fetch bounded in
  time and size. Then the signature, `iss` (exactly the configured issuer), `aud` (contains the
  gateway's resource URL), `exp` (required) and `nbf`/`iat` (with a small leeway) are checked.
  Keys named in the token's own headers (`jku`, `x5u`, `jwk`) are never used.
- **Introspection** (`IntrospectionVerifier`, RFC 7662): the token is posted to the authorization
  server's introspection endpoint with the gateway's client credentials (HTTP Basic by default,
  `client_secret_basic`; or in the form, `client_secret_post`); the answer
  must be a JSON object with `active: true`, an `aud` that contains the resource URL, an `exp`
  in the future (when given), and `iss` equal to the issuer (when both are given); it is read up
  to `MAX_INTROSPECTION_BYTES`. Answers are cached by the token's SHA-256 (never the token) for
  `introspection_ttl_s` at most, in a bounded cache; a failed exchange (timeout, HTTP error,
  junk) is not cached.

A token proven bad raises `TokenRejected` (401). When the gateway cannot decide because the
authorization server cannot be asked (no answer in time, a connection failure, an HTTP error,
junk), `check` raises `AuthUnavailable` instead (`ERR_GATEWAY_AUTH_UNAVAILABLE`, answered 503 with
`Retry-After` by the gateway): the client's token may well be good, and dropping it would hide
the outage behind re-authentication. Keys fetched before keep working while the key set cannot
be fetched (for at most `jwks_stale_s` past their `jwks_ttl_s`); a token naming a `kid` that
is not among them, while the key set cannot be fetched, is "cannot decide", not "bad".

Both implement the SDK's `TokenVerifier` protocol (`verify_token(token) -> AccessToken | None`,
usable with the SDK's own servers) and `check(token) -> AccessToken`, which raises
`TokenRejected` with a short fixed reason ("token expired", "token not issued for this
resource", ...) that the gateway returns in its 401. A reason never quotes the token or anything
read from it, and no token is ever logged. (`verify_token` answers None for `AuthUnavailable`
too: the SDK's protocol has no third answer; use `check` to tell them apart.)

PyJWT (`pyjwt[crypto]`, a dependency of the `mcp` SDK; the `oauth` extra) is imported only when
a JWT verifier is built.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from .._extras import require
from ..errors import ConfigError, ToolbridgeError
from ..manifest.documents import endpoint_problem

if TYPE_CHECKING:
    import httpx2
    from mcp.server.auth.provider import AccessToken

__all__ = [
    "ALLOWED_ALGORITHMS",
    "CLIENT_AUTH_METHODS",
    "DEFAULT_ALGORITHMS",
    "AuthUnavailable",
    "IntrospectionVerifier",
    "JwtVerifier",
    "OAuthSettings",
    "OAuthVerifier",
    "TokenRejected",
]

log = logging.getLogger("toolbridge.gateway.oauth")

ALLOWED_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
"""The signature algorithms a JWT may use: asymmetric only (no `none`, no `HS*`)."""

DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
"""The JWT algorithms accepted unless the settings say otherwise."""

_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
MAX_TOKEN_CHARS = 16_384
"""A bearer token longer than this is refused before it is parsed."""
_MAX_KEYS = 100
MAX_INTROSPECTION_BYTES = 32_768
"""The largest introspection answer read (a larger one is junk: 503). Each cached answer keeps
its claims, so the cache holds at most `cache_size` times this."""
CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
"""How the gateway authenticates itself at the introspection endpoint (RFC 7591 names)."""


class TokenRejected(ToolbridgeError):
    """A bearer token was refused (`ERR_GATEWAY_AUTH`).

    Attributes:
        reason: a short fixed text for the client ("token expired"); never token content.
        status: the HTTP status to answer (401, or 403 for a missing scope or no identity).
        error: the RFC 6750 error code (`invalid_token`, `insufficient_scope`).
        scopes: for `insufficient_scope`, the scopes the request needs.
    """

    default_code = "ERR_GATEWAY_AUTH"

    def __init__(
        self,
        reason: str,
        *,
        status: int = 401,
        error: str = "invalid_token",
        scopes: Sequence[str] = (),
    ) -> None:
        super().__init__(f"token refused: {reason}", code="ERR_GATEWAY_AUTH")
        self.reason = reason
        self.status = status
        self.error = error
        self.scopes = tuple(scopes)


class AuthUnavailable(ToolbridgeError):
    """The gateway cannot decide on a token now (`ERR_GATEWAY_AUTH_UNAVAILABLE`).

    The authorization server's key set or introspection endpoint did not answer in time, failed,
    or answered junk. The message says which and why (never the token); the client gets 503
    with `Retry-After: retry_after_s` and a fixed description.
    """

    default_code = "ERR_GATEWAY_AUTH_UNAVAILABLE"

    def __init__(self, what: str, *, retry_after_s: float = 5.0) -> None:
        super().__init__(what, code="ERR_GATEWAY_AUTH_UNAVAILABLE")
        self.retry_after_s = max(1, min(300, math.ceil(retry_after_s)))


@dataclass(frozen=True)
class OAuthSettings:
    """How the gateway verifies OAuth access tokens (the `Gateway` kind's `oauth`).

    Attributes:
        resource: the gateway's resource URL (`https://gw.example.com/mcp`): a token's audience
            must contain it; it is also the `resource` of the protected-resource metadata.
        issuer: the authorization server's issuer; a JWT's `iss` must equal it (required with
            `jwks_url`), and it is advertised in the metadata.
        jwks_url: where the authorization server publishes its signing keys (JWT verification).
        introspection_url: its RFC 7662 introspection endpoint (opaque tokens, or all tokens
            when there is no `jwks_url`).
        client_id, client_secret: the gateway's credentials at the introspection endpoint.
        client_auth: how they are sent: `client_secret_basic` (HTTP Basic, the default) or
            `client_secret_post` (as `client_id` and `client_secret` in the form).
        authorization_servers: advertised in the metadata (default: the issuer).
        scopes: scopes every token needs (also advertised as `scopes_supported`).
        algorithms: the JWT algorithms accepted (a subset of `ALLOWED_ALGORITHMS`).
        leeway_s: clock skew allowed on `exp`, `nbf`, `iat`.
        jwks_ttl_s: how long fetched keys are used before being fetched again.
        jwks_stale_s: how much longer than `jwks_ttl_s` they stay in force while the key set
            cannot be fetched (then tokens are answered 503 until it can).
        jwks_min_refetch_s: the shortest time between two fetches of the key set (a flood of
            tokens with unknown `kid`s makes at most one fetch per this period).
        introspection_ttl_s: how long an introspection answer is reused (never past `exp`).
        jwt_cache_s: how long a verified JWT is taken again without checking its signature
            (never past `exp`; 0: every request is verified). A key removed from the key set
            stops its tokens after at most this long (and `jwks_ttl_s`).
        timeout_s: the longest one fetch or introspection may take.
        max_response_bytes: the largest key set read (and introspection answer, at most
            `MAX_INTROSPECTION_BYTES`).
        cache_size: the most introspection answers kept.
        introspections_per_minute: how many tokens unknown to the cache one client address may
            have introspected per minute (bursts of up to 10 more); past it the request is 429
            with `Retry-After`, and the authorization server is not asked (0: no limit).
        dpop_nonce: whether a DPoP proof must carry a nonce the gateway issued (RFC 9449
            section 9; `_dpop_proof.NonceIssuer`).
    """

    resource: str
    issuer: str | None = None
    jwks_url: str | None = None
    introspection_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_auth: str = "client_secret_basic"
    authorization_servers: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: float = 30.0
    jwks_ttl_s: float = 300.0
    jwks_stale_s: float = 3600.0
    jwks_min_refetch_s: float = 10.0
    introspection_ttl_s: float = 60.0
    jwt_cache_s: float = 30.0
    timeout_s: float = 5.0
    max_response_bytes: int = 262_144
    cache_size: int = 1024
    introspections_per_minute: float = 60.0
    dpop_nonce: bool = False

    def __post_init__(self) -> None:
        problems: list[str] = []
        resource = urlsplit(self.resource)
        if resource.scheme not in ("https", "http") or not resource.netloc or resource.fragment:
            problems.append("resource must be an http(s) URL without a fragment")
        if self.jwks_url is None and self.introspection_url is None:
            problems.append("give a jwks URL, an introspection URL, or both")
        if self.jwks_url is not None:
            problems.append(endpoint_problem(self.jwks_url, "the jwks URL") or "")
            if not self.issuer:
                problems.append("JWT verification needs the issuer")
        if self.introspection_url is not None:
            problems.append(endpoint_problem(self.introspection_url, "the introspection URL") or "")
            if not self.client_id or not self.client_secret:
                problems.append("introspection needs a client id and a client secret")
        if self.client_auth not in CLIENT_AUTH_METHODS:
            problems.append(f"client_auth must be one of {', '.join(CLIENT_AUTH_METHODS)}")
        bad = [a for a in self.algorithms if a not in ALLOWED_ALGORITHMS]
        if bad or not self.algorithms:
            problems.append(f"algorithms must be among {', '.join(ALLOWED_ALGORITHMS)}")
        if not self.issuer and not self.authorization_servers:
            problems.append("give the issuer or the authorization servers (for the metadata)")
        numbers = (
            self.leeway_s,
            self.jwks_ttl_s,
            self.jwks_stale_s,
            self.jwks_min_refetch_s,
            self.introspection_ttl_s,
            self.jwt_cache_s,
        )
        if any(n < 0 for n in numbers) or self.timeout_s <= 0:
            problems.append("times must not be negative")
        if self.max_response_bytes < 1024 or self.cache_size < 1:
            problems.append("max_response_bytes must be at least 1024 and cache_size at least 1")
        problems = [p for p in problems if p]
        if problems:
            raise ConfigError(f"OAuth settings: {'; '.join(problems)}", code="ERR_GATEWAY_CONFIG")

    @property
    def advertised_servers(self) -> tuple[str, ...]:
        return self.authorization_servers or ((self.issuer,) if self.issuer else ())


def audiences(resource: str) -> tuple[str, ...]:
    """The spellings of `resource` a token's audience may use (with or without a final slash)."""
    bare = resource.rstrip("/")
    return (bare, bare + "/")


class _FetchFailed(Exception):
    """A fetch from the authorization server failed (the text is for the log, not the client)."""


async def fetch_json(
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    timeout_s: float,
    max_bytes: int,
    **kwargs: Any,
) -> Any:
    """`method url` read as JSON, within `timeout_s` in all and at most `max_bytes` of body.

    Redirects are not followed; compressed bodies are not asked for.

    Raises:
        _FetchFailed: timeout, connection failure, a status other than 200, a body too big, junk.
    """
    import httpx2

    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    headers.update(kwargs.pop("headers", {}))
    body = bytearray()
    try:
        with anyio.fail_after(timeout_s):
            async with client.stream(method, url, headers=headers, **kwargs) as response:
                if response.status_code != 200:
                    raise _FetchFailed(f"HTTP {response.status_code}")
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > max_bytes:
                    raise _FetchFailed("the answer is too big")
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > max_bytes:
                        raise _FetchFailed("the answer is too big")
    except TimeoutError:
        raise _FetchFailed(f"no answer within {timeout_s:g} s") from None
    except httpx2.HTTPError as exc:
        raise _FetchFailed(f"HTTP failure ({type(exc).__name__})") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise _FetchFailed("the answer is not JSON") from None


def _new_http_client() -> httpx2.AsyncClient:
    import httpx2

    return httpx2.AsyncClient(follow_redirects=False, timeout=httpx2.Timeout(10.0))


def _scopes_of(claims: Mapping[str, Any]) -> list[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return [s for s in scope.split() if s][:256]
    scp = claims.get("scp")
    if isinstance(scp, str):
        return [s for s in scp.split() if s][:256]
    if isinstance(scp, list):
        return [s for s in scp if isinstance(s, str)][:256]
    return []


def _access_token(token: str, claims: Mapping[str, Any], resource: str) -> AccessToken:
    from mcp.server.auth.provider import AccessToken

    subject = claims.get("sub")
    client_id = claims.get("client_id") or claims.get("azp") or subject or "unknown"
    exp = claims.get("exp")
    return AccessToken(
        token=token,
        client_id=str(client_id)[:256],
        scopes=_scopes_of(claims),
        expires_at=int(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None,
        resource=resource.rstrip("/"),
        subject=str(subject)[:256] if subject is not None else None,
        claims=dict(claims),
    )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class _Outcomes:
    """Verification outcomes by the token's SHA-256 (never the token), each until its deadline,
    the most recent `size` kept. An outcome is an `AccessToken` (without its token) or a reason."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[float, AccessToken | str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def digests(self) -> list[str]:
        return list(self._items)

    def get(self, key: str) -> AccessToken | str | None:
        found = self._items.get(key)
        if found is None:
            return None
        if found[0] <= time.monotonic():
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return found[1]

    def put(self, key: str, outcome: AccessToken | str, ttl: float) -> None:
        if ttl <= 0:
            return
        if not isinstance(outcome, str):
            outcome = outcome.model_copy(update={"token": ""})
        self._items[key] = (time.monotonic() + ttl, outcome)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


def _reuse(outcome: AccessToken | str, token: str, leeway_s: float) -> AccessToken:
    """A remembered outcome for `token`: its access info again, or its refusal again."""
    if isinstance(outcome, str):
        raise TokenRejected(outcome)
    if outcome.expires_at is not None and outcome.expires_at <= time.time() - leeway_s:
        raise TokenRejected("token expired")
    return outcome.model_copy(update={"token": token})


class _Verifier:
    """The SDK's `TokenVerifier` face of a verifier whose `check` raises `TokenRejected`."""

    async def check(self, token: str) -> AccessToken:
        raise NotImplementedError

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's `TokenVerifier`: the token's access info, or None when it is refused or
        cannot be verified now (`check` tells the two apart)."""
        try:
            return await self.check(token)
        except (TokenRejected, AuthUnavailable):
            return None


class _Closable:
    """Owns one HTTP client, made on first use, closed by `aclose()`."""

    def __init__(self) -> None:
        self._http: httpx2.AsyncClient | None = None

    def _client(self) -> httpx2.AsyncClient:
        if self._http is None:
            self._http = _new_http_client()
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()


class JwksCache(_Closable):
    """The authorization server's signing keys, fetched when needed (see the module docstring)."""

    def __init__(self, settings: OAuthSettings) -> None:
        super().__init__()
        assert settings.jwks_url is not None
        self._settings = settings
        self._url = settings.jwks_url
        self._keys: dict[str | None, Any] = {}
        self._fetched_at = -float("inf")
        self._attempted_at = -float("inf")
        self._failure: str | None = None
        """Why the last fetch failed (None: it succeeded, or none was made yet)."""
        self._lock = anyio.Lock()

    async def _refresh(self) -> None:
        """Fetch the key set, unless one fetch began while waiting or less than
        `jwks_min_refetch_s` ago (a failing or hanging server is not asked for each token)."""
        started = time.monotonic()
        async with self._lock:
            if self._attempted_at >= started:
                return  # another request fetched while this one waited
            now = time.monotonic()
            if now - self._attempted_at < self._settings.jwks_min_refetch_s:
                return
            self._attempted_at = now
            try:
                data = await fetch_json(
                    self._client(),
                    "GET",
                    self._url,
                    timeout_s=self._settings.timeout_s,
                    max_bytes=self._settings.max_response_bytes,
                )
                keys = _parse_jwks(data)
            except _FetchFailed as exc:
                self._failure = str(exc)
                if self._keys:  # the keys in force, if any, stay: say so, or the outage is hidden
                    log.warning(
                        "ERR_GATEWAY_AUTH_UNAVAILABLE: the signing keys could not be fetched (%s); "
                        "the keys fetched %.0f s ago stay in force",
                        exc,
                        now - self._fetched_at,
                    )
                return
            self._keys = keys
            self._fetched_at = time.monotonic()
            self._failure = None

    def _unavailable(self) -> AuthUnavailable:
        wait = self._settings.jwks_min_refetch_s - (time.monotonic() - self._attempted_at)
        why = self._failure or "no answer yet"
        return AuthUnavailable(
            f"the signing keys could not be fetched ({why})",
            retry_after_s=max(wait, 1.0),
        )

    async def key(self, kid: str | None, alg: str) -> Any:
        """The key `kid` names (a `PyJWK`).

        Raises:
            TokenRejected: no such key in a key set fetched successfully (after one fresh fetch).
            AuthUnavailable: the key set cannot be fetched and the keys in force (if any) do not
                decide: none of them is `kid`, or they are older than `jwks_ttl_s + jwks_stale_s`.
        """
        s = self._settings
        if time.monotonic() - self._fetched_at > s.jwks_ttl_s:
            await self._refresh()
        found = self._find(kid, alg)
        if found is None and self._fetched_at > -float("inf"):
            await self._refresh()
            found = self._find(kid, alg)
        if self._failure is not None:
            too_old = time.monotonic() - self._fetched_at > s.jwks_ttl_s + s.jwks_stale_s
            if found is None or too_old:
                raise self._unavailable()
        if found is None:
            if self._fetched_at == -float("inf"):
                raise self._unavailable()
            raise TokenRejected("unknown signing key")
        return found

    def _find(self, kid: str | None, alg: str) -> Any:
        if kid is not None:
            return self._keys.get(kid)
        usable = [k for k in self._keys.values() if _key_fits(k, alg)]
        return usable[0] if len(usable) == 1 else None


def _key_fits(key: Any, alg: str) -> bool:
    data = key._jwk_data
    if data.get("kty") != _KEY_TYPES.get(alg[:2]):
        return False
    if alg in _EC_CURVES and data.get("crv") != _EC_CURVES[alg]:
        return False
    return data.get("alg") in (None, alg)


def _parse_jwks(data: Any) -> dict[str | None, Any]:
    """The usable public signing keys of a JWKS document, by `kid`.

    Symmetric (`oct`) keys, encryption keys and keys that do not parse are left out.

    Raises:
        _FetchFailed: the document is not a key set.
    """
    import jwt

    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise _FetchFailed("the answer is not a JWKS document")
    keys: dict[str | None, Any] = {}
    for item in data["keys"][:_MAX_KEYS]:
        if not isinstance(item, dict) or item.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if item.get("use") not in (None, "sig") or "d" in item:
            continue
        alg = item.get("alg")
        if alg is not None and alg not in ALLOWED_ALGORITHMS:
            continue
        kid = item.get("kid")
        if kid is not None and not isinstance(kid, str):
            continue
        try:
            keys[kid] = jwt.PyJWK(item)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue
    return keys


def _b64_json(part: str) -> Any:
    padded = part + "=" * (-len(part) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def looks_like_jwt(token: str) -> bool:
    parts = token.split(".")
    if len(parts) != 3:
        return False
    try:
        return isinstance(_b64_json(parts[0]), dict)
    except (ValueError, UnicodeError, RecursionError):
        return False


class JwtVerifier(_Closable, _Verifier):
    """Verifies JWT access tokens against the authorization server's JWKS (module docstring)."""

    def __init__(self, settings: OAuthSettings) -> None:
        super().__init__()
        require("oauth", "jwt", "JWT verification")  # fail here, at start, when PyJWT is missing

        if settings.jwks_url is None:
            raise ConfigError("JWT verification needs the jwks URL", code="ERR_GATEWAY_CONFIG")
        self.settings = settings
        self.jwks = JwksCache(settings)
        self._verified = _Outcomes(settings.cache_size)

    async def aclose(self) -> None:
        await self.jwks.aclose()

    async def check(self, token: str) -> AccessToken:
        """The verified token's access info.

        Raises:
            TokenRejected: why the token is refused.
            AuthUnavailable: the key set cannot be fetched and the keys in force do not decide.
        """
        import jwt

        s = self.settings
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejected("token too long")
        key_of_token = _digest(token)
        remembered = self._verified.get(key_of_token) if s.jwt_cache_s > 0 else None
        if remembered is not None:
            return _reuse(remembered, token, s.leeway_s)
        if not looks_like_jwt(token):
            raise TokenRejected("malformed token")
        header = _b64_json(token.split(".", 1)[0])  # a dict: looks_like_jwt checked it
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in s.algorithms:
            raise TokenRejected("token algorithm not allowed")
        if "crit" in header:
            raise TokenRejected("token has critical headers")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("malformed token")
        key = await self.jwks.key(kid, alg)
        if not _key_fits(key, alg):
            raise TokenRejected("token algorithm does not match its key")
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=list(audiences(s.resource)),
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={"require": ["exp", "iss", "aud"], "strict_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("token expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("token not yet valid") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected("token not issued for this resource") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("token issuer not accepted") from None
        except jwt.MissingRequiredClaimError:
            raise TokenRejected("token lacks a required claim") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("bad token signature") from None
        except (jwt.PyJWTError, ValueError, TypeError):
            raise TokenRejected("malformed token") from None
        if not isinstance(claims, dict):
            raise TokenRejected("malformed token")
        verified = _access_token(token, claims, s.resource)
        if verified.expires_at is not None:
            ttl = min(s.jwt_cache_s, verified.expires_at + s.leeway_s - time.time())
            self._verified.put(key_of_token, verified, ttl)
        return verified


class IntrospectionVerifier(_Closable, _Verifier):
    """Verifies tokens at the authorization server's introspection endpoint (RFC 7662)."""

    def __init__(self, settings: OAuthSettings) -> None:
        super().__init__()
        if settings.introspection_url is None or not settings.client_id or not settings.client_secret:
            raise ConfigError(
                "introspection needs its URL, a client id and a client secret",
                code="ERR_GATEWAY_CONFIG",
            )
        self.settings = settings
        self._cache = _Outcomes(settings.cache_size)
        self._limiter = anyio.CapacityLimiter(32)
        self.requests = 0

    def knows(self, token: str) -> bool:
        """Whether the token's outcome is cached (checking it then asks nobody)."""
        return self._cache.get(_digest(token)) is not None

    async def check(self, token: str) -> AccessToken:
        """The token's access info, from the cache or the introspection endpoint.

        Raises:
            TokenRejected: inactive, not for this resource, expired, or not yet valid.
            AuthUnavailable: the endpoint did not answer in time, failed, or answered junk.
        """
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejected("token too long")
        key = _digest(token)
        cached = self._cache.get(key)
        if cached is not None:
            return _reuse(cached, token, self.settings.leeway_s)
        try:
            answer = await self._introspect(token)
            outcome = self._judge(token, answer)
        except _FetchFailed as exc:  # not cached: once the server is well, the token is asked again
            raise AuthUnavailable(
                f"the token could not be introspected ({exc})", retry_after_s=self.settings.timeout_s
            ) from None
        except TokenRejected as exc:
            self._cache.put(key, exc.reason, self.settings.introspection_ttl_s)
            raise
        ttl = self.settings.introspection_ttl_s
        if outcome.expires_at is not None:
            ttl = min(ttl, outcome.expires_at + self.settings.leeway_s - time.time())
        self._cache.put(key, outcome, ttl)
        return outcome

    async def _introspect(self, token: str) -> Any:
        """The endpoint's answer, within `timeout_s` in all (waiting for a turn included: at most
        32 introspections are in flight at once)."""
        from urllib.parse import quote

        s = self.settings
        assert s.introspection_url is not None and s.client_id and s.client_secret
        form = {"token": token, "token_type_hint": "access_token"}
        headers: dict[str, str] = {}
        if s.client_auth == "client_secret_post":
            form.update(client_id=s.client_id, client_secret=s.client_secret)
        else:
            basic = base64.b64encode(
                f"{quote(s.client_id, safe='')}:{quote(s.client_secret, safe='')}".encode()
            ).decode()
            headers["Authorization"] = f"Basic {basic}"
        started = time.monotonic()
        try:
            with anyio.fail_after(s.timeout_s):
                async with self._limiter:
                    self.requests += 1
                    return await fetch_json(
                        self._client(),
                        "POST",
                        s.introspection_url,
                        timeout_s=max(0.001, s.timeout_s - (time.monotonic() - started)),
                        max_bytes=min(s.max_response_bytes, MAX_INTROSPECTION_BYTES),
                        data=form,
                        headers=headers,
                    )
        except TimeoutError:
            raise _FetchFailed(f"no answer within {s.timeout_s:g} s") from None

    def _judge(self, token: str, answer: Any) -> AccessToken:
        """The access info of an introspection answer.

        Raises:
            TokenRejected: the answer says the token is not good here.
            _FetchFailed: the answer is not a well-formed RFC 7662 answer (junk: cannot decide).
        """
        s = self.settings
        if not isinstance(answer, dict) or not isinstance(answer.get("active"), bool):
            raise _FetchFailed("the answer is not an introspection answer")
        if answer["active"] is not True:
            raise TokenRejected("token inactive")
        for name in ("sub", "client_id", "scope", "username", "iss"):
            if name in answer and not isinstance(answer[name], str):
                raise _FetchFailed(f"malformed introspection answer (`{name}`)")
        for name in ("exp", "nbf", "iat"):
            value = answer.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise _FetchFailed(f"malformed introspection answer (`{name}`)")
        aud = answer.get("aud")
        given = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not set(audiences(s.resource)) & {a for a in given if isinstance(a, str)}:
            raise TokenRejected("token not issued for this resource")
        now = time.time()
        for name, late in (("exp", True), ("nbf", False), ("iat", False)):
            value = answer.get(name)
            if value is None:
                continue
            if late and value <= now - s.leeway_s:
                raise TokenRejected("token expired")
            if not late and value > now + s.leeway_s:
                raise TokenRejected("token not yet valid")
        iss = answer.get("iss")
        if s.issuer and iss is not None and iss != s.issuer:
            raise TokenRejected("token issuer not accepted")
        return _access_token(token, answer, s.resource)


class OAuthVerifier(_Verifier):
    """JWTs by the key set, everything else (or everything) by introspection, as configured."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self.jwt = JwtVerifier(settings) if settings.jwks_url else None
        self.introspection = IntrospectionVerifier(settings) if settings.introspection_url else None

    def would_introspect(self, token: str) -> bool:
        """Whether checking the token would call the introspection endpoint (not cached, not a JWT
        the key set verifies)."""
        if self.introspection is None or (self.jwt is not None and looks_like_jwt(token)):
            return False
        return not self.introspection.knows(token)

    async def check(self, token: str) -> AccessToken:
        """The token's access info.

        Raises:
            TokenRejected: why the token is refused.
            AuthUnavailable: the authorization server cannot be asked now.
        """
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejected("token too long")
        if self.jwt is not None and (self.introspection is None or looks_like_jwt(token)):
            return await self.jwt.check(token)
        assert self.introspection is not None
        return await self.introspection.check(token)

    async def aclose(self) -> None:
        for part in (self.jwt, self.introspection):
            if part is not None:
                await part.aclose()
