"""External session mode of `Mcp.HttpClient` (`sessionProvider:`), as Telo defines it.

Someone else opened the MCP session (a registry, a vault): before every request the client asks
its session provider for the session id and sends it as `Mcp-Session-Id`. It never runs the
`initialize` handshake, never renews a session and never deletes one. A rejected session
(HTTP 404 or 410, or a 400 whose body names the session) is `SessionInvalidError`
(`ERR_MCP_SESSION_INVALID`) at once: renewing it is the provider's business.

Only `tools/list` (every page, up to `MAX_PAGES`) and `tools/call` are sent, as JSON-RPC POSTs
that accept a JSON body or an event stream (the first response with the request's id wins).
Each request has a deadline, and a response larger than `max_message_bytes` fails its call
with `ProtocolError`.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types

from ..errors import (
    ConfigError,
    JsonRpcError,
    McpTimeoutError,
    ProtocolError,
    SessionInvalidError,
    TransportError,
)

if TYPE_CHECKING:
    from ..clients import ProgressHandler

__all__ = ["MAX_PAGES", "ExternalSessionClient"]

MAX_PAGES = 100
_OPEN_SCHEMA = {"type": "object", "additionalProperties": True}
_DEFAULT_VERSION = "2025-11-25"


class ExternalSessionClient:
    """An MCP server over Streamable HTTP, in a session its provider supplies.

    Args:
        url: the MCP endpoint.
        provider: called with no arguments before each request (it may be async); returns the
            session id, or a mapping with `sessionId`.
        headers: extra HTTP headers.
        protocol_version: sent as `MCP-Protocol-Version` (default 2025-11-25).
        client_info: accepted for symmetry with `HttpClient`; there is no handshake to send it in.
        timeout: seconds allowed for one request, provider call included.
        max_message_bytes: the largest response accepted.
    """

    def __init__(
        self,
        url: str,
        provider: Callable[[], Any],
        *,
        headers: Mapping[str, str] | None = None,
        protocol_version: str | None = None,
        client_info: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("ExternalSessionClient: not an http(s) URL", code="ERR_INVALID_INPUT")
        self.url = url
        self.provider = provider
        self.headers = dict(headers or {})
        self.protocol_version = protocol_version or _DEFAULT_VERSION
        self.timeout = timeout
        self.max_message_bytes = max_message_bytes
        self.generation = 0  # it never listens for the server's tool-list changes
        self._ids = itertools.count(1)
        self._http: httpx2.AsyncClient | None = None
        self._shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"

    def __repr__(self) -> str:
        return f"ExternalSessionClient({self._shown})"

    async def _session_id(self) -> str:
        value = self.provider()
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, Mapping):
            value = value.get("sessionId")
        if not isinstance(value, str) or not value or len(value) > 1024 or not value.isprintable():
            raise SessionInvalidError(
                f"the session provider of {self._shown} gave no usable session id",
                code="ERR_MCP_SESSION_INVALID",
            )
        return value

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._http is None:
            self._http = httpx2.AsyncClient(follow_redirects=False)
        request_id = next(self._ids)
        try:
            with anyio.fail_after(self.timeout):
                session_id = await self._session_id()
                headers = {
                    **self.headers,
                    "content-type": "application/json",
                    "accept": "application/json, text/event-stream",
                    "mcp-session-id": session_id,
                    "mcp-protocol-version": self.protocol_version,
                }
                body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                async with self._http.stream("POST", self.url, json=body, headers=headers) as response:
                    rejected = response.status_code in (404, 410)
                    if response.status_code == 400:  # some servers answer 400 naming the session
                        rejected = b"session" in (await response.aread())[:4096].lower()
                    if rejected:
                        raise SessionInvalidError(
                            f"{self._shown} rejected the session (HTTP {response.status_code})",
                            code="ERR_MCP_SESSION_INVALID",
                        )
                    if response.status_code >= 400:
                        raise TransportError(
                            f"{self._shown} answered HTTP {response.status_code} to {method}"
                        )
                    data = bytearray()
                    async for chunk in response.aiter_bytes():
                        data += chunk
                        if len(data) > self.max_message_bytes:
                            raise ProtocolError(f"{self._shown}: the answer to {method} is too large")
                    stream = "text/event-stream" in response.headers.get("content-type", "")
        except TimeoutError:
            raise McpTimeoutError(f"{self._shown}: {method} took longer than {self.timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise TransportError(f"{self._shown}: {method} failed ({type(exc).__name__})") from None
        message = _response(bytes(data), stream, request_id)
        if message is None:
            raise ProtocolError(f"{self._shown}: no JSON-RPC response to {method}")
        if "error" in message:
            error = message["error"] if isinstance(message["error"], Mapping) else {}
            raw_code = error.get("code")
            code = raw_code if isinstance(raw_code, int) else -32603
            text = str(error.get("message", ""))[:300]
            raise JsonRpcError(f"{self._shown}: {method}: {text}", rpc_code=code, rpc_message=text)
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"{self._shown}: the answer to {method} has no result object")
        return result

    @property
    def instructions(self) -> str | None:
        """None: the session is the provider's, which did the `initialize` handshake."""
        return None

    @property
    def server_info(self) -> types.Implementation | None:
        """None, as `instructions`."""
        return None

    async def list_tools(self, *, refresh: bool = False) -> list[types.Tool]:
        """Every tool, page after page (at most `MAX_PAGES`); never cached (`refresh` is moot)."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = await self._request("tools/list", {"cursor": cursor} if cursor else {})
            for raw in result.get("tools") or []:
                if not isinstance(raw, Mapping):
                    raise ProtocolError(f"{self._shown}: a tools/list entry is not an object")
                try:
                    tools.append(
                        types.Tool.model_validate(
                            {**raw, "inputSchema": raw.get("inputSchema") or _OPEN_SCHEMA}
                        )
                    )
                except ValueError:
                    raise ProtocolError(f"{self._shown}: a tools/list entry is malformed") from None
            cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
            if not cursor:
                return tools
        raise ProtocolError(f"{self._shown}: tools/list has more than {MAX_PAGES} pages")

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the client contract's per-call deadline
        progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        """Call one tool; the result in wire form (`content`, `structuredContent`, `isError`)."""
        result = await self._request("tools/call", {"name": name, "arguments": dict(arguments or {})})
        if not isinstance(result.get("content", []), list):
            raise ProtocolError(f"{self._shown}: the tools/call result has no content list")
        return result

    async def aclose(self) -> None:
        """Close the HTTP connections (the session itself is the provider's)."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def __aenter__(self) -> ExternalSessionClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _response(data: bytes, stream: bool, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC response with `request_id` in a JSON body or an event stream."""
    if not stream:
        try:
            message = json.loads(data)
        except ValueError:
            raise ProtocolError("the server's answer is not JSON") from None
        return message if isinstance(message, dict) else None
    lines: list[str] = []
    for raw in [*data.decode("utf-8", "replace").splitlines(), ""]:
        if raw.startswith("data:"):
            lines.append(raw[5:].removeprefix(" "))
            continue
        if raw or not lines:
            continue
        try:
            message = json.loads("\n".join(lines))
        except ValueError:
            message = None
        lines = []
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    return None
