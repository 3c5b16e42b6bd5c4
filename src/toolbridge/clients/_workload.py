"""Workload identity for `HttpClient`: the RFC 7523 JWT-bearer grant (SEP-1933).

A CI job, a Kubernetes pod or a Ray actor has no person to log in and no client secret worth the
name; its platform gives it a short-lived signed JWT instead (a projected service-account token,
a GitHub Actions OIDC token, a cloud metadata-server token). `workload_identity_auth` presents
that JWT to the MCP server's authorization server as an authorization grant:

    grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>[&client_id][&scope][&resource]

and uses the access token it gets back (with DPoP when the authorization server offers it, as
for every other grant here). What it does not do, on purpose:

- no dynamic client registration (the workload is known to the authorization server by its
  platform identity; `client_id` is sent only when given);
- no other grant after a refusal: an `invalid_grant`, `invalid_scope` or `unauthorized_client`
  answer fails the request with `ERR_MCP_AUTH`, and the same assertion is never sent again; the
  next attempt is made only once the source yields a different assertion (the platform refreshed
  the file).

The assertion comes from a source, read afresh for every token request:

- `assertion_from_file(path)`: a file the platform rewrites (Kubernetes projected tokens, for
  example). At most `max_bytes` (default 64 KiB) are read; a larger file, a missing file or an
  empty one is one `ERR_MCP_AUTH` line naming the path, never a traceback;
- `assertion_from_env(name)`: an environment variable;
- any async callable taking the audience (the authorization server's issuer) and returning the JWT.

The assertion is a credential: every value read is registered with the redactor before it is
used, and nothing here logs it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthTokenError, TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

from ..errors import ConfigError, TransportError
from ..redact import register_secret
from ._dpop import DPoPKeyStore, DPoPMode
from ._errors import AUTH_ERROR_CODE

__all__ = [
    "DEFAULT_ASSERTION_MAX_BYTES",
    "JWT_BEARER_GRANT",
    "AssertionSource",
    "assertion_from_env",
    "assertion_from_file",
    "workload_identity_auth",
]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"

DEFAULT_ASSERTION_MAX_BYTES = 65_536
"""The largest assertion file read (platform tokens are 1-4 KiB)."""

AssertionSource = Callable[[str], Awaitable[str]]
"""Given the audience (the authorization server's issuer), return the workload's JWT."""


def _clean(value: str, where: str) -> str:
    token = value.strip()
    if not token:
        raise TransportError(f"workload identity: {where} is empty", code=AUTH_ERROR_CODE)
    if any(c.isspace() for c in token) or not token.isascii():
        raise TransportError(
            f"workload identity: {where} does not hold one JWT (whitespace or non-ASCII inside)",
            code=AUTH_ERROR_CODE,
        )
    register_secret(token, name="the workload identity assertion")
    return token


def assertion_from_file(
    path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_ASSERTION_MAX_BYTES
) -> AssertionSource:
    """A source reading the JWT from a file the platform refreshes (read anew for each token request).

    Args:
        path: the file (`~` is expanded).
        max_bytes: the largest file accepted.

    Returns:
        The source. When called it raises `TransportError` (`ERR_MCP_AUTH`) if the file is
        missing, unreadable, larger than `max_bytes`, empty, or not one token.
    """
    if max_bytes <= 0:
        raise ConfigError("assertion_from_file: max_bytes must be positive", code="ERR_INVALID_INPUT")
    file = Path(os.path.expanduser(os.fspath(path)))

    def read() -> bytes:
        with file.open("rb") as f:
            return f.read(max_bytes + 1)

    async def source(audience: str) -> str:
        try:
            data = await anyio.to_thread.run_sync(read)
        except FileNotFoundError:
            raise TransportError(
                f"workload identity: the assertion file {file} does not exist "
                "(did the platform stop refreshing it?)",
                code=AUTH_ERROR_CODE,
                details={"path": str(file)},
            ) from None
        except OSError as exc:
            raise TransportError(
                f"workload identity: cannot read the assertion file {file}: "
                f"{exc.strerror or type(exc).__name__}",
                code=AUTH_ERROR_CODE,
                details={"path": str(file)},
            ) from None
        if len(data) > max_bytes:
            raise TransportError(
                f"workload identity: the assertion file {file} is larger than {max_bytes} bytes",
                code=AUTH_ERROR_CODE,
                details={"path": str(file), "max_bytes": max_bytes},
            )
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise TransportError(
                f"workload identity: the assertion file {file} is not ASCII text",
                code=AUTH_ERROR_CODE,
                details={"path": str(file)},
            ) from None
        return _clean(text, f"the assertion file {file}")

    return source


def assertion_from_env(name: str) -> AssertionSource:
    """A source reading the JWT from the environment variable `name` (read anew for each request)."""

    async def source(audience: str) -> str:
        value = os.environ.get(name)
        if value is None:
            raise TransportError(
                f"workload identity: the environment variable {name} is not set", code=AUTH_ERROR_CODE
            )
        return _clean(value, f"the environment variable {name}")

    return source


class WorkloadIdentityProvider(OAuthClientProvider):
    """The SDK's OAuth flow with the JWT-bearer grant as its only way to get a token."""

    def __init__(
        self,
        server_url: str,
        storage: TokenStorage,
        assertion: AssertionSource,
        *,
        client_id: str | None,
        scope: str | None,
        issuer: str | None,
    ) -> None:
        super().__init__(
            server_url,
            OAuthClientMetadata(
                redirect_uris=None,
                grant_types=[JWT_BEARER_GRANT],
                token_endpoint_auth_method="none",
                scope=scope,
            ),
            storage,
        )
        self._assertion = assertion
        self._issuer = issuer
        self._client_id = client_id
        self._refused: tuple[str, str] | None = None
        """(assertion, why) of the last refusal: that assertion is never sent again."""
        self.token_requests = 0
        """JWT-bearer token requests made (for tests and metrics)."""
        self._sent: str | None = None

    async def _initialize(self) -> None:
        self.context.current_tokens = await self.context.storage.get_tokens()
        # A fixed client record: the flow then never registers (no dynamic registration).
        self.context.client_info = OAuthClientInformationFull(
            redirect_uris=None,
            client_id=self._client_id or "workload",
            grant_types=[JWT_BEARER_GRANT],
            token_endpoint_auth_method="none",
        )
        self._initialized = True

    def _select_authorization_server(self, advertised: list[str]) -> str:
        if self._issuer is not None:
            for server in advertised:
                if server.rstrip("/") == self._issuer.rstrip("/"):
                    return server
        return advertised[0]

    async def _perform_authorization(self) -> httpx2.Request:
        metadata = self.context.oauth_metadata
        if metadata is None:
            raise TransportError(
                "workload identity: the MCP server's authorization server published no metadata",
                code=AUTH_ERROR_CODE,
            )
        issuer = str(metadata.issuer)
        if self._issuer is not None and issuer.rstrip("/") != self._issuer.rstrip("/"):
            raise TransportError(
                f"workload identity: the authorization server is {issuer}, not the configured issuer "
                f"{self._issuer}; the assertion is not sent",
                code=AUTH_ERROR_CODE,
            )
        assertion = await self._assertion(issuer)
        register_secret(assertion, name="the workload identity assertion")
        if self._refused is not None and self._refused[0] == assertion:
            raise TransportError(
                f"workload identity: the authorization server refused this assertion ({self._refused[1]}); "
                "waiting for the platform to provide a new one",
                code=AUTH_ERROR_CODE,
            )
        data: dict[str, str] = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion}
        if self._client_id is not None:
            data["client_id"] = self._client_id
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = self.context.get_resource_url()
        self._sent = assertion
        self.token_requests += 1
        return httpx2.Request(
            "POST",
            self._get_token_endpoint(),
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if response.status_code in (200, 201):
            await super()._handle_token_response(response)
            return
        why = _oauth_error(await response.aread()) or f"HTTP {response.status_code}"
        if self._sent is not None:
            self._refused = (self._sent, why)
        # The SDK would quote the whole body; one line with the OAuth error code is enough.
        raise OAuthTokenError(f"the authorization server refused the JWT-bearer grant: {why}")


def _oauth_error(body: bytes) -> str | None:
    import json

    try:
        data: Any = json.loads(body[:65536])
    except (ValueError, UnicodeDecodeError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, str) or not error.isascii() or len(error) > 64 or not error.isprintable():
        return None
    return error


def workload_identity_auth(
    server_url: str,
    *,
    assertion: AssertionSource | os.PathLike[str],
    client_id: str | None = None,
    scope: str | None = None,
    issuer: str | None = None,
    storage: TokenStorage | None = None,
    dpop: DPoPMode = "auto",
    dpop_key_store: DPoPKeyStore | None = None,
) -> httpx2.Auth:
    """Workload identity (SEP-1933): an RFC 7523 JWT-bearer grant, for `HttpClient(auth=...)`.

    Args:
        server_url: the MCP endpoint.
        assertion: where the workload's JWT comes from: `assertion_from_file(...)`,
            `assertion_from_env(...)`, an async callable of the audience, or a `pathlib.Path`
            (read as `assertion_from_file(path)`). A plain string is refused: it could be the
            token itself, which must not end up in an error message as a "path".
        client_id: this workload's client id at the authorization server, if it has one.
        scope: scopes to request (default: what the MCP server asks for).
        issuer: the authorization server's issuer; when given, the assertion is only sent to
            the authorization server that proves to be it.
        storage: where tokens live (default: in memory).
        dpop: DPoP-bound tokens: `auto`, `always` or `off` (as for `oauth_auth`).
        dpop_key_store: where the DPoP key lives (default: in memory).

    Returns:
        An `httpx2.Auth`.

    Raises:
        ConfigError: an issuer that is not an http(s) URL, or `assertion` given as a string.
    """
    from ._oauth import registering_storage, with_dpop

    if issuer is not None and not issuer.startswith(("https://", "http://")):
        raise ConfigError(
            "workload_identity_auth: issuer must be the authorization server's http(s) URL",
            code="ERR_INVALID_INPUT",
        )
    if isinstance(assertion, str | bytes):
        raise ConfigError(
            "workload_identity_auth: pass assertion=assertion_from_file(path), assertion_from_env(name) "
            "or an async callable (a string is not accepted; its value is not shown)",
            code="ERR_INVALID_INPUT",
        )
    source = assertion if callable(assertion) else assertion_from_file(assertion)
    provider = WorkloadIdentityProvider(
        server_url, registering_storage(storage), source, client_id=client_id, scope=scope, issuer=issuer
    )
    return with_dpop(provider, dpop, dpop_key_store, "workload_identity_auth")
