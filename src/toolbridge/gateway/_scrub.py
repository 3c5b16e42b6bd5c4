"""Nothing secret leaves the gateway: every message it sends is scrubbed where it is written.

The gateway holds secrets (upstream environment values and headers, tokens, OAuth client
secrets, the manifest's `secrets`); an upstream may echo one back in anything it answers (a tool
result, an error, a log line, a prompt, a resource, a completion, a description). Rather than
cleaning each of those paths, the gateway scrubs at the two places where every outgoing message
is written, which no handler (present or future) can go around:

- stdio: `ScrubbingServer.run` wraps the write stream of every connection it serves
  (`ScrubbedWrites`), unless the stream scrubs itself (the gateway's own pipe writer,
  `_stdio._LineWriter`, scrubs the line it serializes, with `scrub_json`);
- Streamable HTTP: `ScrubbingServer.streamable_http_app` adds `ScrubbedResponses`, an ASGI
  middleware over every response body (JSON answers, and each `data:` line of SSE streams: both
  eras, stateful, stateless, resumed streams).

A message is scrubbed only when a registered secret occurs in its serialized text, in any of the
forms and letter cases `toolbridge.redact` knows (`contains_secret`: a substring test over the
lower-cased text, a few microseconds per kilobyte). Then the message is parsed, every string in
it (keys too) passes through `redact`, and it is written again: a client always receives valid
JSON-RPC, with `***` where the secret was. The message's `jsonrpc`, `id` and `method` are the
protocol's and are kept as they are. With no secret registered, the cost is one attribute test.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

import mcp_types as types
from mcp.server import Server
from mcp.shared.message import SessionMessage

from ..redact import contains_secret, has_secrets, redact

__all__ = ["ScrubbedResponses", "ScrubbedWrites", "ScrubbingServer", "scrub_json", "scrub_value"]

_PROTOCOL_KEYS = frozenset({"jsonrpc", "id", "method"})
"""A message's own keys whose values are kept: the client matches answers by `id`."""

_MEDIA_TYPES = frozenset({"image", "audio"})
"""Content blocks whose `data` is base64."""

_T = TypeVar("_T", str, bytes)


def scrub_value(value: Any, *, message: bool = False) -> Any:
    """`value` (parsed JSON) with `redact` applied to every string in it, keys included.

    With `message`, `value` is a JSON-RPC message (or a batch of them) whose `jsonrpc`, `id` and
    `method` are kept. Base64 payloads are kept too (a resource's `blob`, the `data` of an image
    or audio block): a short secret would occur in a large one by chance, in some letter case,
    and replacing it would corrupt the media without hiding anything.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        if message:
            return {k: v if k in _PROTOCOL_KEYS else scrub_value(v) for k, v in value.items()}
        media = value.get("type") in _MEDIA_TYPES
        return {
            redact(k): v
            if (k == "blob" or (media and k == "data")) and isinstance(v, str)
            else scrub_value(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [scrub_value(v, message=message) for v in value]
    return value


def scrub_json(data: _T) -> _T:
    """A serialized JSON-RPC message (text or UTF-8 bytes) without any registered secret.

    Returns `data` itself when no secret occurs in it (the usual case). Text that is not JSON is
    scrubbed as text.
    """
    if not contains_secret(data):
        return data
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        parsed = json.loads(text)
    except ValueError:
        cleaned = redact(text)
    else:
        cleaned = json.dumps(scrub_value(parsed, message=True), ensure_ascii=False, separators=(",", ":"))
    return cleaned.encode("utf-8", "surrogatepass") if isinstance(data, bytes) else cleaned


class ScrubbedWrites:
    """A server write stream that scrubs every `SessionMessage` before passing it on."""

    scrubs = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage) -> None:
        if has_secrets():
            text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            cleaned = scrub_json(text)
            if cleaned is not text:
                message = types.jsonrpc_message_adapter.validate_json(cleaned, by_name=False)
                item = SessionMessage(message, metadata=item.metadata)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> ScrubbedWrites:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ScrubbingServer(Server[dict[str, object]]):
    """The SDK server, scrubbing every message it sends over any transport (see the module)."""

    async def run(self, read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
        if not getattr(write_stream, "scrubs", False):
            write_stream = ScrubbedWrites(write_stream)
        await super().run(read_stream, write_stream, *args, **kwargs)

    def streamable_http_app(self, *args: Any, **kwargs: Any) -> Any:
        app = super().streamable_http_app(*args, **kwargs)
        app.add_middleware(ScrubbedResponses)
        return app


Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ScrubbedResponses:
    """ASGI middleware: every HTTP response body without registered secrets.

    A JSON (or other non-stream) body is held until complete, scrubbed whole (`scrub_json`), and
    sent with its `content-length` corrected; only when a secret occurs in it does it change. An
    SSE stream (`text/event-stream`) passes line by line: a chunk of whole lines with no secret
    passes as it is, a `data:` line with one is scrubbed as a JSON-RPC message, and the end of a
    line cut between two chunks waits for the rest of it.
    """

    def __init__(self, app: Callable[[Scope, Any, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _ResponseScrubber(send).send)


class _ResponseScrubber:
    """The `send` of one response (see `ScrubbedResponses`)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._mode = "pass"
        self._start: MutableMapping[str, Any] | None = None
        self._held: list[bytes] = []
        self._partial = b""

    async def send(self, message: MutableMapping[str, Any]) -> None:
        kind = message.get("type")
        if kind == "http.response.start":
            ctype = next(
                (v for k, v in message.get("headers") or [] if k.lower() == b"content-type"), b""
            ).lower()
            if ctype.startswith(b"text/event-stream"):
                self._mode = "sse"
            elif has_secrets():
                self._mode, self._start = "hold", message
                return
            await self._send(message)
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        if self._mode == "sse":
            await self._sse(message)
        elif self._mode == "hold":
            self._held.append(message.get("body", b""))
            if not message.get("more_body", False):
                await self._release()
        else:
            await self._send(message)

    async def _release(self) -> None:
        body = b"".join(self._held)
        self._held = []
        cleaned = scrub_json(body)
        start = self._start
        assert start is not None
        if cleaned is not body:
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(cleaned)).encode()))
            start = {**start, "headers": headers}
        await self._send(start)
        await self._send({"type": "http.response.body", "body": cleaned, "more_body": False})

    async def _sse(self, message: MutableMapping[str, Any]) -> None:
        chunk: bytes = message.get("body", b"")
        more = message.get("more_body", False)
        if not self._partial and (chunk.endswith(b"\n") or not more) and not contains_secret(chunk):
            await self._send(message)
            return
        data = self._partial + chunk
        cut = len(data) if not more else data.rfind(b"\n") + 1
        whole, self._partial = data[:cut], data[cut:]
        if whole or not more:
            lines = whole.splitlines(keepends=True)
            body = b"".join(_scrub_sse_line(line) for line in lines)
            await self._send({**message, "body": body})


def _scrub_sse_line(line: bytes) -> bytes:
    if not contains_secret(line):
        return line
    content = line.rstrip(b"\r\n")
    ending = line[len(content) :]
    if content.startswith(b"data:"):
        payload = content[5:]
        lead = b" " if payload.startswith(b" ") else b""
        return b"data:" + lead + scrub_json(payload[len(lead) :]) + ending
    return redact(content.decode("utf-8", "replace")).encode("utf-8", "surrogatepass") + ending
