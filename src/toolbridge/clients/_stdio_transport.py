"""A stdio transport for the MCP SDK's client session that survives big and hostile output.

The official SDK keeps its JSON-RPC layer (request ids, pending calls, cancellation, EOF fan-out)
in `mcp.shared.jsonrpc_dispatcher`; a *transport* only turns bytes into messages and messages into
bytes. `StdioTransport` is a drop-in replacement for `mcp.client.stdio.stdio_client` that does
that part differently, because the SDK's own reader re-joins and re-splits its whole buffer for
every chunk (quadratic in the length of a line: a 50 MiB result takes ~17 s) and caps nothing.

How bytes become messages here:

* **Linear reading.** Raw bytes are read in chunks; newlines are searched only in the new chunk;
  the pieces of an unfinished line are kept in a list and joined once, when the newline arrives
  (`_LineAssembler`). Each complete line is validated once by pydantic-core
  (`mcp_types.jsonrpc_message_adapter.validate_json`), on a worker thread when it is large, so a
  64 MiB result does not freeze other clients on the same event loop.
* **A size cap** (`max_message_bytes`, default `DEFAULT_MAX_MESSAGE_BYTES` = 128 MiB). A line that
  grows past the cap stops being stored (memory stays bounded by the cap); the rest of it is read
  and thrown away up to its newline, and then the session goes on. If the line's request id can be
  told (see *Finding the id* below), a JSON-RPC error response for that id is synthesized, so the
  pending call fails at once instead of at its timeout.
* **Malformed lines.** A line that is not valid JSON or not a valid JSON-RPC message, but carries
  the id of a response, becomes a synthesized error for that id; any other malformed line is
  logged (text bounded, rate-limited) and skipped.
* **Synthesized errors** carry `error.data = {"toolbridge": "protocol", "reason": REASON, ...}`
  with `REASON` one of `"message_too_large"` (plus `size` and `limit` in bytes) or `"malformed"`
  (plus a bounded `detail`). The client layer maps that marker to `ProtocolError`
  (`ERR_MCP_PROTOCOL`). The transport does not know which ids are pending; an error for an id
  nobody waits for is dropped by the dispatcher (logged at debug), so a wrong guess is harmless.

Finding the id of a message too large or too broken to parse (a heuristic, on purpose cheap):

* The first `_HEAD_SCAN_BYTES` of the line are scanned by a small JSON tokenizer that tracks
  nesting and strings and records the *top-level* keys and the top-level `"id"` value (an integer
  or a string). Python SDK servers write `{"jsonrpc":..,"id":..,"result":..}`, so the id is there.
* The last `_TAIL_SCAN_BYTES` are matched against `"id": VALUE }` (optionally followed by
  `"jsonrpc": "2.0"`) right before the end of the line: only the top-level object can close
  there, so that id is top-level too. TypeScript SDK servers write
  `{"result":..,"jsonrpc":..,"id":..}`, so the id is there.
* An error is synthesized only for what looks like a *response*: never when a top-level `method`
  or `params` key was seen (a server request has its own id space; answering it would resolve one
  of ours by mistake). When the cap is crossed, the head alone decides, and only if it has seen a
  `result` or `error` key; otherwise the decision waits for the end of the line (and the tail).

Other behaviour:

* **stderr** is read by the transport (never passed through to the caller's stderr or stdout):
  each line goes to `logger` (level from an `ERROR`/`WARN`/`INFO`/`DEBUG` token if the line has
  one, else INFO; rate-limited) and into a bounded tail kept for error messages (`stderr_tail()`).
* **Process exit** is noticed by polling `returncode`; the read stream ends at stdout EOF, or at the
  latest `_EOF_AFTER_EXIT_S` after the process exited (a grandchild may hold stdout open), so
  every pending call fails at once with the dispatcher's CONNECTION_CLOSED.
* **Shutdown** runs shielded from cancellation and every wait is bounded: stop the writer, close
  stdin, wait `shutdown_grace_s` for exit, SIGTERM the whole process group (the server runs in its
  own session), wait `term_grace_s`, SIGKILL the group. A group that outlives its leader (a
  grandchild such as the `node` under `sh -c` or `npx`) is terminated the same way.

Environment policy: by default (`inherit_env=True`) the child gets this process's environment
with `env` merged over it (as a shell would start it). With `inherit_env=False` it gets only the
SDK's allow-list (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`) plus `env`, which keeps API
keys of the host out of a server that does not need them.

Usage (what `StdioClient` does)::

    transport = StdioTransport("python", ["server.py"], logger=logging.getLogger("toolbridge.x"))
    async with mcp.Client(transport, logging_callback=make_logging_callback(log)) as client:
        await client.call_tool("echo", {"text": "hi"})
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.client.session import LoggingFnT
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolbridge.errors import TransportError, bounded

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "PROTOCOL_MARKER",
    "StdioTransport",
    "make_logging_callback",
    "protocol_error_data",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 128 * 1024 * 1024
"""Default cap on one message (one line), in bytes: 128 MiB.

Generous on purpose: real tool results of tens of MiB (file contents, screenshots, query dumps)
must pass. Receiving a message costs about 2-3x its size in memory at the peak (the pieces, the
joined line, the parsed objects), so this bounds one connection at roughly 400 MiB. Lower it for
untrusted servers.
"""

PROTOCOL_MARKER: Final = "toolbridge"
"""Key in `error.data` of an error the transport synthesized (value: `"protocol"`)."""

REASON_TOO_LARGE: Final = "message_too_large"
REASON_MALFORMED: Final = "malformed"

_READ_CHUNK: Final = 1024 * 1024
_HEAD_SCAN_BYTES: Final = 8192
_TAIL_SCAN_BYTES: Final = 1024
_THREAD_PARSE_BYTES: Final = 1024 * 1024
"""Lines at least this long are joined and parsed on a worker thread."""

_STDERR_LINE_MAX: Final = 8192
_STDERR_TAIL_LINES: Final = 200
_EXIT_POLL_S: Final = 0.02
_EOF_AFTER_EXIT_S: Final = 0.25
_WRITER_FLUSH_S: Final = 0.5
_REAP_S: Final = 2.0
_LOG_TEXT_MAX: Final = 300

_LEVEL_TOKEN = re.compile(rb"\b(CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE)\b")
_TOKEN_LEVELS: Final = {
    b"CRITICAL": logging.CRITICAL,
    b"FATAL": logging.CRITICAL,
    b"ERROR": logging.ERROR,
    b"WARNING": logging.WARNING,
    b"WARN": logging.WARNING,
    b"INFO": logging.INFO,
    b"DEBUG": logging.DEBUG,
    b"TRACE": logging.DEBUG,
}
_MCP_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_module_logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Rate-limited logging
# --------------------------------------------------------------------------------------------


class _RateLimiter:
    """A token bucket: `burst` events at once, then `per_second` on average.

    `take()` answers whether one more event may be logged and how many were suppressed since the
    last one that was, so the next logged line can say so.
    """

    def __init__(self, per_second: float = 20.0, burst: int = 100) -> None:
        self._rate = per_second
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self.suppressed = 0

    def take(self) -> tuple[bool, int]:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            dropped, self.suppressed = self.suppressed, 0
            return True, dropped
        self.suppressed += 1
        return False, 0


def _suffix(dropped: int) -> str:
    return f" ({dropped} similar messages suppressed)" if dropped else ""


def make_logging_callback(
    logger: logging.Logger, *, per_second: float = 20.0, burst: int = 100
) -> LoggingFnT:
    """Build an SDK `logging_callback` that sends server log notifications to Python logging.

    Each `notifications/message` is logged on `logger` at the matching level (`notice` -> INFO,
    `alert`/`emergency` -> CRITICAL), with the server's logger name and its data (bounded in
    length). Logging is rate-limited (a token bucket of `burst` messages refilled at `per_second`);
    suppressed messages are counted and the count is reported with the next logged one. A message
    below the logger's effective level costs one dictionary lookup, so a flood of notifications
    does not slow the calls that follow it.

    Args:
        logger: where the messages go (per client, e.g. `toolbridge.server.NAME`).
        per_second: average number of messages logged per second once the burst is spent.
        burst: how many messages may be logged at once.

    Returns:
        An async callable for `mcp.Client(logging_callback=...)`.
    """
    limiter = _RateLimiter(per_second, burst)

    async def callback(params: types.LoggingMessageNotificationParams) -> None:
        level = _MCP_LEVELS.get(params.level, logging.INFO)
        if not logger.isEnabledFor(level):
            return
        allowed, dropped = limiter.take()
        if not allowed:
            return
        data = params.data
        if isinstance(data, str):
            text = data
        else:
            try:
                text = json.dumps(data, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                text = repr(data)
        source = f"[{bounded(params.logger, 100)}] " if params.logger else ""
        logger.log(level, "server log: %s%s%s", source, bounded(text, 1000), _suffix(dropped))

    return callback


# --------------------------------------------------------------------------------------------
# Line assembly and id heuristics (pure, synchronous)
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Line:
    """A complete line, still in pieces (joined by the consumer, possibly on a thread)."""

    pieces: list[bytes]
    size: int


@dataclass(slots=True)
class _OversizeStarted:
    """The current line just crossed the cap; `head` is its first bytes."""

    head: bytes
    size: int


@dataclass(slots=True)
class _OversizeEnded:
    """An oversized line ended (its newline arrived); it was `size` bytes long."""

    head: bytes
    tail: bytes
    size: int


_Event = _Line | _OversizeStarted | _OversizeEnded


class _LineAssembler:
    """Split a byte stream into lines in linear time, discarding lines longer than a cap.

    `feed(chunk)` looks for newlines only in `chunk` and stores the pieces of the unfinished line
    in a list; a complete line is handed out as its pieces (joined once by the consumer). When the
    stored size would pass `max_bytes`, the pieces are dropped, only the head and a rolling tail of
    the line are kept, and the rest of it is counted and thrown away until its newline.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._pieces: list[bytes] = []
        self._size = 0
        self._discarding = False
        self._head = b""
        self._tail = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes of the unfinished line seen so far (stored or discarded)."""
        return self._size

    def feed(self, chunk: bytes) -> list[_Event]:
        events: list[_Event] = []
        start = 0
        length = len(chunk)
        while start < length:
            newline = chunk.find(b"\n", start)
            end = length if newline < 0 else newline
            if end > start:
                piece = chunk if (start == 0 and end == length) else chunk[start:end]
                self._append(piece, events)
            if newline < 0:
                break
            events.append(self._finish())
            start = newline + 1
        return events

    def _append(self, piece: bytes, events: list[_Event]) -> None:
        if self._discarding:
            self._size += len(piece)
            self._tail = (self._tail + piece[-_TAIL_SCAN_BYTES:])[-_TAIL_SCAN_BYTES:]
            return
        if self._size + len(piece) <= self._max:
            self._pieces.append(piece)
            self._size += len(piece)
            return
        head_parts: list[bytes] = []
        have = 0
        for part in [*self._pieces, piece]:
            head_parts.append(part[: _HEAD_SCAN_BYTES - have])
            have += len(head_parts[-1])
            if have >= _HEAD_SCAN_BYTES:
                break
        self._head = b"".join(head_parts)
        self._pieces = []
        self._size += len(piece)
        self._tail = piece[-_TAIL_SCAN_BYTES:]
        self._discarding = True
        events.append(_OversizeStarted(self._head, self._size))

    def _finish(self) -> _Event:
        event: _Event
        if self._discarding:
            event = _OversizeEnded(self._head, self._tail, self._size)
        else:
            event = _Line(self._pieces, self._size)
        self._pieces = []
        self._size = 0
        self._discarding = False
        self._head = b""
        self._tail = b""
        return event


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_INT = re.compile(rb"-?\d+")
_TAIL_ID = re.compile(
    rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$', re.DOTALL
)
_WS = b" \t\r\n"


@dataclass(slots=True)
class _HeadInfo:
    keys: list[str]
    request_id: int | str | None


def _decode_id(raw: bytes) -> int | str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value


def _skip_ws(data: bytes, i: int) -> int:
    """The index of the first byte at or after `i` that is not JSON whitespace (`len(data)` if none)."""
    n = len(data)
    while i < n and data[i] in _WS:
        i += 1
    return i


def _scan_head(head: bytes) -> _HeadInfo:
    """Top-level keys and top-level `"id"` of a JSON object, from its first bytes only.

    Tolerates a truncated or broken document: it stops at the first thing it cannot follow.
    """
    info = _HeadInfo([], None)
    n = len(head)
    i = _skip_ws(head, 0)
    if i >= n or head[i] != ord("{"):
        return info
    i += 1
    depth = 1
    expect_key = True
    while i < n:
        c = head[i]
        if c == ord('"'):
            match = _STRING.match(head, i)
            if match is None:
                return info
            i = match.end()
            if depth == 1 and expect_key:
                key = _decode_id(match.group())
                j = _skip_ws(head, i)
                if j >= n or head[j] != ord(":"):
                    return info
                j = _skip_ws(head, j + 1)
                if isinstance(key, str):
                    info.keys.append(key)
                    if key == "id" and j < n:
                        value = _STRING.match(head, j) if head[j] == ord('"') else _INT.match(head, j)
                        if value is not None:
                            info.request_id = _decode_id(value.group())
                expect_key = False
                i = j
            continue
        if c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return info
        elif c == ord(",") and depth == 1:
            expect_key = True
        i += 1
    return info


def _scan_tail(tail: bytes) -> int | str | None:
    """The top-level `"id"` if it is the last member of the object ending `tail`."""
    match = _TAIL_ID.search(tail)
    return _decode_id(match.group(1)) if match else None


def _is_request_like(keys: Sequence[str]) -> bool:
    return "method" in keys or "params" in keys


def protocol_error_data(reason: str, **extra: Any) -> dict[str, Any]:
    """The `error.data` of an error the transport synthesized (the marker the client maps)."""
    return {PROTOCOL_MARKER: "protocol", "reason": reason, **extra}


def _synthesized(request_id: int | str, code: int, message: str, data: dict[str, Any]) -> SessionMessage:
    error = types.ErrorData(code=code, message=message, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB ({size} bytes)"


def _too_large(request_id: int | str, size: int, limit: int, *, complete: bool) -> SessionMessage:
    at_least = "" if complete else "at least "
    message = (
        f"the MCP server's response is {at_least}{_mib(size)}, above the message size limit of "
        f"{_mib(limit)}; it was discarded"
    )
    data = protocol_error_data(REASON_TOO_LARGE, size=size, limit=limit, complete=complete)
    return _synthesized(request_id, types.INVALID_REQUEST, message, data)


@dataclass(slots=True)
class _Malformed:
    """A line that is not a valid JSON-RPC message; `request_id` if a response id was found."""

    request_id: int | str | None
    detail: str
    text: str


def _parse_line(line: bytes) -> SessionMessage | _Malformed | None:
    """One complete line -> a message, a malformed-line report, or None for a blank line."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        if not line.strip():
            return None
        error = exc
    detail = validation_detail(error)
    text = line[:_LOG_TEXT_MAX].decode("utf-8", "replace")
    request_id: int | str | None = None
    try:
        document = json.loads(line)
    except ValueError:
        head = _scan_head(line[:_HEAD_SCAN_BYTES])
        request_id = head.request_id
        if request_id is None:
            request_id = _scan_tail(line[-_TAIL_SCAN_BYTES:])
        if _is_request_like(head.keys):
            request_id = None
        return _Malformed(request_id, detail, text)
    if isinstance(document, dict):
        detail = validation_detail(error, _member_for(document))
        if not _is_request_like(list(document)):
            candidate = document.get("id")
            if isinstance(candidate, int | str) and not isinstance(candidate, bool):
                request_id = candidate
    return _Malformed(request_id, detail, text)


def _member_for(document: dict[str, Any]) -> str:
    """Which JSON-RPC message kind a JSON object means to be, from its keys."""
    if "method" in document:
        return "JSONRPCRequest" if "id" in document else "JSONRPCNotification"
    return "JSONRPCError" if "error" in document else "JSONRPCResponse"


def validation_detail(exc: ValidationError, member: str | None = None) -> str:
    """The first problem pydantic found, with where it was (bounded), for error messages.

    `member`: the union member (e.g. `JSONRPCResponse`) whose problems to prefer, so that a bad
    response is not explained by what it lacks to be a request.
    """
    errors = exc.errors(include_url=False)
    if not errors:
        return bounded(str(exc), 300)
    preferred = [e for e in errors if member is not None and e.get("loc", ())[:1] == (member,)]
    first = (preferred or errors)[0]
    loc = first.get("loc", ())
    where = ".".join(str(part) for part in (loc[1:] if preferred else loc))
    message = str(first.get("msg", ""))
    return bounded(f"{where}: {message}" if where else message, 300)


def _join_and_parse(pieces: list[bytes]) -> SessionMessage | _Malformed | None:
    line = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    pieces.clear()
    return _parse_line(line)


# --------------------------------------------------------------------------------------------
# The transport
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Running:
    """What one run of the transport owns, from `__aenter__` to `__aexit__`."""

    process: anyio.abc.Process
    tg: anyio.abc.TaskGroup
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    writer_done: anyio.Event


class StdioTransport(AbstractAsyncContextManager[TransportStreams]):
    """Run an MCP server as a child process and talk to it over stdin/stdout.

    Implements the SDK's `mcp.client._transport.Transport` protocol: entering it starts the
    process and yields `(read_stream, write_stream)` for `mcp.Client(transport)`. It can be entered
    again after it was exited (a fresh process each time), but not twice at once.

    Args:
        command: the executable (looked up on `PATH` as `subprocess` does).
        args: its arguments.
        env: variables for the child, merged over the inherited environment (see `inherit_env`).
        cwd: working directory of the child.
        max_message_bytes: the largest message (one line) accepted from the server, in bytes;
            larger ones are discarded as they stream and their call fails (see the module text).
        shutdown_grace_s: how long the server may take to exit after its stdin closes.
        term_grace_s: how long the process group may take to exit after SIGTERM before SIGKILL.
        logger: where stderr lines and protocol problems are logged (default: this module's).
        inherit_env: True: the child gets this process's environment plus `env`; False: only the
            SDK's allow-list (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`) plus `env`.

    Raises:
        ValueError: `max_message_bytes` or a grace period is not positive.

    Attributes:
        pid: the server's process id while it runs (None before the first start).
        exited: set when the server's stdout reached EOF or the process exited.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        shutdown_grace_s: float = 5.0,
        term_grace_s: float = 2.0,
        logger: logging.Logger | None = None,
        inherit_env: bool = True,
    ) -> None:
        if max_message_bytes <= 0:
            raise ValueError(f"max_message_bytes must be positive, got {max_message_bytes}")
        if shutdown_grace_s < 0 or term_grace_s < 0:
            raise ValueError("shutdown_grace_s and term_grace_s must not be negative")
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.max_message_bytes = max_message_bytes
        self.shutdown_grace_s = shutdown_grace_s
        self.term_grace_s = term_grace_s
        self.inherit_env = inherit_env
        self.logger = logger or _module_logger
        self.pid: int | None = None
        self.exited = anyio.Event()
        self._process: anyio.abc.Process | None = None
        self._stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._running: _Running | None = None
        self._assembler: _LineAssembler | None = None
        self._malformed_log = _RateLimiter()
        self._stderr_log = _RateLimiter()

    # -- public state --------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The server's exit status once it exited (negative: killed by that signal), else None."""
        return self._process.returncode if self._process is not None else None

    @property
    def unfinished_line_bytes(self) -> int:
        """Bytes of the line being received that have arrived so far (stored or discarded)."""
        return self._assembler.pending_bytes if self._assembler is not None else 0

    def stderr_tail(self, lines: int = 20) -> str:
        """The last `lines` lines the server wrote to stderr, joined by newlines."""
        if lines <= 0:
            return ""
        kept = list(self._stderr_tail)[-lines:]
        return "\n".join(kept)

    # -- context manager -----------------------------------------------------------------------

    async def __aenter__(self) -> TransportStreams:
        """Start the server and return `(read_stream, write_stream)` for the SDK session.

        Raises:
            TransportError: the process could not be started (`ERR_MCP_TRANSPORT`).
            RuntimeError: the transport is already running.
        """
        if self._running is not None:
            raise RuntimeError("this StdioTransport is already running; create another one")
        self.exited = anyio.Event()
        self._stderr_tail.clear()
        try:
            process = await anyio.open_process(
                [self.command, *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self._child_env(),
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(
                f"could not start the MCP server {self.command!r}: {exc.strerror or exc}",
                details={"command": self.command},
            ) from exc
        self._process = process
        self.pid = process.pid
        # No await between the spawn and the task group: a cancellation there would leak it.
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        stdout_eof = anyio.Event()
        writer_done = anyio.Event()
        reader_scope = anyio.CancelScope()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        tg.start_soon(self._read_stdout, process, read_writer, reader_scope, stdout_eof)
        tg.start_soon(self._write_stdin, process, write_reader, reader_scope, writer_done)
        tg.start_soon(self._read_stderr, process)
        tg.start_soon(self._watch_exit, process, reader_scope, stdout_eof)
        self._running = _Running(process, tg, read_stream, write_stream, writer_done)
        return read_stream, write_stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server (see `_shutdown`); the caller's exception, if any, propagates unchanged.

        The body's exception is deliberately not passed into the internal task group, whose tasks
        never raise: so it is never wrapped in an `ExceptionGroup`.
        """
        running, self._running = self._running, None
        if running is None:
            return
        try:
            with anyio.CancelScope(shield=True):
                await self._shutdown(
                    running.process, running.read_stream, running.write_stream, running.writer_done
                )
        finally:
            # The tasks only drain pipes by now; cancel them and join (they never raise).
            running.tg.cancel_scope.cancel()
            await running.tg.__aexit__(None, None, None)

    def _child_env(self) -> dict[str, str]:
        base = dict(os.environ) if self.inherit_env else get_default_environment()
        return base | (self.env or {})

    # -- tasks ---------------------------------------------------------------------------------

    async def _read_stdout(
        self,
        process: anyio.abc.Process,
        out: MemoryObjectSendStream[SessionMessage | Exception],
        scope: anyio.CancelScope,
        eof: anyio.Event,
    ) -> None:
        """Turn stdout bytes into messages; after the session is gone, drain and discard."""
        assert process.stdout is not None
        assembler = self._assembler = _LineAssembler(self.max_message_bytes)
        delivering = True
        reported: int | str | None = None  # id already failed for the current oversized line

        async def deliver(message: SessionMessage) -> None:
            nonlocal delivering
            if not delivering:
                return
            try:
                await out.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                delivering = False  # the session is gone; keep draining so the server can exit

        try:
            with scope:
                while True:
                    try:
                        chunk = await process.stdout.receive(_READ_CHUNK)
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        break
                    for event in assembler.feed(chunk):
                        if isinstance(event, _Line):
                            if not delivering:
                                continue
                            if event.size >= _THREAD_PARSE_BYTES:
                                parsed = await anyio.to_thread.run_sync(_join_and_parse, event.pieces)
                            else:
                                parsed = _join_and_parse(event.pieces)
                            if isinstance(parsed, SessionMessage):
                                await deliver(parsed)
                            elif isinstance(parsed, _Malformed):
                                await self._on_malformed(parsed, deliver)
                        elif isinstance(event, _OversizeStarted):
                            reported = None
                            head = _scan_head(event.head)
                            if (
                                head.request_id is not None
                                and ("result" in head.keys or "error" in head.keys)
                                and not _is_request_like(head.keys)
                            ):
                                reported = head.request_id
                                self.logger.warning(
                                    "MCP server sent a message above the %d-byte limit for request %r; "
                                    "discarding it",
                                    self.max_message_bytes,
                                    reported,
                                )
                                await deliver(
                                    _too_large(reported, event.size, self.max_message_bytes, complete=False)
                                )
                        else:
                            self._on_oversize_end(event, reported)
                            if reported is None:
                                request_id = self._oversize_id(event)
                                if request_id is not None:
                                    await deliver(
                                        _too_large(
                                            request_id, event.size, self.max_message_bytes, complete=True
                                        )
                                    )
                            reported = None
        except Exception:  # a bug here must not surface as an ExceptionGroup from the transport
            self.logger.exception("reading the MCP server's stdout failed")
        finally:
            eof.set()
            self.exited.set()
            with anyio.CancelScope(shield=True):
                await out.aclose()
        if assembler.pending_bytes:
            self.logger.warning(
                "MCP server's stdout ended inside a message (%d bytes without a newline)",
                assembler.pending_bytes,
            )

    def _oversize_id(self, event: _OversizeEnded) -> int | str | None:
        head = _scan_head(event.head)
        if _is_request_like(head.keys):
            return None
        return head.request_id if head.request_id is not None else _scan_tail(event.tail)

    def _on_oversize_end(self, event: _OversizeEnded, reported: int | str | None) -> None:
        self.logger.warning(
            "discarded a %d-byte message from the MCP server (limit %d bytes)%s",
            event.size,
            self.max_message_bytes,
            f" answering request {reported!r}" if reported is not None else "",
        )

    async def _on_malformed(
        self, bad: _Malformed, deliver: Callable[[SessionMessage], Awaitable[None]]
    ) -> None:
        allowed, dropped = self._malformed_log.take()
        if allowed:
            self.logger.warning(
                "MCP server sent a line that is not a valid JSON-RPC message (%s)%s: %r%s",
                bad.detail,
                f", failing request {bad.request_id!r}" if bad.request_id is not None else ", skipped",
                bad.text,
                _suffix(dropped),
            )
        if bad.request_id is not None:
            message = f"the MCP server's response is not a valid JSON-RPC message: {bad.detail}"
            data = protocol_error_data(REASON_MALFORMED, detail=bad.detail)
            await deliver(_synthesized(bad.request_id, types.PARSE_ERROR, message, data))

    async def _write_stdin(
        self,
        process: anyio.abc.Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        reader_scope: anyio.CancelScope,
        done: anyio.Event,
    ) -> None:
        """Serialize messages from the session onto the server's stdin, one line each."""
        assert process.stdin is not None
        try:
            async with source:
                async for session_message in source:
                    payload = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(payload.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            # The server stopped reading; end the read side so pending calls fail now, not later.
            self.logger.debug("writing to the MCP server's stdin failed: %r", exc)
            reader_scope.cancel()
        except Exception:
            self.logger.exception("writing to the MCP server's stdin failed")
            reader_scope.cancel()
        finally:
            done.set()

    async def _read_stderr(self, process: anyio.abc.Process) -> None:
        """Log the server's stderr line by line and keep a bounded tail of it."""
        assert process.stderr is not None
        assembler = _LineAssembler(_STDERR_LINE_MAX)
        try:
            while True:
                try:
                    chunk = await process.stderr.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                for event in assembler.feed(chunk):
                    if isinstance(event, _Line):
                        self._stderr_line(b"".join(event.pieces))
                    elif isinstance(event, _OversizeEnded):
                        self._stderr_line(event.head + f"… [{event.size} bytes]".encode())
        except Exception:
            self.logger.exception("reading the MCP server's stderr failed")

    def _stderr_line(self, raw: bytes) -> None:
        text = raw.rstrip(b"\r").decode("utf-8", "replace")
        if not text.strip():
            return
        self._stderr_tail.append(bounded(text, 1000))
        match = _LEVEL_TOKEN.search(raw, 0, 120)
        level = _TOKEN_LEVELS[match.group(1)] if match else logging.INFO
        if not self.logger.isEnabledFor(level):
            return
        allowed, dropped = self._stderr_log.take()
        if allowed:
            self.logger.log(level, "server stderr: %s%s", bounded(text, 1000), _suffix(dropped))

    async def _watch_exit(
        self, process: anyio.abc.Process, reader_scope: anyio.CancelScope, stdout_eof: anyio.Event
    ) -> None:
        """End the read side soon after the process exits, even if a grandchild holds stdout."""
        # Polling: asyncio offers no exit event that does not also wait for the pipes to close.
        while process.returncode is None and not stdout_eof.is_set():  # noqa: ASYNC110
            await anyio.sleep(_EXIT_POLL_S)
        if process.returncode is None:
            return  # stdout closed first; the reader already ended the read stream
        self.exited.set()
        with anyio.move_on_after(_EOF_AFTER_EXIT_S):
            await stdout_eof.wait()
        if not stdout_eof.is_set():
            self.logger.debug("MCP server exited but its stdout is still open; ending the session")
            reader_scope.cancel()

    # -- shutdown ------------------------------------------------------------------------------

    async def _shutdown(
        self,
        process: anyio.abc.Process,
        read_stream: MemoryObjectReceiveStream[SessionMessage | Exception],
        write_stream: MemoryObjectSendStream[SessionMessage],
        writer_done: anyio.Event,
    ) -> None:
        """Stop traffic, let the server exit, then terminate its process group; every wait bounded."""
        read_stream.close()  # the reader switches to draining, so a server blocked on stdout can exit
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_S):
            await writer_done.wait()
        if process.stdin is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        if not await _wait_exit(process, self.shutdown_grace_s):
            self.logger.debug("MCP server %d did not exit after stdin closed; terminating it", process.pid)
        await _terminate_group(process, self.term_grace_s, self.logger)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        _close_subprocess_transport(process)


async def _wait_exit(process: anyio.abc.Process, limit_s: float) -> bool:
    """Whether the process exited within `limit_s` seconds (polls `returncode`).

    `process.wait()` is not used: on asyncio it also waits for the pipes to close, which a
    grandchild holding them would delay indefinitely.
    """
    deadline = anyio.current_time() + limit_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_EXIT_POLL_S / 2)
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs.

    Signal 0 also reaches zombies (a killed grandchild waits for init to reap it), so on Linux a
    positive probe is confirmed by looking for a member in /proc that is not a zombie.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate_group(process: anyio.abc.Process, term_grace_s: float, logger: logging.Logger) -> None:
    """SIGTERM the server's process group, wait, SIGKILL what is left, and reap the leader.

    The server was started with `start_new_session=True`, so its pid is its group id and every
    descendant that did not leave the group (the `node` under `npx`, a `sh -c` child) is reached.
    Also run when the leader already exited, to collect descendants it left behind.
    """
    pgid = process.pid
    if process.returncode is not None and not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    deadline = anyio.current_time() + term_grace_s
    while _group_alive(pgid) and anyio.current_time() < deadline:
        _ = process.returncode  # lets trio reap the leader
        await anyio.sleep(_EXIT_POLL_S / 2)
    if _group_alive(pgid):
        logger.debug("MCP server group %d survived SIGTERM; sending SIGKILL", pgid)
        _signal_group(pgid, signal.SIGKILL)
    if not await _wait_exit(process, _REAP_S):
        logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", pgid)


def _close_subprocess_transport(process: anyio.abc.Process) -> None:
    """Close asyncio's subprocess transport now, so it does not warn at garbage collection."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError, ProcessLookupError):
            close()
