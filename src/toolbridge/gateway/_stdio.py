"""The gateway's stdio: the SDK's server streams over event-loop pipes instead of worker threads.

The SDK's `stdio_server()` reads each line and writes (and flushes) each message through a worker
thread (`anyio.wrap_file`): three thread hand-offs per call, each waiting for a CPU on a busy
machine. A gateway sits between a client and a server, so it pays that on every forwarded call.
`pipe_stdio()` gives the SDK a `(read_stream, write_stream)` pair read and written by the event
loop itself on non-blocking pipes, by the very tasks that receive and send (no relay task, no
memory stream in between: two task hand-offs fewer per message), and keeps the SDK's
protection: while serving, fd 0 reads the null device and fd 1 points at stderr, so stray output
of a handler or a child never reaches the wire; both are restored on exit. Lines are capped
(`MAX_LINE_BYTES`); a line that is not JSON-RPC reaches the server as an exception, as with the
SDK's transport.

When stdin or stdout is not a pipe, socket or terminal the event loop can watch (a regular file,
`/dev/zero`), `pipe_stdio` is not usable and `serve_stdio` falls back to `toolbridge._serving.run_stdio`
(`toolbridge._stdio_wire`: bounded lines, read by a thread).
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from .._stdio_wire import MessageReader, overrun_error
from ._scrub import scrub_json

__all__ = ["MAX_LINE_BYTES", "pipe_stdio", "pipes_usable"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line (one JSON-RPC message) read from the client."""


def pipes_usable() -> bool:
    """Whether fds 0 and 1 are pipes, sockets or terminals (what the event loop can watch).

    A character device the selector refuses (`/dev/zero`, `/dev/null`: epoll says EPERM) is not.
    """
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    if not all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) or stat.S_ISCHR(m) for m in modes):
        return False
    with selectors.DefaultSelector() as selector:
        for fd, event in ((0, selectors.EVENT_READ), (1, selectors.EVENT_WRITE)):
            try:
                selector.register(fd, event)
                selector.unregister(fd)
            except (OSError, ValueError):
                return False
    return True


class _LineReader(MessageReader):
    """The SDK's read stream, read by the caller's own task: one line, one message (no relay task).

    Junk and oversized lines come out as exceptions (the server answers or drops them); the end of
    input ends the iteration.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._closed = False

    async def receive(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    raise anyio.EndOfStream from None
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)  # drop the oversized part,
                await self._skip_line()  # and the rest of its line, then go on
                return ValueError("message too large")
            if not line.strip():
                continue
            try:
                return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
            except Exception as exc:  # junk from the client: the server answers or drops it
                return exc

    async def _skip_line(self) -> None:
        """Read past the rest of an oversized line; input that runs on for another
        `MAX_LINE_BYTES` without a break is no JSON-RPC stream (`ProtocolError`, one line)."""
        skipped = 0
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
                skipped += exc.consumed
                if skipped > MAX_LINE_BYTES:
                    raise overrun_error(MAX_LINE_BYTES) from None

    async def aclose(self) -> None:
        self._closed = True


class _LineWriter:
    """The SDK's write stream, written by the sending task itself (no relay task).

    It scrubs registered secrets from each line it writes (`_scrub.scrub_json`; `scrubs` tells
    `ScrubbingServer.run` not to wrap it again).

    A sender first waits while the client is behind (the pipe transport above its high-water
    mark), then writes its whole line: a client that stops reading holds its senders, and the
    buffer stays bounded (a sender cancelled while waiting has written nothing).
    """

    scrubs = True

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await self._writer.drain()
        except ConnectionError:  # the client closed its end
            raise anyio.BrokenResourceError from None
        if self._writer.transport.is_closing():
            raise anyio.BrokenResourceError
        data = scrub_json(item.message.model_dump_json(by_alias=True, exclude_unset=True))
        self._writer.write(data.encode("utf-8") + b"\n")

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _LineWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """`(read_stream, write_stream)` for `Server.run`, over the process's stdin and stdout."""
    saved_in, saved_out = os.dup(0), os.dup(1)  # to give the wire back on exit
    wire_in, wire_out = os.dup(0), os.dup(1)  # owned (and closed) by the pipe transports
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    try:
        yield _LineReader(reader), _LineWriter(writer)
    finally:
        read_transport.close()
        write_transport.close()
        # give the wire back: the process's fds 0 and 1 point at the client again
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
