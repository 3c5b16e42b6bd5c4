"""What scrubbing secrets from every outgoing message costs the gateway, per message.

    python bench/bench_scrub.py

The gateway scrubs each message it sends (`toolbridge.gateway._scrub`): over stdio, the line its
writer serializes (`scrub_json`); over HTTP, each response body (`ScrubbedResponses`). Measured
here in-process, on the JSON-RPC answer of a typical call (server-everything's `echo`, ~110 bytes)
and of a 4 kB text result, with no secret registered, with 4 and with 16 registered secrets
(the usual miss: no secret in the message), and the rare hit (a secret in the message, which is
then parsed, scrubbed and written again). Figures are medians of 7 rounds, in microseconds per
message.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import anyio

from toolbridge.gateway._scrub import ScrubbedResponses, scrub_json
from toolbridge.redact import forget_secrets, register_secret

ECHO = json.dumps(
    {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "Echo: hello"}]}},
    separators=(",", ":"),
)
BIG = json.dumps(
    {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "lorem ipsum " * 340}]}},
    separators=(",", ":"),
)


def per_call_us(fn: Any, n: int) -> float:
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(rounds)


def register(count: int) -> None:
    forget_secrets()
    for i in range(count):
        register_secret(f"sk-live-{i:04d}-0123456789abcdef", name=f"key{i}")


async def asgi_us(body: bytes, n: int) -> float:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def send(message: Any) -> None:
        return None

    async def receive() -> Any:
        return {"type": "http.request"}

    scrubbed = ScrubbedResponses(app)
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(n):
            await scrubbed({"type": "http"}, receive, send)
        middle = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(n):
            await app({"type": "http"}, receive, send)
        rounds.append((middle - (time.perf_counter() - start)) / n * 1e6)
    return statistics.median(rounds)


def main() -> int:
    rows = []
    for count in (0, 4, 16):
        register(count)
        rows.append(
            (f"stdio line, echo answer, {count} secrets", per_call_us(lambda: scrub_json(ECHO), 20000))
        )
        rows.append((f"stdio line, 4 kB answer, {count} secrets", per_call_us(lambda: scrub_json(BIG), 5000)))
        sse = f"event: message\r\ndata: {ECHO}\r\n\r\n".encode()
        rows.append((f"HTTP SSE response, echo answer, {count} secrets", anyio.run(asgi_us, sse, 5000)))
    register(4)
    hit = ECHO.replace("hello", "SK-LIVE-0001-0123456789ABCDEF")
    rows.append(
        (
            "stdio line, echo answer with a secret (scrubbed), 4 secrets",
            per_call_us(lambda: scrub_json(hit), 5000),
        )
    )
    width = max(len(r[0]) for r in rows)
    for name, us in rows:
        print(f"{name:<{width}}  {us:7.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
