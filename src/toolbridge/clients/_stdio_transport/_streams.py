"""The two streams the SDK session reads and writes: hand-offs without a task switch.

The SDK's dispatcher takes any `ReadStream` / `WriteStream` (`mcp.shared._stream_protocols`).
The usual pair is two anyio memory object streams and a writer task: every message then costs a
checkpoint on each side of each stream (a `sleep(0)`, so a turn of the event loop) and a wake-up
of the task on the other end, about 240 Python calls per request and its answer
(`bench/bench_calls.py`). The pair
here does the same work with none of that on the common path:

* `_Inbox` (what the session reads): the stdout reader hands a parsed message straight to a
  receiver that is already waiting; if none waits, it keeps the message and waits until it is
  taken, so at most one message is held (what a memory stream of capacity 0 gives) and a server
  that writes faster than the session reads is slowed down, not buffered without end.
* `_Outbox` (what the session writes): encodes the message and writes its line to the server's
  stdin at once. asyncio's pipe buffers the bytes; only when that buffer is above its high-water
  mark does `send` wait for it to drain (`_StdinPipe`), so a server that stops reading slows its
  writers instead of growing memory.

Semantics kept from the memory streams: `receive` raises `anyio.EndOfStream` once the reader
ended and everything was taken, `anyio.ClosedResourceError` after the receiving side closed; a
send into a closed inbox raises `anyio.BrokenResourceError`; a send on a closed outbox raises
`anyio.ClosedResourceError`. A receiver cancelled just as a message was handed to it puts the
message back, so cancellation never loses one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Final, Self, cast

import anyio
import anyio.abc
from mcp.shared.message import SessionMessage

__all__ = ["_AnyioStdin", "_Inbox", "_Outbox", "_StdinPipe"]

_Item = SessionMessage | Exception

_PIPE_HIGH_WATER: Final = 256 * 1024
"""Bytes buffered for the server's stdin above which a writer waits for them to drain."""


class _Inbox:
    """Messages from the server's stdout, handed to the session's receive loop one at a time."""

    __slots__ = ("_closed", "_ended", "_items", "_taken", "_waiter")

    def __init__(self) -> None:
        self._items: deque[_Item] = deque()
        self._waiter: asyncio.Future[_Item] | None = None  # a receiver waiting for the next item
        self._taken: asyncio.Future[None] | None = None  # senders waiting for their items to be taken
        self._ended = False  # the sender is done: EndOfStream once the items are taken
        self._closed = False  # the receiving side closed: sends fail, items are dropped

    # -- the sending side (the stdout reader) ----------------------------------------------------

    def put_nowait(self, item: _Item) -> bool:
        """Hand `item` over without waiting; False when the receiving side is closed.

        May hold more than one item: for the few messages the transport makes itself (an
        error for a request it could not send), which must never wait for the receive loop.
        """
        if self._closed:
            return False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(item)
        else:
            self._items.append(item)
        return True

    async def send(self, item: _Item) -> None:
        """Hand `item` to the receiver, waiting (if none was waiting) until every held item is taken.

        Raises:
            anyio.BrokenResourceError: the receiving side is closed.
        """
        if not self.put_nowait(item):
            raise anyio.BrokenResourceError
        while self._items and not self._closed:
            taken = self._taken
            if taken is None or taken.done():
                taken = self._taken = asyncio.get_running_loop().create_future()
            await asyncio.shield(taken)  # shared by every waiting sender: one's cancellation is its own

    def end(self) -> None:
        """The sender is done: a waiting receiver gets `EndOfStream` once the items are taken."""
        self._ended = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(anyio.EndOfStream())

    # -- the receiving side (the SDK's dispatcher) -----------------------------------------------

    async def receive(self) -> _Item:
        if self._items:
            item = self._items.popleft()
            self._wake_sender()
            return item
        if self._closed:
            raise anyio.ClosedResourceError
        if self._ended:
            raise anyio.EndOfStream
        waiter: asyncio.Future[_Item] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._items.appendleft(waiter.result())  # handed over as we were cancelled: keep it
            raise
        finally:
            self._waiter = None

    def _wake_sender(self) -> None:
        taken = self._taken
        if taken is not None and not taken.done():
            taken.set_result(None)

    def close(self) -> None:
        """Close the receiving side: held items are dropped and the sender's next send fails."""
        self._closed = True
        self._items.clear()
        self._wake_sender()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(anyio.ClosedResourceError())

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> _Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()


class _StdinPipe(asyncio.Protocol):
    """asyncio's write end of the server's stdin: flow control, and whether the pipe broke."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self.lost = False
        self._drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a write transport, though not always an asyncio.WriteTransport (uvloop's is not one)
        write = cast("asyncio.WriteTransport", transport)
        write.set_write_buffer_limits(high=_PIPE_HIGH_WATER)
        self.transport = write

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    def write(self, data: bytes) -> Awaitable[None] | None:
        """Buffer `data`; an awaitable to wait on when the buffer is above its high-water mark.

        Raises:
            anyio.BrokenResourceError: the server's stdin is closed.
        """
        transport = self.transport
        if self.lost or transport is None or transport.is_closing():
            raise anyio.BrokenResourceError
        transport.write(data)
        drained = self._drained
        if drained is not None and not drained.done():
            return asyncio.shield(drained)  # shared by every writer that waits; none may cancel it
        return None

    def close(self) -> None:
        """Close stdin once the buffered bytes are written (the server then sees EOF)."""
        if self.transport is not None:
            self.transport.close()

    async def aclose(self) -> None:
        self.close()

    def abort(self) -> None:
        """Close stdin now, dropping what is still buffered.

        Only while something is left to drop or it is still open: asyncio's pipe transport
        cannot be aborted twice, nor after a `close` that already finished its writing.
        """
        transport = self.transport
        if transport is None or self.lost:
            return
        if not transport.is_closing() or transport.get_write_buffer_size() > 0:
            transport.abort()


class _AnyioStdin:
    """The server's stdin through anyio, for an event loop other than asyncio's (one checkpoint per write)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        self._stdin = process.stdin

    def write(self, data: bytes) -> Awaitable[None]:
        return self._stdin.send(data)

    async def aclose(self) -> None:
        await self._stdin.aclose()

    def abort(self) -> None:
        """Nothing to drop: anyio's writes wait until the pipe took them."""


_Encode = Callable[[SessionMessage], bytes]
_OnUnencodable = Callable[[SessionMessage, Exception], bytes | None]
_OnBroken = Callable[[BaseException], None]


class _Outbox:
    """The session's messages, written to the server's stdin as one line each, in the caller's task.

    `write` buffers a line and returns an awaitable only when the caller must wait for the pipe
    to drain. A message that cannot be encoded is not sent: `on_unencodable` answers it instead
    (and may return a line to write in its place).
    When the pipe breaks, `on_broken` runs once (the transport ends the read side, so pending
    calls fail now) and every later send raises `anyio.BrokenResourceError`.
    """

    __slots__ = ("_broken", "_closed", "_encode", "_on_broken", "_on_unencodable", "_write")

    def __init__(
        self,
        write: Callable[[bytes], Awaitable[None] | None],
        encode: _Encode,
        on_unencodable: _OnUnencodable,
        on_broken: _OnBroken,
    ) -> None:
        self._write = write
        self._encode = encode
        self._on_unencodable = on_unencodable
        self._on_broken = on_broken
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        try:
            data = self._encode(item)
        except Exception as exc:  # pydantic, Unicode, depth errors
            replacement = self._on_unencodable(item, exc)
            if replacement is None:
                return
            data = replacement
        try:
            wait = self._write(data)
            if wait is not None:
                await wait
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            # Like the memory stream and writer task before: this send returns, the read side
            # ends so the pending call fails with the connection, and later sends fail at once.
            if not self._broken:
                self._broken = True
                self._on_broken(exc)

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()
