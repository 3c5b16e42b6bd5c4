"""`StdioTransport`: the server's process, its three pipes, and the tasks that read its output."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from toolbridge.errors import TransportError, bounded

from ._lines import DEFAULT_MAX_MESSAGE_BYTES, _Line, _LineAssembler, _OversizeEnded, _OversizeStarted
from ._logs import _RateLimiter, _suffix
from ._messages import (
    INVALID_INPUT_MARKER,
    PROTOCOL_MARKER,
    REASON_MALFORMED,
    REASON_UNENCODABLE,
    _is_request_like,
    _Item,
    _join_and_read,
    _Junk,
    _Malformed,
    _scan_head,
    _scan_tail,
    _synthesized,
    _too_large,
    protocol_error_data,
)
from ._process import EXIT_POLL_S, _close_subprocess_transport, _terminate_group, _wait_exit
from ._streams import _AnyioStdin, _Inbox, _Outbox, _StdinPipe

__all__ = ["StdioTransport"]

_READ_CHUNK: Final = 1024 * 1024
_THREAD_PARSE_BYTES: Final = 1024 * 1024
"""Lines at least this long are joined and parsed on a worker thread."""

_STDERR_LINE_MAX: Final = 8192
_STDERR_TAIL_LINES: Final = 200
_EOF_AFTER_EXIT_S: Final = 0.25

_module_logger = logging.getLogger("toolbridge.clients.stdio")


def _encode(session_message: SessionMessage) -> bytes:
    """One message as the line the server reads."""
    return session_message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


def _own_stdin_pipe() -> bool:
    """Whether stdin is a pipe of our own (an asyncio loop runs, uvloop's too) rather than
    anyio's (any other event loop). Not sniffio: anyio no longer depends on it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _open_stdin_pipe() -> tuple[int, _StdinPipe]:
    """A pipe for the server's stdin: its read end (for the child) and our asyncio write end."""
    read_fd, write_fd = os.pipe()  # both close-on-exec: the child gets only its dup as fd 0
    pipe = _StdinPipe()
    write_end = os.fdopen(write_fd, "wb", buffering=0)
    try:
        await asyncio.get_running_loop().connect_write_pipe(lambda: pipe, write_end)
    except BaseException:
        os.close(read_fd)
        pipe.close()
        write_end.close()
        raise
    return read_fd, pipe


@dataclass(slots=True)
class _Running:
    """What one run of the transport owns, from `__aenter__` to `__aexit__`."""

    process: anyio.abc.Process
    tg: anyio.abc.TaskGroup
    inbox: _Inbox
    outbox: _Outbox
    stdin: _StdinPipe | _AnyioStdin


class StdioTransport(AbstractAsyncContextManager[TransportStreams]):
    """Run an MCP server as a child process and talk to it over stdin/stdout.

    Implements the SDK's `mcp.client._transport.Transport` protocol: entering it starts the
    process and yields `(read_stream, write_stream)` for `mcp.Client(transport)`. It can be entered
    again after it was exited (a fresh process each time), but not twice at once.

    Args:
        command: the executable (looked up on `PATH` as `subprocess` does).
        args: its arguments.
        env: variables for the child, added to its base environment (see `inherit_env`).
        cwd: working directory of the child.
        max_message_bytes: the largest message (one line) accepted from the server, in bytes;
            larger ones are discarded as they stream and their call fails (see the module text).
        shutdown_grace_s: how long the server may take to exit after its stdin closes.
        term_grace_s: how long the process group may take to exit after SIGTERM before SIGKILL.
        logger: where stderr lines and protocol problems are logged (default: this module's).
        inherit_env: False (default): only the SDK's safe set (`HOME`, `LOGNAME`, `PATH`,
            `SHELL`, `TERM`, `USER`) plus `env`; True: this process's environment plus `env`.

    Raises:
        ValueError: `max_message_bytes` or a grace period is not positive.

    Attributes:
        pid: the server's process id while it runs (None before the first start).
        exited: set when the server's stdout reached EOF or the process exited.
        junk_bytes: bytes of text that was no JSON-RPC, skipped on stdout so far.
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
        inherit_env: bool = False,
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
        self._delivering = True
        self._reported: int | str | None = None  # id already failed for the current oversized line
        self._junk_seen = False
        self.junk_bytes = 0

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
        # stdin is a pipe of our own on asyncio, connected before the spawn (see `_streams`).
        stdin_read: int | None = None
        pipe: _StdinPipe | None = None
        if _own_stdin_pipe():
            stdin_read, pipe = await _open_stdin_pipe()
        try:
            process = await anyio.open_process(
                [self.command, *self.args],
                stdin=stdin_read if stdin_read is not None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self._child_env(),
                start_new_session=True,
            )
        except OSError as exc:
            if pipe is not None:
                pipe.close()
            raise TransportError(
                f"could not start the MCP server {self.command!r}: {exc.strerror or exc}",
                details={"command": self.command},
            ) from exc
        except BaseException:
            if pipe is not None:
                pipe.close()
            raise
        finally:
            if stdin_read is not None:
                os.close(stdin_read)  # the child has its copy
        self._process = process
        self.pid = process.pid
        # No await between the spawn and the task group: a cancellation there would leak it.
        stdin: _StdinPipe | _AnyioStdin = pipe if pipe is not None else _AnyioStdin(process)
        inbox = _Inbox()
        stdout_eof = anyio.Event()
        reader_scope = anyio.CancelScope()
        outbox = _Outbox(
            stdin.write,
            _encode,
            lambda message, exc: self._unencodable(message, exc, inbox),
            lambda exc: self._stdin_broken(exc, reader_scope),
        )
        tg = anyio.create_task_group()
        await tg.__aenter__()
        tg.start_soon(self._read_stdout, process, inbox, reader_scope, stdout_eof)
        tg.start_soon(self._read_stderr, process)
        tg.start_soon(self._watch_exit, process, reader_scope, stdout_eof)
        self._running = _Running(process, tg, inbox, outbox, stdin)
        return inbox, outbox

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
                await self._shutdown(running.process, running.inbox, running.outbox, running.stdin)
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
        out: _Inbox,
        scope: anyio.CancelScope,
        eof: anyio.Event,
    ) -> None:
        """Turn stdout bytes into messages; after the session is gone, drain and discard.

        One bad line never ends the reader: whatever handling a line raises is logged and the
        next line is read (the call it answered, if any, fails at its deadline).
        """
        assert process.stdout is not None
        assembler = self._assembler = _LineAssembler(self.max_message_bytes)
        self._delivering = True
        self._reported = None
        try:
            with scope:
                while True:
                    try:
                        chunk = await process.stdout.receive(_READ_CHUNK)
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        break
                    for event in assembler.feed(chunk):
                        try:
                            await self._on_event(event, out)
                        except Exception as exc:  # one line must not end the session
                            self._on_failed_line(exc)
        finally:
            eof.set()
            self.exited.set()
            out.end()
        if assembler.pending_bytes:
            self.logger.warning(
                "MCP server's stdout ended inside a message (%d bytes without a newline)",
                assembler.pending_bytes,
            )

    async def _deliver(self, out: _Inbox, message: SessionMessage) -> None:
        if not self._delivering:
            return
        try:
            await out.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._delivering = False  # the session is gone; keep draining so the server can exit

    async def _on_event(self, event: _Line | _OversizeStarted | _OversizeEnded, out: _Inbox) -> None:
        if isinstance(event, _Line):
            if event.skipped:
                self._on_junk(_Junk(f"[{event.skipped} bytes without a newline]", event.skipped))
            if not self._delivering:
                event.pieces.clear()
                return
            items: list[_Item]
            if event.size >= _THREAD_PARSE_BYTES:
                items = await anyio.to_thread.run_sync(_join_and_read, event.pieces)
            else:
                items = _join_and_read(event.pieces)
            for item in items:
                if isinstance(item, SessionMessage):
                    await self._deliver(out, item)
                elif isinstance(item, _Malformed):
                    await self._on_malformed(item, out)
                else:
                    self._on_junk(item)
        elif isinstance(event, _OversizeStarted):
            self._reported = None
            head = _scan_head(event.head)
            if (
                head.request_id is not None
                and ("result" in head.keys or "error" in head.keys)
                and not _is_request_like(head.keys)
            ):
                self._reported = head.request_id
                self.logger.warning(
                    "MCP server sent a message above the %d-byte limit for request %r; discarding it",
                    self.max_message_bytes,
                    self._reported,
                )
                await self._deliver(
                    out, _too_large(self._reported, event.size, self.max_message_bytes, complete=False)
                )
        else:
            reported, self._reported = self._reported, None
            self._on_oversize_end(event, reported)
            if reported is None:
                request_id = self._oversize_id(event)
                if request_id is not None:
                    await self._deliver(
                        out, _too_large(request_id, event.size, self.max_message_bytes, complete=True)
                    )

    def _on_failed_line(self, exc: Exception) -> None:
        allowed, dropped = self._malformed_log.take()
        if allowed:
            self.logger.warning(
                "could not handle a line from the MCP server (%s: %s); skipped it%s",
                type(exc).__name__,
                bounded(str(exc), 200),
                _suffix(dropped),
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

    def _on_junk(self, junk: _Junk) -> None:
        """Text on stdout that is no JSON: the first at INFO, the rest at DEBUG (one server's banner)."""
        self.junk_bytes += junk.size
        level = logging.DEBUG if self._junk_seen else logging.INFO
        self._junk_seen = True
        if self.logger.isEnabledFor(level):
            self.logger.log(
                level,
                "MCP server wrote text that is no JSON-RPC on stdout (skipped%s): %r",
                "" if level == logging.DEBUG else "; more such text is logged at DEBUG",
                junk.text,
            )

    async def _on_malformed(self, bad: _Malformed, out: _Inbox) -> None:
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
            await self._deliver(out, _synthesized(bad.request_id, types.PARSE_ERROR, message, data))

    def _stdin_broken(self, exc: BaseException, reader_scope: anyio.CancelScope) -> None:
        """The server stopped reading; end the read side so pending calls fail now, not later."""
        self.logger.debug("writing to the MCP server's stdin failed: %r", exc)
        reader_scope.cancel()

    def _unencodable(self, session_message: SessionMessage, exc: Exception, out: _Inbox) -> bytes | None:
        """A message of ours that cannot be encoded (a lone surrogate, nesting past the serializer's
        depth) is not sent and ends nothing: a request fails at once with a synthesized error
        (`invalid_input`), an answer to the server's request becomes a JSON-RPC error for it
        (returned: the line to write instead).
        """
        message = session_message.message
        detail = bounded(f"{type(exc).__name__}: {exc}", 300)
        self.logger.warning("not sending a message the MCP server could not read: %s", detail)
        if isinstance(message, types.JSONRPCRequest):
            data = {PROTOCOL_MARKER: INVALID_INPUT_MARKER, "reason": REASON_UNENCODABLE, "detail": detail}
            text = f"the request could not be encoded as JSON and was not sent: {detail}"
            out.put_nowait(_synthesized(message.id, types.INVALID_PARAMS, text, data))
        elif isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            reason = "the client could not encode its answer"
            error = types.ErrorData(code=types.INTERNAL_ERROR, message=reason)
            reply = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            return reply.model_dump_json(by_alias=True).encode() + b"\n"
        return None

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
        """One stderr line: into the tail, and to the logger at INFO whatever its text claims.

        A server's own "WARNING" or "ERROR" is its business: stderr is diagnostics, shown with
        `-v` on the command line, never at the default level.
        """
        text = raw.rstrip(b"\r").decode("utf-8", "replace")
        if not text.strip():
            return
        self._stderr_tail.append(bounded(text, 1000))
        if not self.logger.isEnabledFor(logging.INFO):
            return
        allowed, dropped = self._stderr_log.take()
        if allowed:
            self.logger.info("server stderr: %s%s", bounded(text, 1000), _suffix(dropped))

    async def _watch_exit(
        self, process: anyio.abc.Process, reader_scope: anyio.CancelScope, stdout_eof: anyio.Event
    ) -> None:
        """End the read side soon after the process exits, even if a grandchild holds stdout."""
        # Polling: asyncio offers no exit event that does not also wait for the pipes to close.
        while process.returncode is None and not stdout_eof.is_set():  # noqa: ASYNC110
            await anyio.sleep(EXIT_POLL_S)
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
        self, process: anyio.abc.Process, inbox: _Inbox, outbox: _Outbox, stdin: _StdinPipe | _AnyioStdin
    ) -> None:
        """Stop traffic, let the server exit, then terminate its process group; every wait bounded."""
        inbox.close()  # the reader switches to draining, so a server blocked on stdout can exit
        outbox.close()
        # Closing stdin writes what is buffered first (bounded by the waits below), then EOF.
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stdin.aclose()
        if not await _wait_exit(process, self.shutdown_grace_s):
            self.logger.debug("MCP server %d did not exit after stdin closed; terminating it", process.pid)
        await _terminate_group(process, self.term_grace_s, self.logger)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        stdin.abort()  # whatever the server never read
        _close_subprocess_transport(process)
