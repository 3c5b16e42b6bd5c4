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
    """`url` as messages and reprs show it: scheme, host and path only.

    The query and any userinfo may carry credentials, so neither is ever shown.
    """
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


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
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"HttpClient: not an http(s) URL: {url!r}", code="ERR_INVALID_INPUT")
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
        return f"HttpClient({_shown_url(self.url)}{'?…' if urlsplit(self.url).query else ''})"

    def _describe(self) -> str:
        return f"HTTP server {_shown_url(self.url)}"

    def _legacy_channel_live(self, conn: _Connection) -> bool:
        return conn.get_stream_open

    def _make_http_client(self, conn: _Connection) -> httpx2.AsyncClient:
        """The HTTP client of one connection (response size limits apply when available)."""
        client = create_mcp_http_client(headers=self.headers or None, auth=self.auth)

        async def notice_session_rejection(response: httpx2.Response) -> None:
            if not response.request.headers.get(_SESSION_HEADER):
                return
            status = response.status_code
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
        http = await stack.enter_async_context(self._make_http_client(conn))
        return streamable_http_client(self.url, http_client=http, max_sse_event_size=self.max_message_bytes)
