"""`HttpClient`: an MCP server reached over Streamable HTTP.

One HTTP session (the `Mcp-Session-Id` the server assigns at the handshake, on 2025-11-25 servers)
is reused by every call. If the server forgets the session (HTTP 404 or 410 on a request that
carried the session id, or a 400 whose body names the session, as some servers answer), the client
opens a new session and resends the call once; a second rejection is `SessionInvalidError`. A
response hook on the HTTP client notices the rejection, since the SDK reports it only as a generic
JSON-RPC error.
A response stream that breaks is resumed by the SDK with `Last-Event-ID`. Headers, authentication
(any `httpx2.Auth`, for example the SDK's `OAuthClientProvider`) and HTTP timeouts go on the
`httpx2.AsyncClient` each connection creates. The message-size cap and the malformed-response rules
of the stdio transport apply here too (`_http_limits.limit_http_client`): an oversized or broken
answer fails its own call at once with `ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..errors import ConfigError
from ..redact import (
    install_log_hooks,
    is_credential_name,
    redact,
    register_secret,
    register_url_secrets,
    shorten_urls,
)
from ._base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT,
    DEFAULT_TOOLS_TTL,
    ConnectionClient,
    _Connection,
)
from ._handlers import ElicitationHandler, RootsSpec, SamplingHandler
from ._http_limits import limit_http_client

__all__ = ["HttpClient"]

_SESSION_HEADER = "mcp-session-id"


def _shown_url(url: str) -> str:
    """`url` as messages, reprs and logs show it: scheme, host and port only.

    Userinfo and the query may carry credentials, and hosted MCP endpoints often carry a key in
    the path, so none of them is shown (the path appears only at DEBUG, see `_debug_url`).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}"


def _debug_url(url: str) -> str:
    """`url` for DEBUG logs: the path too, without userinfo, every query value `***`, secrets scrubbed."""
    return redact(shorten_urls(url, keep_path=True))


def _register_credentials(url: str, headers: Mapping[str, str], auth: Any) -> None:
    """Register the credentials this client will send with the redactor (see `toolbridge.redact`)."""
    register_url_secrets(url)
    for name, value in headers.items():
        if is_credential_name(name) and isinstance(value, str):
            register_secret(value, name=f"header {name}")
            scheme, _, credential = value.partition(" ")
            if credential.strip() and scheme.isalpha():
                register_secret(credential.strip(), name=f"header {name}")
    basic_header = getattr(auth, "_auth_header", None)  # httpx2.BasicAuth
    if isinstance(basic_header, str):
        register_secret(basic_header, name="basic auth")
        register_secret(basic_header.partition(" ")[2], name="basic auth")


def _auth_refusal(response: httpx2.Response) -> str | None:
    """Why the server refused the request's credentials (None if this refusal is not about them).

    A 401 always is (the SDK's OAuth flow, when configured, has already tried to answer it); a 403
    is when `WWW-Authenticate` says `insufficient_scope` (the flow has already tried a step-up).
    """
    challenge = response.headers.get("www-authenticate", "")
    if response.status_code == 401:
        return "the server refused the credentials (HTTP 401)" + (
            "" if challenge else "; no WWW-Authenticate challenge"
        )
    if "insufficient_scope" in challenge:
        return "the server refused the request for insufficient scope (HTTP 403 insufficient_scope)"
    return None


class HttpClient(ConnectionClient):
    """A client for an MCP server over Streamable HTTP.

    Args:
        url: the server's MCP endpoint (`http://host:port/mcp`).
        headers: extra HTTP headers sent with every request.
        client_info: name and version announced to the server.
        timeout: client-wide deadline of every request in seconds (default `DEFAULT_TIMEOUT`,
            300; None: none); a call's progress notifications push it back.
        auth: an `httpx2.Auth` (for example `mcp.client.auth.OAuthClientProvider`).
        max_message_bytes: the largest single message (SSE event or JSON body) accepted.
        sampling_handler: answers `sampling/createMessage` (default: not offered).
        elicitation_handler: answers `elicitation/create` (default: elicitation not offered).
        roots: roots to advertise (default: none).
        logger_name: logger for the server's log messages (default `toolbridge.server.<host>`).
        connect_timeout: seconds allowed for the handshake.
        mode: `"auto"` (probe `server/discover`, fall back to `initialize`), `"legacy"` (the
            `initialize` handshake only, no probe) or `"modern"` (2026-07-28 only, no handshake).
        tools_ttl: seconds a cached tool list is trusted without a live change channel.

    Raises:
        ConfigError: the URL is not an http(s) URL, or a limit is not positive.
    """

    _net = "tcp"
    _param_headers = True

    max_message_bytes: int  # always given here (the base also serves transports without a cap)

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        client_info: types.Implementation | Mapping[str, Any] | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        auth: httpx2.Auth | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: RootsSpec | None = None,
        logger_name: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        mode: str = "auto",
        tools_ttl: float | None = DEFAULT_TOOLS_TTL,
    ) -> None:
        try:
            parts = urlsplit(url) if isinstance(url, str) else None
            _ = parts.port if parts is not None else None
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                "HttpClient: not an http(s) URL like http://host:port/mcp "
                "(the URL itself is not shown: it may carry a key)",
                code="ERR_INVALID_INPUT",
            )
        if headers is not None and (
            not isinstance(headers, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise ConfigError("HttpClient: headers must map names to strings", code="ERR_INVALID_INPUT")
        _register_credentials(url, headers or {}, auth)
        install_log_hooks()  # the HTTP libraries' log lines show scheme, host and port only
        super().__init__(
            client_info=client_info,
            timeout=timeout,
            sampling_handler=sampling_handler,
            elicitation_handler=elicitation_handler,
            roots=roots,
            logger_name=logger_name or f"toolbridge.server.{parts.hostname}",
            connect_timeout=connect_timeout,
            mode=mode,
            tools_ttl=tools_ttl,
            max_message_bytes=max_message_bytes,
        )
        self.url = url
        self.headers = dict(headers or {})
        self.auth = auth

    def __repr__(self) -> str:
        return redact(f"HttpClient({_shown_url(self.url)})")  # a secret host, lower-cased

    def _describe(self) -> str:
        return redact(f"HTTP server {_shown_url(self.url)}")

    def _legacy_channel_live(self, conn: _Connection) -> bool:
        return conn.get_stream_open

    def _make_http_client(self, conn: _Connection) -> httpx2.AsyncClient:
        """The HTTP client of one connection (response size limits apply when available)."""
        client = create_mcp_http_client(headers=self.headers or None, auth=self.auth)

        async def notice_session_rejection(response: httpx2.Response) -> None:
            status = response.status_code
            if 200 <= status < 300:
                conn.auth_rejected = None
            elif status in (401, 403):
                conn.auth_rejected = _auth_refusal(response)
            if not response.request.headers.get(_SESSION_HEADER):
                return
            if response.request.method == "GET":
                # The server's GET stream carries 2025-11-25 change notifications (see `_changes`).
                conn.get_stream_open = 200 <= status < 300
            if status in (404, 410):
                conn.session_rejected = True
            elif status == 400:
                body = await response.aread()
                if b"session" in body[:4096].lower():
                    conn.session_rejected = True

        client.event_hooks["response"].append(notice_session_rejection)
        return limit_http_client(client, self.max_message_bytes, logger=self.logger)

    async def _open(self, stack: AsyncExitStack, conn: _Connection) -> Any:
        self.logger.debug("connecting to %s", _debug_url(self.url))
        http = await stack.enter_async_context(self._make_http_client(conn))
        return streamable_http_client(self.url, http_client=http, max_sse_event_size=self.max_message_bytes)
