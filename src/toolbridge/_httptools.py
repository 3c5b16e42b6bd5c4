"""uvicorn's httptools protocol with what a client sends outside a body bounded, as h11 bounds it.

Importing this module needs httptools (the `fast` extra): `toolbridge._serving.run_http` imports it
only when the speedups are on, and serves with h11 when it cannot.

uvicorn's h11 protocol answers 400 and closes the connection once a request's head (request line
and headers, or a chunked body's trailers) passes 16 KiB (h11's `max_incomplete_event_size`).
Its httptools protocol has no such bound: httptools keeps a header name or value, and uvicorn the
URL and the list of headers, for as long as the client sends them (a client sending one endless
header grew the gateway by 38 MB in a few seconds, unanswered). `BoundedHttpToolsProtocol` counts
the bytes fed to the parser since it last made progress (the head complete, a piece of body, the
message complete) and, past `MAX_PENDING_BYTES`, answers 400 and closes the connection, as h11
does. The count is checked after each read, so at most one read (256 KiB) more is held.
It also reads header values without the whitespace around them, as h11 does (RFC 9110 5.5).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["MAX_PENDING_BYTES", "BoundedHttpToolsProtocol"]

MAX_PENDING_BYTES = 16 * 1024
"""Bytes a client may send without the parser making progress (h11's default bound of a head)."""

TOO_LARGE = "Request head too large."


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` answering 400 (and closing) past `MAX_PENDING_BYTES` of a head, and
    reading header values as h11 reads them (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending = 0
        self._progressed = False

    def data_received(self, data: bytes) -> None:
        if self.parser is None or self.transport.is_closing():  # answered already, or gone
            return
        self._pending += len(data)
        self._progressed = False
        super().data_received(data)
        if self._progressed:
            self._pending = 0
        elif self._pending > MAX_PENDING_BYTES and not self.transport.is_closing():
            self.logger.warning("%s (over %d bytes)", TOO_LARGE, MAX_PENDING_BYTES)
            self.send_400_response(TOO_LARGE)

    def on_header(self, name: bytes, value: bytes) -> None:
        # RFC 9110 5.5: a field value is read without the whitespace around it (h11 strips it;
        # httptools keeps the trailing part, and `Mcp-Name: tool  ` then mismatched its body)
        super().on_header(name, value.strip(b" \t"))

    def on_headers_complete(self) -> None:
        self._progressed = True
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._progressed = True
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._progressed = True
        super().on_message_complete()
