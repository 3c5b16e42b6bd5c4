"""A small loopback HTTP server that speaks recorded model-API wire formats, for provider tests.

It answers every `POST` with the next queued `Reply`: a JSON body (any status), or a server-sent
event stream written exactly as the provider emits it (`sse_anthropic` for the Messages API's
named events, `sse_gemini` for Gemini's `data:`-only events separated by CRLF CRLF). Every request
is recorded (path with query, headers, parsed JSON body), so a test can assert what the SDK put on
the wire. It runs in a thread on a free port picked by the OS and is shut down by the `with` block.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    raw: bytes | None = None
    """An exact body (an SSE stream, or bytes that are not JSON), sent as is."""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    gap: float = 0.0
    """With `raw`: the body is sent event by event (split at blank lines), `gap` seconds apart."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


def sse_anthropic(events: list[dict[str, Any]]) -> Reply:
    """A Messages API event stream: `event: <type>` then `data: <json>` for each event."""
    out = []
    for event in events:
        out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return Reply(raw="".join(out).encode(), content_type="text/event-stream")


def sse_gemini(chunks: list[dict[str, Any]]) -> Reply:
    """A `streamGenerateContent?alt=sse` stream: `data: <json>` events separated by CRLF CRLF."""
    text = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks)
    return Reply(raw=text.encode(), content_type="text/event-stream")


class FakeApi:
    """The server; `replies` is the queue, `seen` what arrived. With `responder`, a request that
    finds the queue empty is answered by `responder(body)` (a server that works on what it got)."""

    def __init__(self, responder: Callable[[Any], Reply] | None = None) -> None:
        self.responder = responder
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.hung_up = threading.Event()
        """Set when a client closed the connection in the middle of a trickled stream."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def finish(self) -> None:
                with contextlib.suppress(OSError):  # the client hung up mid-stream, on purpose
                    super().finish()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                outer.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if outer.replies:
                    reply = outer.replies.popleft()
                elif outer.responder is not None:
                    reply = outer.responder(body)
                else:
                    reply = Reply(500, {"error": "no reply queued"})
                if reply.delay:
                    time.sleep(reply.delay)
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                if reply.gap and reply.raw is not None:
                    self._trickle(reply)
                    return
                with contextlib.suppress(OSError):  # a client that gave up (timeout tests)
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()

            def _trickle(self, reply: Reply) -> None:
                assert reply.raw is not None
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                text = reply.raw.decode()
                sep = "\r\n\r\n" if "\r\n\r\n" in text else "\n\n"
                try:
                    for event in text.split(sep):
                        if event:
                            self.wfile.write((event + sep).encode())
                            self.wfile.flush()
                            time.sleep(reply.gap)
                except OSError:  # the client went away: that is what the test wanted
                    outer.hung_up.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-api", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def bodies(self) -> list[Any]:
        return [s.body for s in self.seen]

    def __enter__(self) -> FakeApi:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
