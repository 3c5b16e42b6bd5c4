"""DPoP (RFC 9449): sender-constrained access tokens for `HttpClient`, around the SDK's OAuth flow.

A bearer token works for whoever holds it; a DPoP-bound token works only with a proof signed by
the key it was issued to, so a token copied out of a log or a proxy is useless. The official
SDK's OAuth providers (`mcp.client.auth`) send bearer tokens only. `DPoPAuth` wraps any of them
(`oauth_auth`, `client_credentials_auth`, `workload_identity_auth` return it wrapped) and adds,
without changing their flow:

- a proof (`DPoP` header, a JWT of type `dpop+jwt` signed with the client's key, carrying the
  public key as `jwk`) on every token request (authorization code, refresh, client credentials,
  JWT bearer), with `htm`, `htu` (the URL without query and fragment), `iat` and a fresh `jti`;
- on every request to the MCP server holding a DPoP-bound token: `Authorization: DPoP <token>`
  (not `Bearer`) and a fresh proof that also carries `ath` (the token's SHA-256);
- the nonce dance (RFC 9449 sections 8 and 9): when the authorization server answers
  `400 use_dpop_nonce` or the MCP server `401 ... error="use_dpop_nonce"` with a `DPoP-Nonce`
  header, the request is sent once more with a new proof carrying that nonce; the last nonce of
  each origin is reused, and replaced by any `DPoP-Nonce` a later answer brings. A second
  challenge for the same request is passed on as the answer (no loop).

When: `dpop="auto"` (the default) uses DPoP when the authorization server's metadata lists
`ES256` in `dpop_signing_alg_values_supported`; `"always"` sends proofs even if it does not say
so; `"off"` never. A token is presented with the DPoP scheme only if the authorization server
issued it as `token_type: DPoP`; a bearer token stays a bearer token.

The key: one P-256 key (`ES256`) per client, made at the first token request and kept for as
long as the tokens it bound (refresh tokens of public clients are bound too). It lives in a
`DPoPKeyStore`: `MemoryDPoPKeyStore` by default (a restarted process gets a new key and a new
token), or any object with the two methods (a file, a secret manager, a hardware key via your
own `DPoPKey` subclass). The private key never leaves the process through this module.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

if TYPE_CHECKING:
    from mcp.client.auth.oauth2 import OAuthContext

__all__ = [
    "DPOP_ALGORITHM",
    "DPoPAuth",
    "DPoPKey",
    "DPoPKeyStore",
    "DPoPMode",
    "MemoryDPoPKeyStore",
    "jwk_thumbprint",
]

logger = logging.getLogger("toolbridge.clients.dpop")

DPoPMode = Literal["auto", "always", "off"]
"""`auto`: when the authorization server advertises ES256 for DPoP; `always`; `off`."""

DPOP_ALGORITHM = "ES256"
"""The proof algorithm: ECDSA P-256 with SHA-256, the one every DPoP server must accept."""

MAX_NONCE_CHARS = 1024
"""A `DPoP-Nonce` longer than this (or not printable ASCII) is ignored: it would be echoed in
every later proof."""


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def access_token_hash(token: str) -> str:
    """The `ath` claim: base64url(SHA-256(ASCII of the access token))."""
    return b64url(hashlib.sha256(token.encode("ascii", "replace")).digest())


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 SHA-256 thumbprint of a public EC, RSA or OKP JWK (what `cnf.jkt` holds)."""
    members = {
        "EC": ("crv", "kty", "x", "y"),
        "RSA": ("e", "kty", "n"),
        "OKP": ("crv", "kty", "x"),
    }.get(str(jwk.get("kty")))
    if members is None or any(not isinstance(jwk.get(m), str) for m in members):
        raise ValueError("not a public EC, RSA or OKP JWK")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def proof_url(url: httpx2.URL) -> str:
    """The `htu` of a request: its URL without query and fragment (RFC 9449 section 4.2)."""
    return str(url.copy_with(query=None, fragment=None))


class DPoPKey:
    """A client's DPoP key pair (P-256) and the hashes of the access tokens bound to it.

    Args:
        private_key: the key; a new one is made when omitted.
    """

    algorithm = DPOP_ALGORITHM

    def __init__(self, private_key: ec.EllipticCurvePrivateKey | None = None) -> None:
        key = private_key if private_key is not None else ec.generate_private_key(ec.SECP256R1())
        if not isinstance(key.curve, ec.SECP256R1):
            raise ValueError("a DPoP key must be a P-256 (ES256) key")
        self._key = key
        numbers = key.public_key().public_numbers()
        self.public_jwk: dict[str, str] = {
            "kty": "EC",
            "crv": "P-256",
            "x": b64url(numbers.x.to_bytes(32, "big")),
            "y": b64url(numbers.y.to_bytes(32, "big")),
        }
        self.thumbprint = jwk_thumbprint(self.public_jwk)
        self.bound_tokens: set[str] = set()
        """`ath` values of the access tokens the authorization server bound to this key."""

    def __repr__(self) -> str:
        return f"DPoPKey(jkt={self.thumbprint})"

    def private_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM, for a key store of your own."""
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @classmethod
    def from_pem(cls, pem: bytes) -> DPoPKey:
        """A key loaded from `private_pem()`'s output."""
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("a DPoP key must be an EC private key")
        return cls(key)

    def proof(
        self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None
    ) -> str:
        """A fresh proof for one request (a new `jti` each time)."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(18),
            "htm": method.upper(),
            "htu": url,
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(
            claims, self._key, algorithm=self.algorithm, headers={"typ": "dpop+jwt", "jwk": self.public_jwk}
        )


@runtime_checkable
class DPoPKeyStore(Protocol):
    """Where a client's DPoP key lives between requests (and, if you wish, between processes)."""

    async def get_key(self) -> DPoPKey | None:
        """The stored key, if any."""
        ...

    async def set_key(self, key: DPoPKey) -> None:
        """Store the key (called again whenever a token is bound to it)."""
        ...


class MemoryDPoPKeyStore:
    """The key kept in memory for the life of the object (the default)."""

    def __init__(self, key: DPoPKey | None = None) -> None:
        self._key = key

    async def get_key(self) -> DPoPKey | None:
        """The stored key, if any."""
        return self._key

    async def set_key(self, key: DPoPKey) -> None:
        """Replace the stored key."""
        self._key = key


def _usable_nonce(value: str | None) -> str | None:
    if value is None or not value or len(value) > MAX_NONCE_CHARS:
        return None
    if not all(0x21 <= ord(c) <= 0x7E for c in value):
        return None
    return value


def _origin(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"


def _same_issuer(issuer: str) -> str:
    return issuer.rstrip("/")


def _is_token_request(request: httpx2.Request) -> bool:
    if request.method != "POST":
        return False
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return False
    body = request.content
    return body.startswith(b"grant_type=") or b"&grant_type=" in body


def _json_error(body: bytes) -> str | None:
    try:
        data = json.loads(body[:65536])
    except (ValueError, UnicodeDecodeError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else None


@runtime_checkable
class _WithOAuthContext(Protocol):
    """The SDK's OAuth provider (`OAuthClientProvider`): its flow's state, metadata included."""

    context: OAuthContext


class DPoPAuth(httpx2.Auth):
    """An SDK OAuth provider with DPoP added (see the module's documentation).

    Args:
        inner: the SDK provider (`mcp.client.auth.OAuthClientProvider` or a subclass).
        mode: `auto`, `always` or `off`.
        key_store: where the key lives (default: `MemoryDPoPKeyStore()`).
    """

    requires_response_body = True

    def __init__(
        self, inner: httpx2.Auth, *, mode: DPoPMode = "auto", key_store: DPoPKeyStore | None = None
    ) -> None:
        if mode not in ("auto", "always", "off"):
            raise ValueError(f"dpop must be 'auto', 'always' or 'off', not {mode!r}")
        self.inner = inner
        self.mode: DPoPMode = mode
        self.key_store: DPoPKeyStore = key_store if key_store is not None else MemoryDPoPKeyStore()
        self._nonces: dict[str, str] = {}
        self._as_algs: dict[str, bool] = {}
        self.proofs_sent = 0
        """Proofs sent so far (token and resource requests)."""

    def __getattr__(self, name: str) -> Any:
        # The SDK provider's attributes (`context`, ...) stay reachable through the wrapper.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _advertised(self) -> bool:
        if self.mode == "always":
            return True
        if self.mode == "off":
            return False
        inner = self.inner
        context = inner.context if isinstance(inner, _WithOAuthContext) else None
        if context is None:
            return False
        metadata = context.oauth_metadata
        issuer = metadata.issuer if metadata is not None else None
        if issuer is not None and self._as_algs.get(_same_issuer(str(issuer)), False):
            return True
        # RFC 9728: the resource itself may require DPoP-bound tokens.
        prm = context.protected_resource_metadata
        if prm is None:
            return False
        algs = prm.dpop_signing_alg_values_supported or []
        return bool(prm.dpop_bound_access_tokens_required) and DPOP_ALGORITHM in algs

    async def _note_metadata(self, outgoing: httpx2.Request, response: httpx2.Response) -> None:
        """Remember whether an authorization server's metadata offers ES256 for DPoP.

        The SDK's metadata model drops `dpop_signing_alg_values_supported`, so the document is
        read here as it passes (bounded: the SDK has read the body already).
        """
        path = outgoing.url.path
        if outgoing.method != "GET" or response.status_code != 200 or "/.well-known/" not in path:
            return
        if "oauth-authorization-server" not in path and "openid-configuration" not in path:
            return
        try:
            data = json.loads((await response.aread())[:1_048_576])
        except (ValueError, UnicodeDecodeError):
            return
        if not isinstance(data, dict) or not isinstance(data.get("issuer"), str):
            return
        algs = data.get("dpop_signing_alg_values_supported")
        self._as_algs[_same_issuer(data["issuer"])] = isinstance(algs, list) and DPOP_ALGORITHM in algs

    async def _key(self) -> DPoPKey:
        key = await self.key_store.get_key()
        if key is None:
            key = DPoPKey()
            await self.key_store.set_key(key)
        return key

    def _sign(self, request: httpx2.Request, key: DPoPKey, access_token: str | None) -> None:
        request.headers["DPoP"] = key.proof(
            request.method,
            proof_url(request.url),
            access_token=access_token,
            nonce=self._nonces.get(_origin(request.url)),
        )
        self.proofs_sent += 1

    def _learn_nonce(self, response: httpx2.Response) -> bool:
        nonce = _usable_nonce(response.headers.get("dpop-nonce"))
        if nonce is None:
            return False
        origin = _origin(response.request.url)
        changed = self._nonces.get(origin) != nonce
        self._nonces[origin] = nonce
        return changed

    async def _bound_token(self, request: httpx2.Request) -> str | None:
        """The access token of a resource request, if it is one bound to our key."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "dpop") or not token:
            return None
        key = await self.key_store.get_key()
        if key is None or access_token_hash(token) not in key.bound_tokens:
            return None
        return token

    async def _token_answer(self, response: httpx2.Response, key: DPoPKey) -> httpx2.Response:
        """Note a DPoP-bound token and hand the SDK an answer it parses (it knows only `Bearer`)."""
        if response.status_code not in (200, 201):
            return response
        try:
            data = json.loads(await response.aread())
        except (ValueError, UnicodeDecodeError):
            return response
        if not isinstance(data, dict) or str(data.get("token_type", "")).lower() != "dpop":
            return response
        token = data.get("access_token")
        if isinstance(token, str) and token:
            key.bound_tokens.add(access_token_hash(token.rstrip("\r\n")))
            await self.key_store.set_key(key)
        data["token_type"] = "Bearer"
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-encoding")
        }
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=json.dumps(data).encode("utf-8"),
            request=response.request,
        )

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self.inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                signed = await self._prepare(outgoing, request)
                response = yield outgoing
                await self._note_metadata(outgoing, response)
                if signed is not None:
                    if self._learn_nonce(response) and await self._is_nonce_challenge(signed, response):
                        await self._prepare(outgoing, request)  # once more, with the nonce
                        response = yield outgoing
                        self._learn_nonce(response)
                    if signed == "token":
                        response = await self._token_answer(response, await self._key())
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    async def _prepare(
        self, outgoing: httpx2.Request, request: httpx2.Request
    ) -> Literal["token", "resource"] | None:
        """Add a proof to a token request or a resource request with a bound token; say which."""
        if outgoing is request:
            token = await self._bound_token(outgoing)
            if token is None:
                outgoing.headers.pop("DPoP", None)
                return None
            outgoing.headers["Authorization"] = f"DPoP {token}"
            self._sign(outgoing, await self._key(), token)
            return "resource"
        if _is_token_request(outgoing) and self._advertised():
            self._sign(outgoing, await self._key(), None)
            return "token"
        return None

    @staticmethod
    async def _is_nonce_challenge(kind: str, response: httpx2.Response) -> bool:
        if kind == "token":
            return response.status_code == 400 and _json_error(await response.aread()) == "use_dpop_nonce"
        return response.status_code == 401 and "use_dpop_nonce" in response.headers.get(
            "www-authenticate", ""
        )
