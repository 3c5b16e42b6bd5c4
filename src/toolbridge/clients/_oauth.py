"""OAuth 2.1 for `HttpClient`, built on the official SDK's auth support.

An MCP server reached over Streamable HTTP may answer `401` with a `WWW-Authenticate` header
that points to its protected-resource metadata. Everything after that (metadata discovery, client
registration, PKCE, the token request, refresh, scope step-up on `403 insufficient_scope`) is done
by the SDK's `httpx2.Auth` implementations in `mcp.client.auth`. This module only chooses and
configures them, so that a caller writes one line:

```python
client = HttpClient(url, auth=oauth_auth(url, storage=FileTokenStorage("~/.cache/app/tokens.json")))
```

Three grants are offered:

- `oauth_auth`: the authorization-code grant with PKCE (S256). The client registers itself
  dynamically (RFC 7591), or uses a URL as its client id when the authorization server supports
  client-id metadata documents and `client_metadata_url` is given, or uses credentials registered
  beforehand (`client_id` / `client_secret`). How the person (or a test server) approves the
  request is up to the `authorize` callback: it receives the authorization URL and returns the
  `code` and `state` of the redirect. The default, `headless_authorizer()`, fetches the URL
  without following redirects and reads the code from the `Location` header: that is right for
  an authorization server that approves at once (test servers, pre-consented clients); an app
  with a person in the loop passes its own callback (open a browser, run a local listener).
- `client_credentials_auth`: the client-credentials grant for machines, with a client secret
  (`client_secret_basic` or `client_secret_post`) or a signed JWT assertion (`private_key_jwt`,
  RFC 7523).
- `identity_assertion_auth`: enterprise-managed authorization (SEP-990): an identity assertion
  grant (ID-JAG), obtained from the enterprise identity provider (`id_jag_from_idp` does that
  RFC 8693 token exchange), is presented to the MCP authorization server (RFC 7523 jwt-bearer).
- Refresh tokens are used automatically by the SDK whenever a stored token has expired.

Tokens and the client's registration live in a `TokenStorage` (the SDK's protocol): the
in-memory `MemoryTokenStorage` by default, or `FileTokenStorage(path)`, a JSON file written
atomically with mode 0600. Secrets are never logged by this module, and every credential the
helpers see (client secrets, ID tokens, the access and refresh tokens and client secret the flow
stores) is registered with the redactor (`toolbridge.redact`), so it is scrubbed from errors and
logs.

Failures inside the flow surface from the SDK as `mcp.client.auth.OAuthFlowError`,
`OAuthTokenError` or `OAuthRegistrationError`; `HttpClient` translates them (see
`auth_error_to_toolbridge`) into `TransportError` with code `ERR_MCP_AUTH`.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, quote, urljoin, urlparse

import anyio
import httpx2
from mcp.client.auth import (
    OAuthClientProvider,
    OAuthFlowError,
    OAuthRegistrationError,
    OAuthTokenError,
    TokenStorage,
)
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from ..errors import ConfigError, ToolbridgeError, TransportError
from ..redact import register_secret
from ._dpop import DPoPAuth, DPoPKeyStore, DPoPMode
from ._errors import AUTH_ERROR_CODE

__all__ = [
    "AUTH_ERROR_CODE",
    "AuthorizationCodeResult",
    "Authorizer",
    "FileTokenStorage",
    "MemoryTokenStorage",
    "TokenStorage",
    "auth_error_to_toolbridge",
    "client_credentials_auth",
    "headless_authorizer",
    "id_jag_from_idp",
    "identity_assertion_auth",
    "oauth_auth",
]


DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"
"""Where the authorization server sends the browser back to; the headless authorizer never
connects there, it only reads the address from the `Location` header."""

Authorizer = Callable[[str], Awaitable[AuthorizationCodeResult]]
"""Given the authorization URL, obtain the redirect's `code`, `state` (and `iss`, if sent)."""


class MemoryTokenStorage:
    """Tokens and client registration kept in memory for the life of the object."""

    def __init__(
        self,
        tokens: OAuthToken | None = None,
        client_info: OAuthClientInformationFull | None = None,
    ) -> None:
        self._tokens = tokens
        self._client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any."""
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Replace the stored tokens."""
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, if any."""
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Replace the stored client registration."""
        self._client_info = client_info


class FileTokenStorage:
    """Tokens and client registration in one JSON file, readable by the owner only.

    The file holds `{"tokens": {...}, "client_info": {...}}`. Every write goes to a temporary
    file in the same directory (mode 0600) that then replaces the old one, so a crash never
    leaves half a file. A missing file means "nothing stored yet".

    Args:
        path: where the file lives; `~` is expanded; parent directories are created.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.expanduser(os.fspath(path)))
        self._lock = anyio.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"token file {self.path} is not valid JSON: {exc}", details={"path": str(self.path)}
            ) from exc
        if not isinstance(data, dict):
            raise ConfigError(
                f"token file {self.path} does not hold a JSON object", details={"path": str(self.path)}
            )
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def _update(self, key: str, value: dict[str, Any]) -> None:
        async with self._lock:
            data = await anyio.to_thread.run_sync(self._read)
            data[key] = value
            await anyio.to_thread.run_sync(self._write, data)

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, if any.

        Raises:
            ConfigError: the file exists but is not a JSON object.
        """
        raw = (await anyio.to_thread.run_sync(self._read)).get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store new tokens (the client registration is kept)."""
        await self._update("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, if any.

        Raises:
            ConfigError: the file exists but is not a JSON object.
        """
        raw = (await anyio.to_thread.run_sync(self._read)).get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store a client registration (the tokens are kept)."""
        await self._update("client_info", client_info.model_dump(mode="json", exclude_none=True))


def headless_authorizer(*, timeout: float = 30.0, verify: bool = True) -> Authorizer:
    """An `Authorizer` for authorization servers that approve without a person.

    It GETs the authorization URL with redirects off and reads `code`, `state` and `iss` from
    the query of the `Location` header of the 3xx answer.

    Args:
        timeout: seconds allowed for the request.
        verify: whether to verify TLS certificates.

    Returns:
        The authorizer. When called it raises `TransportError` (`ERR_MCP_AUTH`) if the server
        answers without a redirect, redirects with an `error` parameter, or sends no code.
    """

    async def authorize(url: str) -> AuthorizationCodeResult:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=timeout, verify=verify) as http:
            try:
                response = await http.get(url)
            except httpx2.HTTPError as exc:
                raise TransportError(
                    f"authorization request failed: {type(exc).__name__}: {exc}", code=AUTH_ERROR_CODE
                ) from exc
        location = response.headers.get("location")
        if not (300 <= response.status_code < 400) or not location:
            raise TransportError(
                f"authorization endpoint answered {response.status_code} without a redirect; "
                "this server needs a person: pass authorize= with an interactive callback",
                code=AUTH_ERROR_CODE,
                details={"status": response.status_code},
            )
        query = parse_qs(urlparse(urljoin(url, location)).query)

        def first(name: str) -> str | None:
            values = query.get(name)
            return values[0] if values else None

        error = first("error")
        if error is not None:
            description = first("error_description") or ""
            raise TransportError(
                f"authorization refused: {error} {description}".strip(),
                code=AUTH_ERROR_CODE,
                details={"error": error},
            )
        code = first("code")
        if not code:
            raise TransportError("authorization redirect carried no code", code=AUTH_ERROR_CODE)
        return AuthorizationCodeResult(code=code, state=first("state"), iss=first("iss"))

    return authorize


def oauth_auth(
    server_url: str,
    *,
    storage: TokenStorage | None = None,
    authorize: Authorizer | None = None,
    client_name: str = "toolbridge",
    redirect_uri: str = DEFAULT_REDIRECT_URI,
    scope: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    token_endpoint_auth_method: Literal["none", "client_secret_post", "client_secret_basic"] | None = None,
    client_metadata_url: str | None = None,
    client_metadata: OAuthClientMetadata | None = None,
    dpop: DPoPMode = "auto",
    dpop_key_store: DPoPKeyStore | None = None,
) -> httpx2.Auth:
    """OAuth 2.1 authorization-code grant with PKCE, ready to pass as `HttpClient(auth=...)`.

    The flow starts on the server's first `401`; tokens are then reused, refreshed when they
    expire (if a refresh token was issued), and stepped up when the server asks for more scope.

    Args:
        server_url: the MCP endpoint (the same URL given to `HttpClient`).
        storage: where tokens and the registration live (default: in memory).
        authorize: obtains the code for an authorization URL (default: `headless_authorizer()`).
        client_name: the name sent at dynamic registration.
        redirect_uri: the redirect URI registered and sent in the authorization request.
        scope: scopes to ask for when the server does not say which (it usually does).
        client_id: a client id registered beforehand (skips dynamic registration).
        client_secret: the secret of that pre-registered client, if it has one.
        token_endpoint_auth_method: how that pre-registered client authenticates at the token
            endpoint (default: `client_secret_basic` with a secret, else `none`).
        client_metadata_url: an HTTPS URL of this client's metadata document, used as the client
            id when the authorization server supports it (SEP-991), instead of registering.
        client_metadata: full registration metadata, overriding `client_name`, `redirect_uri`
            and `scope`.
        dpop: DPoP-bound tokens (RFC 9449): `auto` (when the authorization server advertises
            ES256 for DPoP), `always` or `off` (see `toolbridge.clients.DPoPAuth`).
        dpop_key_store: where the DPoP key lives (default: in memory).

    Returns:
        An `httpx2.Auth`.

    Raises:
        ConfigError: `client_secret` without `client_id`, or an invalid `client_metadata_url`.
    """
    if client_secret is not None and client_id is None:
        raise ConfigError("oauth_auth: client_secret was given without client_id", code="ERR_INVALID_INPUT")
    metadata = client_metadata or OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
        token_endpoint_auth_method=token_endpoint_auth_method,
    )
    if client_secret:
        register_secret(client_secret, name="client_secret")
    store: TokenStorage = _registering(storage)
    if client_id is not None:
        method = token_endpoint_auth_method or ("client_secret_basic" if client_secret else "none")
        store = _PreRegistered(
            store,
            OAuthClientInformationFull(
                client_id=client_id,
                client_secret=client_secret,
                redirect_uris=metadata.redirect_uris,
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method=method,
                scope=metadata.scope,
            ),
        )
    authorizer = authorize or headless_authorizer()
    pending: list[AuthorizationCodeResult] = []

    async def redirect_handler(url: str) -> None:
        pending.append(await authorizer(url))

    async def callback_handler() -> AuthorizationCodeResult:
        if not pending:
            raise TransportError("authorization produced no result", code=AUTH_ERROR_CODE)
        return pending.pop()

    try:
        provider = OAuthClientProvider(
            server_url=server_url,
            client_metadata=metadata,
            storage=store,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=client_metadata_url,
        )
    except ValueError as exc:
        raise ConfigError(f"oauth_auth: {exc}", code="ERR_INVALID_INPUT") from exc
    return with_dpop(provider, dpop, dpop_key_store, "oauth_auth")


def with_dpop(provider: httpx2.Auth, mode: DPoPMode, key_store: DPoPKeyStore | None, who: str) -> httpx2.Auth:
    """`provider` with DPoP added (`DPoPAuth`), or as it is when `mode` is `off`."""
    if mode == "off":
        return provider
    try:
        return DPoPAuth(provider, mode=mode, key_store=key_store)
    except ValueError as exc:
        raise ConfigError(f"{who}: {exc}", code="ERR_INVALID_INPUT") from exc


def _register_tokens(tokens: OAuthToken | None) -> None:
    # Values from a server or a token file: a stray line break is cut rather than refused here.
    if tokens is not None:
        register_secret(tokens.access_token.rstrip("\r\n"), name="the OAuth access token")
        if tokens.refresh_token:
            register_secret(tokens.refresh_token.rstrip("\r\n"), name="the OAuth refresh token")


def _register_client(info: OAuthClientInformationFull | None) -> None:
    if info is not None and info.client_secret:
        register_secret(info.client_secret.rstrip("\r\n"), name="the OAuth client secret")


class _Registering:
    """A storage wrapper that registers every token and client secret passing through it."""

    def __init__(self, inner: TokenStorage) -> None:
        self._inner = inner

    async def get_tokens(self) -> OAuthToken | None:
        tokens = await self._inner.get_tokens()
        _register_tokens(tokens)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        _register_tokens(tokens)
        await self._inner.set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = await self._inner.get_client_info()
        _register_client(info)
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        _register_client(client_info)
        await self._inner.set_client_info(client_info)


def registering_storage(storage: TokenStorage | None) -> TokenStorage:
    """`storage` (default: in memory) with every token and client secret registered for redaction."""
    return _Registering(storage if storage is not None else MemoryTokenStorage())


_registering = registering_storage


class _PreRegistered:
    """A storage wrapper that always answers with the client registered beforehand."""

    def __init__(self, inner: TokenStorage, client_info: OAuthClientInformationFull) -> None:
        self._inner = inner
        self._client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return await self._inner.get_tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._inner.set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info
        await self._inner.set_client_info(client_info)


def client_credentials_auth(
    server_url: str,
    *,
    client_id: str,
    client_secret: str | None = None,
    private_key_pem: str | None = None,
    signing_algorithm: str = "RS256",
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
    scope: str | None = None,
    issuer: str | None = None,
    storage: TokenStorage | None = None,
    dpop: DPoPMode = "auto",
    dpop_key_store: DPoPKeyStore | None = None,
) -> httpx2.Auth:
    """OAuth 2.1 client-credentials grant (machine to machine), for `HttpClient(auth=...)`.

    Give exactly one of `client_secret` (sent as `token_endpoint_auth_method` says) or
    `private_key_pem` (the client signs a short-lived JWT assertion, RFC 7523 `private_key_jwt`,
    with `signing_algorithm`, e.g. `RS256` or `ES256`).

    Args:
        server_url: the MCP endpoint.
        client_id: the client's id at the authorization server.
        client_secret: the client's secret.
        private_key_pem: the client's private key (PEM).
        signing_algorithm: the JWS algorithm for the assertion.
        token_endpoint_auth_method: how a secret is sent.
        scope: scopes to request.
        issuer: the authorization server's issuer URL; when given, credentials are only sent to
            the authorization server that proves to be this issuer.
        storage: where tokens live (default: in memory).
        dpop: DPoP-bound tokens: `auto`, `always` or `off` (as for `oauth_auth`).
        dpop_key_store: where the DPoP key lives (default: in memory).

    Returns:
        An `httpx2.Auth`.

    Raises:
        ConfigError: neither or both of `client_secret` and `private_key_pem`, or a bad issuer.
    """
    if (client_secret is None) == (private_key_pem is None):
        raise ConfigError(
            "client_credentials_auth: give exactly one of client_secret and private_key_pem",
            code="ERR_INVALID_INPUT",
        )
    if client_secret:
        register_secret(client_secret, name="client_secret")
    store = _registering(storage)
    import warnings

    from mcp.shared.exceptions import MCPDeprecationWarning

    try:
        with warnings.catch_warnings():
            # The SDK warns when no issuer is pinned; the caller chose that, and it is documented above.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            provider: httpx2.Auth
            if client_secret is not None:
                provider = ClientCredentialsOAuthProvider(
                    server_url=server_url,
                    storage=store,
                    client_id=client_id,
                    client_secret=client_secret,
                    token_endpoint_auth_method=token_endpoint_auth_method,
                    scope=scope,
                    issuer=issuer,
                )
                return with_dpop(provider, dpop, dpop_key_store, "client_credentials_auth")
            assert private_key_pem is not None
            assertion = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=private_key_pem,
                signing_algorithm=signing_algorithm,
            ).create_assertion_provider()
            provider = PrivateKeyJWTOAuthProvider(
                server_url=server_url,
                storage=store,
                client_id=client_id,
                assertion_provider=assertion,
                scope=scope,
                issuer=issuer,
            )
            return with_dpop(provider, dpop, dpop_key_store, "client_credentials_auth")
    except ValueError as exc:
        raise ConfigError(f"client_credentials_auth: {exc}", code="ERR_INVALID_INPUT") from exc


AssertionProvider = Callable[[str, str], Awaitable[str]]
"""Given (audience = the MCP authorization server's issuer, resource = the MCP server), return an ID-JAG."""

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def id_jag_from_idp(
    idp_token_endpoint: str,
    id_token: str | Callable[[], Awaitable[str]],
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    timeout: float = 30.0,
) -> AssertionProvider:
    """An assertion provider that trades the user's ID token for an ID-JAG at the identity provider.

    This is leg 1 of SEP-990: an RFC 8693 token exchange (`subject_token` = the ID token,
    `requested_token_type` = ID-JAG, `audience` = the MCP authorization server, `resource` =
    the MCP server).

    Args:
        idp_token_endpoint: the identity provider's token endpoint.
        id_token: the user's OpenID Connect ID token, or an async function returning a fresh one.
        client_id: this client's id at the identity provider, if it needs one.
        client_secret: this client's secret at the identity provider (sent as HTTP Basic).
        timeout: seconds allowed for the exchange.

    Returns:
        The provider, for `identity_assertion_auth(assertion_provider=...)`. When called it raises
        `TransportError` (`ERR_MCP_AUTH`) if the identity provider refuses or answers nonsense.
    """

    if isinstance(id_token, str):
        register_secret(id_token, name="id_token")
    if client_secret:
        register_secret(client_secret, name="client_secret")

    async def provide(audience: str, resource: str) -> str:
        subject = id_token if isinstance(id_token, str) else await id_token()
        register_secret(subject, name="id_token")
        data = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": subject,
            "subject_token_type": ID_TOKEN_TYPE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "audience": audience,
            "resource": resource,
        }
        headers: dict[str, str] = {}
        if client_id is not None and client_secret is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(
                f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}".encode()
            ).decode("ascii")
        elif client_id is not None:
            data["client_id"] = client_id
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            try:
                response = await http.post(idp_token_endpoint, data=data, headers=headers)
            except httpx2.HTTPError as exc:
                raise TransportError(
                    f"token exchange at the identity provider failed: {type(exc).__name__}: {exc}",
                    code=AUTH_ERROR_CODE,
                ) from exc
        if response.status_code != 200:
            raise TransportError(
                f"identity provider refused the token exchange ({response.status_code})",
                code=AUTH_ERROR_CODE,
                details={"status": response.status_code},
            )
        try:
            token = response.json()["access_token"]
        except (ValueError, KeyError, TypeError) as exc:
            raise TransportError(
                "identity provider answered without an access_token", code=AUTH_ERROR_CODE
            ) from exc
        if not isinstance(token, str) or not token:
            raise TransportError("identity provider sent an empty access_token", code=AUTH_ERROR_CODE)
        register_secret(token, name="the ID-JAG")
        return token

    return provide


def identity_assertion_auth(
    server_url: str,
    *,
    client_id: str,
    client_secret: str,
    issuer: str,
    assertion_provider: AssertionProvider,
    scope: str | None = None,
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic",
    storage: TokenStorage | None = None,
) -> httpx2.Auth:
    """Enterprise-managed authorization (SEP-990): an ID-JAG traded for an access token.

    The MCP authorization server is configuration (`issuer`), never taken from the MCP server,
    so the assertion and the secret only go to that issuer's token endpoint.

    Args:
        server_url: the MCP endpoint.
        client_id: this client's id at the MCP authorization server.
        client_secret: its secret there.
        issuer: the MCP authorization server's issuer URL.
        assertion_provider: returns an ID-JAG for (audience, resource); see `id_jag_from_idp`.
        scope: scopes to request.
        token_endpoint_auth_method: how the secret is sent.
        storage: where tokens live (default: in memory).

    Returns:
        An `httpx2.Auth`.

    Raises:
        ConfigError: an empty secret or issuer.
    """
    if client_secret:
        register_secret(client_secret, name="client_secret")
    try:
        return IdentityAssertionOAuthProvider(
            server_url=server_url,
            storage=_registering(storage),
            client_id=client_id,
            client_secret=client_secret,
            issuer=issuer,
            assertion_provider=assertion_provider,
            scope=scope,
            token_endpoint_auth_method=token_endpoint_auth_method,
        )
    except ValueError as exc:
        raise ConfigError(f"identity_assertion_auth: {exc}", code="ERR_INVALID_INPUT") from exc


def auth_error_to_toolbridge(exc: BaseException) -> ToolbridgeError | None:
    """Translate an SDK OAuth failure into `TransportError` (`ERR_MCP_AUTH`); None for anything else.

    For `HttpClient`'s error boundary: the SDK raises these from inside the `httpx2.Auth` flow.
    """
    if isinstance(exc, ToolbridgeError):
        return exc if exc.code == AUTH_ERROR_CODE else None
    if isinstance(exc, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        return TransportError(f"OAuth failed: {type(exc).__name__}: {exc}", code=AUTH_ERROR_CODE)
    return None
