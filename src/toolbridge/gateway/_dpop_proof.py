"""DPoP proofs (RFC 9449 section 4.3) checked by the gateway for DPoP-bound access tokens.

A token whose claims carry `cnf.jkt` (a JWT's own claims, or the introspection answer) is bound
to a key: it is accepted only as `Authorization: DPoP <token>` together with a `DPoP` header
holding one proof that

- is a JWT with `typ: dpop+jwt`, an asymmetric `alg` the gateway accepts, and a public `jwk`
  (no private part) whose RFC 7638 thumbprint is the token's `cnf.jkt`, and whose signature
  verifies with that key;
- says `htm` = the request's method and `htu` = the gateway's resource URL (no query or
  fragment, a trailing slash ignored), `ath` = the token's SHA-256, and an `iat` within
  `window_s` (default 300 s) of now;
- carries a `jti` never seen in that window (`ReplayCache`: in memory, per gateway process,
  bounded; replicas whose journal is one PostgreSQL database share the window there instead,
  `_replica_state`).

The same token as `Bearer` is refused (a bound token must never work without its key).

With `dpopNonce: true` the gateway also issues nonces (RFC 9449 section 9, `NonceIssuer`): a
proof must carry the gateway's current `nonce`, else the answer is 401 `use_dpop_nonce` with a
fresh one in `DPoP-Nonce` (toolbridge's client, like any RFC 9449 client, retries once with it).
A nonce is the time it was made with a MAC under a key of the gateway process: nothing is stored
per client, and a proof made long ago cannot be used later, whatever its `iat` says. A nonce is
accepted for `NONCE_LIFETIME_S` (a new one is handed out after half of that). Replicas that
share a PostgreSQL journal share the key (`_replica_state`), so each accepts the others' nonces;
otherwise each has its own, and a client moving to another replica is asked for its nonce once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections import OrderedDict
from typing import Any

from ._oauth import TokenRejected

__all__ = [
    "DEFAULT_PROOF_WINDOW_S",
    "MAX_PROOF_CHARS",
    "NONCE_LIFETIME_S",
    "NonceIssuer",
    "ReplayCache",
    "bound_key",
    "check_proof",
]

DEFAULT_PROOF_WINDOW_S = 300.0
"""How far a proof's `iat` may be from now, and how long its `jti` is remembered."""

MAX_PROOF_CHARS = 8192
"""A longer `DPoP` header is refused unread."""

PROOF_ALGORITHMS = ("ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512", "EdDSA")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _thumbprint(jwk: dict[str, Any]) -> str:
    members = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}.get(
        str(jwk.get("kty"))
    )
    if members is None or any(not isinstance(jwk.get(m), str) for m in members):
        raise TokenRejected("DPoP proof key is not a public EC, RSA or OKP key", error="invalid_dpop_proof")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def bound_key(claims: dict[str, Any] | None) -> str | None:
    """The token's `cnf.jkt`, if it is DPoP-bound (a malformed `cnf` is refused)."""
    if not claims or "cnf" not in claims:
        return None
    cnf = claims["cnf"]
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    if jkt is None:
        return None
    if not isinstance(jkt, str) or not jkt or len(jkt) > 128:
        raise TokenRejected("token has a malformed cnf.jkt")
    return jkt


class ReplayCache:
    """`jti`s of accepted proofs, each kept for the proof window; at most `size` (oldest dropped)."""

    def __init__(self, size: int = 100_000) -> None:
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._size = size

    def __len__(self) -> int:
        return len(self._seen)

    def first_use(self, jti: str, until: float, now: float) -> bool:
        """Record `jti`; False if it was seen and has not expired."""
        while self._seen:
            oldest, expiry = next(iter(self._seen.items()))
            if expiry > now and len(self._seen) < self._size:
                break
            del self._seen[oldest]
        seen_until = self._seen.get(jti)
        if seen_until is not None and seen_until > now:
            return False
        self._seen[jti] = until
        self._seen.move_to_end(jti)
        return True


NONCE_LIFETIME_S = 300.0
"""How long a nonce the gateway issued is accepted."""


class NonceIssuer:
    """The gateway's DPoP nonces: `base64url(made-at seconds, 8 bytes || HMAC-SHA256 under a
    process key, 16 bytes)`, checked without any state (see the module docstring).

    Args:
        key: the MAC key (a new random one when omitted).
        lifetime_s: how long a nonce is accepted.
    """

    def __init__(self, key: bytes | None = None, lifetime_s: float = NONCE_LIFETIME_S) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self.lifetime_s = lifetime_s
        self._current: tuple[int, str] | None = None

    def _mac(self, stamp: bytes) -> bytes:
        return hmac.new(self._key, stamp, hashlib.sha256).digest()[:16]

    def current(self, now: float | None = None) -> str:
        """The nonce to hand out now (renewed after half its lifetime)."""
        at = int(time.time() if now is None else now)
        if self._current is None or at - self._current[0] >= self.lifetime_s / 2:
            stamp = at.to_bytes(8, "big")
            self._current = (at, _b64url(stamp + self._mac(stamp)))
        return self._current[1]

    def valid(self, nonce: object, now: float | None = None) -> bool:
        """Whether `nonce` is one this issuer made, within its lifetime."""
        if not isinstance(nonce, str) or len(nonce) != 32:
            return False
        try:
            raw = base64.urlsafe_b64decode(nonce + "=" * (-len(nonce) % 4))
        except (ValueError, binascii.Error):
            return False
        if len(raw) != 24 or not hmac.compare_digest(self._mac(raw[:8]), raw[8:]):
            return False
        age = (time.time() if now is None else now) - int.from_bytes(raw[:8], "big")
        return -5.0 <= age <= self.lifetime_s


def check_proof(
    proof: str | None,
    *,
    method: str,
    url: str,
    token: str,
    jkt: str,
    replay: ReplayCache | None,
    window_s: float = DEFAULT_PROOF_WINDOW_S,
    now: float | None = None,
    nonces: NonceIssuer | None = None,
) -> tuple[str, float, float]:
    """Accept the proof of one request for a bound token, or raise; returns its `jti`, until
    when it is remembered, and now. With `replay` None the caller checks the `jti` itself (in the
    replicas' shared window, `_replica_state`).

    Raises:
        TokenRejected: 401 `invalid_dpop_proof` with the reason, or `use_dpop_nonce` when
            `nonces` is given and the proof lacks the gateway's current nonce.
    """
    import jwt

    def refuse(reason: str) -> TokenRejected:
        return TokenRejected(reason, error="invalid_dpop_proof")

    if not proof:
        raise refuse("a DPoP-bound token needs a DPoP proof")
    if len(proof) > MAX_PROOF_CHARS or "," in proof:
        raise refuse("malformed DPoP proof")
    try:
        header = jwt.get_unverified_header(proof)
    except jwt.PyJWTError:
        raise refuse("malformed DPoP proof") from None
    if header.get("typ") != "dpop+jwt":
        raise refuse("DPoP proof typ is not dpop+jwt")
    alg = header.get("alg")
    if alg not in PROOF_ALGORITHMS:
        raise refuse("DPoP proof algorithm not allowed")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict) or any(k in jwk for k in ("d", "p", "q", "dp", "dq", "qi")):
        raise refuse("DPoP proof jwk missing or private")
    if _thumbprint(jwk) != jkt:
        raise refuse("DPoP proof key is not the key the token is bound to")
    try:
        key = jwt.PyJWK(jwk, algorithm=str(alg)).key
        claims = jwt.decode(
            proof, key, algorithms=[str(alg)], options={"verify_aud": False, "verify_exp": False}
        )
    except (jwt.PyJWTError, ValueError, TypeError):
        raise refuse("DPoP proof signature does not verify") from None
    if claims.get("htm") != method:
        raise refuse("DPoP proof is for another method")
    htu = claims.get("htu")
    if not isinstance(htu, str) or "?" in htu or "#" in htu or not _same_url(htu, url):
        raise refuse("DPoP proof is for another URL")
    at = time.time() if now is None else now
    iat = claims.get("iat")
    if not isinstance(iat, int | float) or isinstance(iat, bool) or abs(at - float(iat)) > window_s:
        raise refuse("DPoP proof iat outside the accepted window")
    if claims.get("ath") != _b64url(hashlib.sha256(token.encode("ascii", "replace")).digest()):
        raise refuse("DPoP proof is for another access token")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > 256:
        raise refuse("DPoP proof lacks a jti")
    if nonces is not None and not nonces.valid(claims.get("nonce"), at):
        raise TokenRejected("the DPoP proof needs the gateway's current nonce", error="use_dpop_nonce")
    until = float(iat) + window_s
    if replay is not None and not replay.first_use(jti, until, at):
        raise refuse("DPoP proof replayed")
    return jti, until, at
