"""A bounded stdio transport for serving MCP: any stdin, bounded lines, Ctrl-C never waits for it.

`stdio_wire()` gives an SDK `Server.run` its `(read_stream, write_stream)` over the process's
stdin and stdout, in place of the SDK's `stdio_server()`, which reads with a worker thread that
nobody can interrupt (a `serve-tasks` on a terminal ignored Ctrl-C until the next line was typed)
and reads lines of any length (`< /dev/zero` grew without end):

- a daemon thread reads fd 0 in chunks (pipes, terminals, files, devices alike) and splits lines
  of at most `MAX_LINE_BYTES`; the process never waits for it, so cancellation (Ctrl-C, SIGTERM)
  ends serving at once;
- a line over the limit is one bad message (the server gets an exception, as for junk) and is
  skipped through its line break; input that runs on for another `MAX_LINE_BYTES` without one is
  no JSON-RPC stream: reading stops and `receive` raises `ProtocolError` (`ERR_MCP_PROTOCOL`),
  which the command line prints as one line;
- while serving, fd 0 reads the null device and fd 1 points at stderr (as the SDK does), so stray
  output of a handler or a child never reaches the wire; both are restored on exit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.shared.message import SessionMessage

from .errors import ProtocolError

__all__ = ["MAX_LINE_BYTES", "MessageReader", "overrun_error", "stdio_wire"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line (one JSON-RPC message) read from the client."""

_CHUNK = 64 * 1024


def overrun_error(limit: int) -> ProtocolError:
    """The error of input that ran on for twice `limit` without a line break (one line, a code)."""
    return ProtocolError(
        f"the client sent more than {2 * limit // (1024 * 1024)} MiB without a line break: "
        "no JSON-RPC stream; stopped reading it"
    )


class MessageReader:
    """The read stream `Server.run` iterates: subclasses give `receive` (raising `EndOfStream`
    at the end) and `aclose`."""

    async def receive(self) -> SessionMessage | Exception:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def __aiter__(self) -> MessageReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> MessageReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Overrun(Exception):
    """The input ran on for twice the line limit without a line break."""


def _lines(fd: int, limit: int) -> Any:
    """Yield each line of `fd` (bytes, without its break), `ValueError` for an oversized one, then
    `_Overrun` when the junk after it runs over `limit` again; ends at end of input."""
    buffer = bytearray()
    skipping = -1  # bytes skipped of an oversized line, -1 when not skipping
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            if skipping < 0 and buffer.strip():
                yield bytes(buffer)
            return
        start = 0
        if skipping >= 0:
            cut = chunk.find(b"\n")
            if cut < 0:
                skipping += len(chunk)
                if skipping > limit:
                    yield _Overrun()
                    return
                continue
            start, skipping = cut + 1, -1
        while True:  # only the new chunk is searched: linear in the input
            cut = chunk.find(b"\n", start)
            if cut < 0:
                buffer += chunk[start:]
                break
            buffer += chunk[start:cut]
            start = cut + 1
            line = bytes(buffer)
            buffer.clear()
            if len(line) > limit:
                yield ValueError("message too large")
            elif line.strip():
                yield line
        if len(buffer) > limit:
            yield ValueError("message too large")
            skipping = len(buffer) - limit
            buffer.clear()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # junk from the client: the server answers or drops it
        return exc


@asynccontextmanager
async def stdio_wire(limit: int = MAX_LINE_BYTES) -> AsyncIterator[tuple[Any, Any]]:
    """`(read_stream, write_stream)` for `Server.run`, over the process's stdin and stdout."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)  # to give the wire back on exit
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    token = anyio.lowlevel.current_token()
    stop = threading.Event()

    async def deliver(item: SessionMessage | Exception | None) -> None:
        if item is None:
            await incoming_send.aclose()
        else:
            await incoming_send.send(item)

    def read() -> None:  # a daemon thread: nothing ever waits for it
        try:
            for item in _lines(wire_in, limit):
                if stop.is_set():
                    return
                if isinstance(item, _Overrun):
                    anyio.from_thread.run(deliver, overrun_error(limit), token=token)
                    break
                anyio.from_thread.run(
                    deliver, item if isinstance(item, Exception) else _parse(item), token=token
                )
            anyio.from_thread.run(deliver, None, token=token)
        except Exception:  # the loop is gone or the stream closed: serving has ended
            return

    class Reader(MessageReader):
        async def receive(self) -> SessionMessage | Exception:
            item = await incoming.receive()
            if isinstance(item, ProtocolError):
                raise item
            return item

        async def aclose(self) -> None:
            await incoming.aclose()

    async def write() -> None:
        async with outgoing_receive:
            async for message in outgoing_receive:
                data = (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
                while data:
                    written = await anyio.to_thread.run_sync(os.write, wire_out, data, abandon_on_cancel=True)
                    data = data[written:]

    threading.Thread(target=read, name="toolbridge stdin", daemon=True).start()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            try:
                yield Reader(), outgoing
            finally:
                await outgoing.aclose()
    finally:
        stop.set()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        os.close(wire_out)
        # wire_in stays open: the reader thread may still be blocked on it (closing it could
        # let the number be reused under the thread); it goes with the process
