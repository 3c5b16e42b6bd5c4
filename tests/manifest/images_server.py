"""A loopback server speaking OpenAI's images API wire format, for `Ai.Image` tests.

`POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart: its text fields
recorded as they are, its files as `{"files": {field: [bytes, ...]}}`) answer the next queued
`(status, content type, body bytes)`
(JSON `{created, data: [{b64_json | url, revised_prompt?}]}` by default) and records each
request body; `GET /files/NAME` answers what `files[NAME]` holds (content type, bytes), for
`url` answers. It runs in a thread on a free port and is stopped by its context manager.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tiny_png(width: int = 1, height: int = 1) -> bytes:
    """A valid PNG of `width` x `height` black pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class ImagesApi:
    def __init__(self) -> None:
        self.replies: deque[tuple[int, str, bytes]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.url = ""

    def answer_b64(self, *images: bytes, revised: str | None = None) -> None:
        data = [{"b64_json": base64.b64encode(i).decode()} for i in images]
        if revised is not None:
            for item in data:
                item["revised_prompt"] = revised
        self.answer_json({"created": 1, "data": data})

    def answer_json(self, body: Any, status: int = 200) -> None:
        self.replies.append((status, "application/json", json.dumps(body).encode()))

    def answer_raw(self, status: int, content_type: str, body: bytes) -> None:
        self.replies.append((status, content_type, body))


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    """A multipart/form-data body: text fields by name, files under `files` by field name."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields: dict[str, Any] = {}
    files: dict[str, list[bytes]] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files.setdefault(name, []).append(data)
        else:
            fields[name] = data.decode()
    return {**fields, "files": files}


@contextmanager
def images_api() -> Iterator[ImagesApi]:
    api = ImagesApi()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            kind = self.headers.get("content-type", "")
            if kind.startswith("multipart/form-data"):
                api.requests.append({"path": self.path, **_multipart(kind, body)})
            else:
                api.requests.append({"path": self.path, **json.loads(body or b"{}")})
            if not api.replies:
                self._send(500, "application/json", b'{"error": {"message": "no reply queued"}}')
                return
            self._send(*api.replies.popleft())

        def do_GET(self) -> None:
            name = self.path.rsplit("/", 1)[-1]
            if name not in api.files:
                self._send(404, "text/plain", b"no such file")
                return
            self._send(200, *api.files[name])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
