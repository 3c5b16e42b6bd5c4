"""A message-size cap and malformed-response rules for the Streamable HTTP client.

The SDK's Streamable HTTP transport (`mcp.client.streamable_http`) reads a JSON response body with
no size limit; it caps one SSE event with `max_sse_event_size` but reports an oversized event as a
broken stream (`CONNECTION_CLOSED`), and it reports a malformed body or event as a JSON-RPC
`PARSE_ERROR` that cannot be told apart from an error the server sent. toolbridge wants the rules of
its stdio transport here too: a message larger than the cap is discarded as it streams (memory
bounded by the cap) and the call it answered fails at once with `ERR_MCP_PROTOCOL`; a malformed
answer to a request fails that request at once with `ERR_MCP_PROTOCOL`.

It is done below the SDK, at the HTTP layer, by `LimitedTransport`, an `httpx2` transport wrapper
that sees each request the SDK posts (so it knows the JSON-RPC id it is waiting for) and the
response before the SDK reads it. Only MCP exchanges are policed: a POST whose body is a JSON-RPC
message, or a GET asking for an event stream. Every other request on the same client (the OAuth
flow's metadata discovery, client registration and token requests) passes untouched, so their
bodies (`client_secret`, `access_token`) are never read, checked or logged here. Message bodies
are never logged above DEBUG.

* `application/json` bodies of 2xx responses are read up to the cap. A larger body is abandoned
  (the connection is closed) and replaced by a small JSON-RPC error for the request's id; a body
  that is not a valid JSON-RPC message is replaced the same way. A valid body is handed on as it
  came. Compressed bodies (`Content-Encoding` other than identity) are only capped, in their
  compressed size, since httpx decodes above the transport.
* `text/event-stream` bodies are re-framed event by event: each event is held (bounded by the cap)
  until its blank line, checked, and passed on. An event above the cap is dropped as it streams;
  if it answers the request (it is not a server request or notification, by the same cheap head
  scan as the stdio transport) an error event for the request's id takes its place at once. A
  `message` event whose data is not a valid JSON-RPC message becomes an error event for the
  request's id (the SDK fails the request on such an event anyway, only without the marker). On a
  GET stream (no request) an oversized event is dropped and logged.
* A `subscriptions/listen` request (2026-07-28) answered with `application/json` is read as an
  open stream of JSON lines, one JSON-RPC message per line (the conformance suite's reference
  server answers so): each line becomes an SSE `message` event, checked as above (a line above
  the cap is dropped as it streams). The SDK reads a JSON body whole, so it would otherwise wait
  for the end of a stream that does not end, and never see the acknowledgement.
* Errors carry the same `error.data` marker as the stdio transport
  (`{"toolbridge": "protocol", "reason": "message_too_large" | "malformed", ...}`), which the
  client maps to `ProtocolError`.

Plugging it in (what `HttpClient` does)::

    http = limit_http_client(create_mcp_http_client(headers=..., auth=...), max_message_bytes)
    async with http:
        async with Client(streamable_http_client(url, http_client=http,
                                                 max_sse_event_size=max_message_bytes)) as c: ...

`limit_http_client` wraps the client's transports in place (its default transport and any mounted
ones, e.g. proxies from the environment). Or build the client yourself with
`httpx2.AsyncClient(transport=LimitedTransport(httpx2.AsyncHTTPTransport(), cap))`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

import httpx2
import mcp_types as types
from pydantic import ValidationError

from ._stdio_transport import (
    _HEAD_SCAN_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    REASON_MALFORMED,
    REASON_TOO_LARGE,
    _is_request_like,
    _Line,
    _LineAssembler,
    _mib,
    _OversizeEnded,
    _OversizeStarted,
    _RateLimiter,
    _scan_head,
    _suffix,
    protocol_error_data,
    validation_detail,
)

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "LimitedTransport", "limit_http_client"]

_module_logger = logging.getLogger(__name__)
_DATA_PREFIX: Final = b"data:"
_LISTEN_METHOD: Final = "subscriptions/listen"
_MAX_REQUEST_SCAN: Final = 64 * 1024


def limit_http_client(
    client: httpx2.AsyncClient,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    *,
    logger: logging.Logger | None = None,
) -> httpx2.AsyncClient:
    """Apply the message-size cap and malformed-response rules to an `httpx2.AsyncClient`.

    The client's transports (the default one and every mounted one) are wrapped in
    `LimitedTransport`, in place; the same client is returned, so its headers, auth, timeouts and
    proxies are kept. Call it before the client is used.

    Args:
        client: the client the SDK's `streamable_http_client(http_client=...)` will use.
        max_message_bytes: the largest response body or SSE event accepted, in bytes.
        logger: where discarded messages are logged (default: this module's logger).

    Returns:
        `client`, with its transports wrapped.

    Raises:
        ValueError: `max_message_bytes` is not positive.
        TypeError: the client does not have the transport attributes of httpx2's `AsyncClient`.
    """
    if max_message_bytes <= 0:
        raise ValueError(f"max_message_bytes must be positive, got {max_message_bytes}")
    inner = getattr(client, "_transport", None)
    mounts = getattr(client, "_mounts", None)
    if not isinstance(inner, httpx2.AsyncBaseTransport) or not isinstance(mounts, dict):
        raise TypeError("limit_http_client needs an httpx2.AsyncClient (no _transport/_mounts found)")
    if not isinstance(inner, LimitedTransport):
        client._transport = LimitedTransport(inner, max_message_bytes, logger=logger)
    for pattern, mounted in list(mounts.items()):
        if isinstance(mounted, httpx2.AsyncBaseTransport) and not isinstance(mounted, LimitedTransport):
            mounts[pattern] = LimitedTransport(mounted, max_message_bytes, logger=logger)
    return client


class LimitedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that caps MCP response messages and fails malformed ones (see module).

    Args:
        inner: the transport that does the HTTP work (e.g. `httpx2.AsyncHTTPTransport()`).
        max_message_bytes: the largest JSON body or SSE event accepted, in bytes.
        logger: where discarded messages are logged.

    Raises:
        ValueError: `max_message_bytes` is not positive.
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        *,
        logger: logging.Logger | None = None,
    ) -> None:
        if max_message_bytes <= 0:
            raise ValueError(f"max_message_bytes must be positive, got {max_message_bytes}")
        self.inner = inner
        self.max_message_bytes = max_message_bytes
        self.logger = logger or _module_logger
        self._log_limiter = _RateLimiter()

    async def __aenter__(self) -> LimitedTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def warn(self, message: str, *args: object) -> None:
        """Log a warning about a discarded or malformed message, rate-limited."""
        allowed, dropped = self._log_limiter.take()
        if allowed:
            self.logger.warning(message + "%s", *args, _suffix(dropped))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send the request through the inner transport and police the response (see module)."""
        response = await self.inner.handle_async_request(request)
        if not 200 <= response.status_code < 300 or not _is_mcp_request(request):
            return response
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        request_id = _request_id(request)
        if content_type == "application/json" and _request_method(request) == _LISTEN_METHOD:
            return self._sse_response(response, _NdjsonAsSse(self, response.stream), request_id)
        if content_type == "application/json":
            return await self._json_response(response, request_id)
        if content_type == "text/event-stream":
            return self._sse_response(response, response.stream, request_id)
        return response

    def _sse_response(
        self,
        response: httpx2.Response,
        body: httpx2.SyncByteStream | httpx2.AsyncByteStream,
        request_id: int | str | None,
    ) -> httpx2.Response:
        headers = httpx2.Headers(response.headers)
        if body is not response.stream:  # re-framed: no longer the body the headers describe
            for name in ("content-length", "content-encoding"):
                headers.pop(name, None)
            headers["content-type"] = "text/event-stream"
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=_SseLimiter(self, body, request_id),
            extensions=response.extensions,
        )

    async def _json_response(
        self, response: httpx2.Response, request_id: int | str | None
    ) -> httpx2.Response:
        pieces: list[bytes] = []
        size = 0
        too_large = False
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        try:
            async for chunk in stream:
                size += len(chunk)
                if size > self.max_message_bytes:
                    too_large = True
                    break
                pieces.append(chunk)
        finally:
            await stream.aclose()
        body = b"".join(pieces)
        pieces.clear()
        encoded = response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
        replacement: dict[str, Any] | None = None
        if too_large:
            self.warn(
                "MCP server's HTTP response for request %r is above the %d-byte limit; discarded",
                request_id,
                self.max_message_bytes,
            )
            if request_id is not None:
                replacement = _too_large_error(request_id, size, self.max_message_bytes, complete=False)
            body = b""
        elif not encoded and body.strip():
            try:
                types.jsonrpc_message_adapter.validate_json(body, by_name=False)
            except ValidationError as exc:
                detail = validation_detail(exc)
                self.warn(
                    "MCP server's HTTP response for request %r is not a valid JSON-RPC message (%s)",
                    request_id,
                    detail,
                )
                self.logger.debug("the malformed response began with %r", body[:200])
                if request_id is not None:
                    replacement = _malformed_error(request_id, detail)
        headers = httpx2.Headers(response.headers)
        if replacement is not None:
            body = json.dumps(replacement).encode()
            for name in ("content-encoding", "content-length", "transfer-encoding"):
                headers.pop(name, None)
            headers["content-type"] = "application/json"
        return httpx2.Response(
            response.status_code, headers=headers, content=body, extensions=response.extensions
        )


class _SseLimiter(httpx2.AsyncByteStream):
    """Re-frames an SSE body event by event, dropping or replacing oversized and malformed ones."""

    def __init__(
        self, owner: LimitedTransport, inner: httpx2.SyncByteStream | httpx2.AsyncByteStream, request_id: Any
    ) -> None:
        assert isinstance(inner, httpx2.AsyncByteStream)
        self.owner = owner
        self.inner = inner
        self.request_id: int | str | None = request_id
        self.cap = owner.max_message_bytes
        # Lines of one event; the cap applies to a whole event (lines are capped at the same size).
        self.assembler = _LineAssembler(self.cap)
        self.lines: list[bytes] = []
        self.event_size = 0
        self.discarding = False
        self.answered = False  # an error event for the request was already sent

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            out: list[bytes] = []
            for event in self.assembler.feed(chunk):
                if isinstance(event, _Line):
                    line = b"".join(event.pieces)
                    if line.endswith(b"\r"):
                        line = line[:-1]
                    self._line(line, event.size, out)
                elif isinstance(event, _OversizeStarted):
                    self._oversize(event.head, out)
                elif isinstance(event, _OversizeEnded):
                    self.event_size += event.size
            if out:
                yield b"".join(out)
        if self.lines:  # an unterminated last event: dispatch it like a terminated one
            self._line(b"", 0, out := [])
            if out:
                yield b"".join(out)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _line(self, line: bytes, size: int, out: list[bytes]) -> None:
        if line:
            if self.discarding:
                self.event_size += size
                return
            self.lines.append(line)
            self.event_size += size + 1
            if self.event_size > self.cap:
                self._oversize(b"\n".join(self.lines)[:_HEAD_SCAN_BYTES], out)
            return
        # A blank line ends the event.
        lines, self.lines = self.lines, []
        size, self.event_size = self.event_size, 0
        if self.discarding:
            self.discarding = False
            self.owner.warn(
                "discarded an SSE event of %d bytes from the MCP server (limit %d bytes)", size, self.cap
            )
            return
        if lines:
            out.append(self._checked(lines))

    def _oversize(self, head: bytes, out: list[bytes]) -> None:
        """The current event passed the cap: drop what is held, fail the request if it answers it."""
        head = (b"\n".join(self.lines) + b"\n" + head if self.lines and not self.discarding else head)[
            :_HEAD_SCAN_BYTES
        ]
        self.lines = []
        self.discarding = True
        data = _data_of(head.split(b"\n"))
        if self.request_id is None or self.answered or _is_request_like(_scan_head(data).keys):
            return
        self.answered = True
        seen = max(self.event_size, self.cap + 1)
        out.append(_event(_too_large_error(self.request_id, seen, self.cap, complete=False)))

    def _checked(self, lines: list[bytes]) -> bytes:
        """The event as it came, or an error event in place of a malformed answer."""
        raw = b"\n".join(lines) + b"\n\n"
        event_type = b"message"
        for line in lines:
            if line.startswith(b"event:"):
                event_type = line[6:].strip()
        data = _data_of(lines)
        if event_type != b"message" or not data.strip() or self.request_id is None or self.answered:
            return raw
        try:
            types.jsonrpc_message_adapter.validate_json(data, by_name=False)
        except ValidationError as exc:
            if _is_request_like(_scan_head(data[:_HEAD_SCAN_BYTES]).keys):
                return raw
            detail = validation_detail(exc)
            self.owner.warn(
                "MCP server sent an SSE event for request %r that is not a valid JSON-RPC message (%s)",
                self.request_id,
                detail,
            )
            self.owner.logger.debug("the malformed event began with %r", data[:200])
            self.answered = True
            return _event(_malformed_error(self.request_id, detail))
        return raw


class _NdjsonAsSse(httpx2.AsyncByteStream):
    """A `subscriptions/listen` stream sent as newline-delimited JSON, re-framed as SSE events.

    Some 2026-07-28 servers (the conformance suite's reference server among them) answer a listen
    request with `application/json` and one JSON-RPC message per line, kept open, where the SDK
    reads a JSON body whole (and so would wait for the end of a stream that never ends). Each
    line becomes one `message` event, which `_SseLimiter` then checks like any event. A line
    longer than the cap is dropped as it streams (memory bounded by the cap) and logged.
    """

    def __init__(
        self, owner: LimitedTransport, inner: httpx2.SyncByteStream | httpx2.AsyncByteStream
    ) -> None:
        assert isinstance(inner, httpx2.AsyncByteStream)
        self.owner = owner
        self.inner = inner
        self.cap = owner.max_message_bytes
        self.pending = bytearray()
        self.dropped = 0  # bytes of an oversized line dropped so far (0: not dropping)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            if out := self._feed(chunk):
                yield out
        if self.pending.strip() and not self.dropped:  # a last line without its newline
            yield _as_event(bytes(self.pending))
        self.pending.clear()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            piece = chunk[start:end]
            start = end + 1
            if self.dropped:
                self._dropped_line(self.dropped + len(piece))
                continue
            self.pending += piece
            line, self.pending = bytes(self.pending), bytearray()
            if len(line) > self.cap:
                self._dropped_line(len(line))
            elif line.strip():
                out.append(_as_event(line))
        rest = chunk[start:]
        if self.dropped:
            self.dropped += len(rest)
        else:
            self.pending += rest
            if len(self.pending) > self.cap:
                self.dropped = len(self.pending)
                self.pending.clear()
        return b"".join(out)

    def _dropped_line(self, size: int) -> None:
        self.dropped = 0
        self.owner.warn(
            "discarded a %d-byte line of a listen stream from the MCP server (limit %d bytes)", size, self.cap
        )


def _as_event(line: bytes) -> bytes:
    return b"event: message\ndata: " + line.strip() + b"\n\n"


def _request_method(request: httpx2.Request) -> str | None:
    """The JSON-RPC method of a POST whose body is one small request (None otherwise)."""
    if request.method != "POST":
        return None
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return None
    if len(body) > _MAX_REQUEST_SCAN or _LISTEN_METHOD.encode() not in body:
        return None  # only the listen request is looked for: skip the parse for every other one
    try:
        message = json.loads(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _data_of(lines: list[bytes]) -> bytes:
    """The joined `data:` fields of an event's lines (one optional space after the colon)."""
    parts = []
    for line in lines:
        if line.startswith(_DATA_PREFIX):
            value = line[len(_DATA_PREFIX) :]
            parts.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(parts)


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def _is_mcp_request(request: httpx2.Request) -> bool:
    """Whether `request` is an MCP exchange: a JSON-RPC POST, or a GET for an event stream.

    OAuth requests (metadata GETs asking for JSON, form-encoded token POSTs, the JSON registration
    POST, which has no `jsonrpc` member) are not.
    """
    if request.method == "GET":
        return "text/event-stream" in request.headers.get("accept", "")
    if request.method != "POST":
        return False
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return False
    keys = _scan_head(body[:_HEAD_SCAN_BYTES]).keys
    return "jsonrpc" in keys or "method" in keys


def _request_id(request: httpx2.Request) -> int | str | None:
    """The id of the JSON-RPC request this HTTP request carries (None for notifications, GETs)."""
    if request.method != "POST":
        return None
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return None
    info = _scan_head(body[:_HEAD_SCAN_BYTES])
    return info.request_id if "method" in info.keys else None


def _too_large_error(request_id: int | str, size: int, limit: int, *, complete: bool) -> dict[str, Any]:
    """`size`: the whole message's size if `complete`, else how much of it had arrived."""
    if complete:
        what = f"is {_mib(size)}, above the message size limit of {_mib(limit)}"
    else:
        what = f"is larger than the message size limit of {_mib(limit)}"
    return _error_response(
        request_id,
        types.INVALID_REQUEST,
        f"the MCP server's response {what}; it was discarded",
        protocol_error_data(REASON_TOO_LARGE, size=size, limit=limit, complete=complete),
    )


def _malformed_error(request_id: int | str, detail: str) -> dict[str, Any]:
    return _error_response(
        request_id,
        types.PARSE_ERROR,
        f"the MCP server's response is not a valid JSON-RPC message: {detail}",
        protocol_error_data(REASON_MALFORMED, detail=detail),
    )


def _error_response(request_id: int | str, code: int, message: str, data: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error response in wire form, answering `request_id`."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}
