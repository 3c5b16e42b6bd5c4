"""A tiny OpenAI-compatible HTTP server on loopback, for testing `OpenAIModel` on the real SDK.

It answers `POST /v1/chat/completions` with queued, recorded wire responses (JSON bodies, or
server-sent-event chunk lists for streaming) and records every request it received. It runs
in a thread (stdlib `ThreadingHTTPServer`) on a free port picked by the OS, and is shut down
by the fixture that starts it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    chunks: list[Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class _QuietServer(ThreadingHTTPServer):
    """A client that hung up (a cancelled request) is normal here, not an error to print.

    Without this, a delayed reply written after the client left prints a traceback on stderr
    seconds later, inside whichever test runs then.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAI:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                payload = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(payload)
                outer.auth_headers.append(self.headers.get("authorization", ""))
                reply = (
                    outer.replies.popleft()
                    if outer.replies
                    else Reply(500, {"error": {"message": "no reply queued"}})
                )
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.chunks is not None:
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for chunk in reply.chunks:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    return
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: tuple[int, int] = (11, 7),
) -> dict[str, Any]:
    """A recorded `chat.completion` body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def chunk(
    delta: dict[str, Any], finish_reason: str | None = None, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    """A recorded `chat.completion.chunk`."""
    body: dict[str, Any] = {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1764460800,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["choices"] = []
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body
