"""The stdio transport's two streams: hand-offs without a task switch, and what they keep.

`_Inbox` and `_Outbox` replace a pair of anyio memory streams and a writer task. These tests hold
them to what the memory streams gave: order, at most one held message (backpressure), end of
stream, closing from either side, and no message lost when a receiver is cancelled just as a
message reaches it. The last ones run a real server (tests/faults/hostile_server.py) that stops
reading its stdin while a large request is written, and the anyio path for other event loops.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.message import SessionMessage

from toolbridge.clients._stdio_transport import StdioTransport
from toolbridge.clients._stdio_transport import _transport as transport_module
from toolbridge.clients._stdio_transport._streams import _Inbox, _Outbox

HOSTILE = str(Path(__file__).resolve().parents[1] / "faults" / "hostile_server.py")


def _note(n: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=f"n/{n}"))


def _method(item: SessionMessage | Exception) -> str:
    assert isinstance(item, SessionMessage)
    assert isinstance(item.message, types.JSONRPCNotification)
    return item.message.method


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------
# _Inbox
# ---------------------------------------------------------------------------------------------


async def test_a_waiting_receiver_gets_the_message_and_the_sender_does_not_wait() -> None:
    inbox = _Inbox()
    receiver = asyncio.create_task(inbox.receive())
    await _turns()
    step = inbox.send(_note(1)).__await__()
    with pytest.raises(StopIteration):  # it completes on its first step: it never suspends
        next(step)
    assert _method(await receiver) == "n/1"


async def test_a_sender_waits_until_its_message_is_taken() -> None:
    inbox = _Inbox()
    sender = asyncio.create_task(inbox.send(_note(1)))
    await _turns()
    assert not sender.done()  # at most one message is held, as with a memory stream of size 0
    assert _method(await inbox.receive()) == "n/1"
    await asyncio.wait_for(sender, 1)


async def test_end_of_stream_after_the_held_messages() -> None:
    inbox = _Inbox()
    assert inbox.put_nowait(_note(1)) and inbox.put_nowait(_note(2))
    inbox.end()
    assert [_method(item) async for item in inbox] == ["n/1", "n/2"]
    with pytest.raises(anyio.EndOfStream):
        await inbox.receive()


async def test_end_wakes_a_waiting_receiver() -> None:
    inbox = _Inbox()
    receiver = asyncio.create_task(inbox.receive())
    await _turns()
    inbox.end()
    with pytest.raises(anyio.EndOfStream):
        await asyncio.wait_for(receiver, 1)


async def test_closing_the_receiving_side_frees_the_sender_and_fails_later_sends() -> None:
    inbox = _Inbox()
    sender = asyncio.create_task(inbox.send(_note(1)))
    await _turns()
    waiting = asyncio.create_task(_Inbox().receive())  # another inbox's receiver, for the next case
    inbox.close()
    await asyncio.wait_for(sender, 1)  # not stuck waiting for a receiver that is gone
    with pytest.raises(anyio.BrokenResourceError):
        await inbox.send(_note(2))
    assert not inbox.put_nowait(_note(3))
    with pytest.raises(anyio.ClosedResourceError):
        await inbox.receive()
    waiting.cancel()


async def test_closing_wakes_a_waiting_receiver_with_closed_resource() -> None:
    inbox = _Inbox()
    receiver = asyncio.create_task(inbox.receive())
    await _turns()
    async with inbox:
        pass  # leaving the context closes it, as the SDK's dispatcher does
    with pytest.raises(anyio.ClosedResourceError):
        await asyncio.wait_for(receiver, 1)


async def test_a_receiver_cancelled_as_the_message_reaches_it_loses_nothing() -> None:
    inbox = _Inbox()
    receiver = asyncio.create_task(inbox.receive())
    await _turns()
    assert inbox.put_nowait(_note(1))  # handed to the waiting receiver ...
    receiver.cancel()  # ... which is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await receiver
    assert _method(await asyncio.wait_for(inbox.receive(), 1)) == "n/1"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["send", "cancel_receiver", "turn"]), min_size=1, max_size=40))
def test_order_kept_and_nothing_lost_whatever_the_interleaving(steps: list[str]) -> None:
    """Sends, receivers cancelled at any point, and loop turns, in any order: every message
    arrives once, in the order sent."""

    async def scenario() -> list[str]:
        inbox = _Inbox()
        got: list[str] = []
        receiver: asyncio.Task[SessionMessage | Exception] | None = None
        senders: list[asyncio.Task[None]] = []
        sent = 0

        def harvest() -> None:
            nonlocal receiver
            if receiver is not None and receiver.done():
                if not receiver.cancelled():
                    got.append(_method(receiver.result()))
                receiver = None

        for step in steps:
            harvest()
            if receiver is None:
                receiver = asyncio.create_task(inbox.receive())
            if step == "send":
                senders.append(asyncio.create_task(inbox.send(_note(sent))))
                sent += 1
            elif step == "cancel_receiver":
                receiver.cancel()
            await asyncio.sleep(0)
        inbox.end()
        while True:
            harvest()
            if receiver is None:
                receiver = asyncio.create_task(inbox.receive())
            try:
                await asyncio.wait_for(asyncio.shield(receiver), 1)
            except anyio.EndOfStream:
                break
            except asyncio.CancelledError:
                receiver = None
        await asyncio.wait_for(asyncio.gather(*senders), 1)
        assert got == [f"n/{i}" for i in range(sent)]
        return got

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------------
# _Outbox
# ---------------------------------------------------------------------------------------------


def _request(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


def _encode(message: SessionMessage) -> bytes:
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


async def test_an_outbox_writes_each_message_as_one_line_in_order() -> None:
    lines: list[bytes] = []

    def write(data: bytes) -> None:
        lines.append(data)

    outbox = _Outbox(write, _encode, lambda m, e: None, lambda e: None)
    for n in range(3):
        await outbox.send(_request(n))
    assert [line.count(b"\n") for line in lines] == [1, 1, 1]
    assert [b'"id":%d' % n in line for n, line in enumerate(lines)] == [True, True, True]


async def test_an_unencodable_message_is_answered_instead_and_a_replacement_written() -> None:
    lines: list[bytes] = []
    seen: list[str] = []

    def bad_encode(message: SessionMessage) -> bytes:
        raise ValueError("lone surrogate")

    def on_unencodable(message: SessionMessage, exc: Exception) -> bytes | None:
        seen.append(str(exc))
        return b'{"replacement":true}\n' if len(seen) == 2 else None

    outbox = _Outbox(lines.append, bad_encode, on_unencodable, lambda e: None)
    await outbox.send(_request(1))  # answered, nothing written
    await outbox.send(_request(2))  # answered with a line written in its place
    assert seen == ["lone surrogate", "lone surrogate"] and lines == [b'{"replacement":true}\n']


async def test_a_broken_pipe_is_reported_once_and_later_sends_fail_at_once() -> None:
    broken: list[BaseException] = []

    def write(data: bytes) -> None:
        raise BrokenPipeError("the server closed its stdin")

    outbox = _Outbox(write, _encode, lambda m, e: None, broken.append)
    await outbox.send(_request(1))  # returns: the read side ends, the pending call fails there
    assert len(broken) == 1
    with pytest.raises(anyio.BrokenResourceError):
        await outbox.send(_request(2))
    assert len(broken) == 1
    await outbox.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        await outbox.send(_request(3))


# ---------------------------------------------------------------------------------------------
# With a real server
# ---------------------------------------------------------------------------------------------


async def test_a_large_request_waits_for_a_server_that_stopped_reading_and_then_arrives() -> None:
    """The server stops reading stdin for a second while a 4 MiB request is written: far above
    the pipe's buffer and the high-water mark, so the send waits for the pipe to drain; both
    calls then complete with the right answers."""
    text = "x" * (4 * 1024 * 1024)
    transport = StdioTransport(sys.executable, [HOSTILE])
    async with Client(transport) as client:
        results: dict[str, str] = {}

        async def call(name: str, arguments: dict[str, object]) -> None:
            result = await client.call_tool(name, arguments)
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            results[name] = block.text

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "stall", {"seconds": 1.0})
                await anyio.sleep(0.2)  # the server is now asleep, not reading
                tg.start_soon(call, "echo", {"text": text})
        assert results == {"stall": "stalled", "echo": text}


async def test_the_anyio_path_for_other_loops_carries_calls_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loop other than asyncio's, stdin is anyio's pipe (`_AnyioStdin`): same calls, same answers."""
    monkeypatch.setattr(transport_module, "_own_stdin_pipe", lambda: False)
    transport = StdioTransport(sys.executable, [HOSTILE])
    with anyio.fail_after(30):
        async with Client(transport) as client:
            results = []
            async with anyio.create_task_group() as tg:
                for n in range(5):

                    async def one(n: int = n) -> None:
                        result = await client.call_tool("echo", {"text": f"hi {n}"})
                        block = result.content[0]
                        assert isinstance(block, types.TextContent)
                        results.append(block.text)

                    tg.start_soon(one)
            assert sorted(results) == [f"hi {n}" for n in range(5)]
    assert transport.returncode is not None


def test_the_transport_needs_no_sniffio() -> None:
    """anyio no longer depends on sniffio, so a plain `pip install toolbridge` may lack it (the
    README's first command failed so): a call through the transport with sniffio unimportable."""
    code = f"""
import sys
sys.modules["sniffio"] = None  # unimportable, as in an install that lacks it
import anyio
from mcp import Client
from toolbridge.clients._stdio_transport import StdioTransport

async def main() -> None:
    async with Client(StdioTransport(sys.executable, [{HOSTILE!r}])) as client:
        result = await client.call_tool("echo", {{"text": "no sniffio"}})
        print(result.content[0].text)

anyio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "no sniffio"
