"""The stdio transport: line assembly, id heuristics, logging helpers, process life cycle.

The protocol side runs through the official SDK (`mcp.Client(transport)`) against the project's
hostile test server (tests/faults/hostile_server.py), a real subprocess.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from toolbridge.clients._stdio_transport import (
    DEFAULT_MAX_MESSAGE_BYTES,
    StdioTransport,
    _group_alive,
    _Line,
    _LineAssembler,
    _Malformed,
    _OversizeEnded,
    _OversizeStarted,
    _parse_line,
    _RateLimiter,
    _scan_head,
    _scan_tail,
    make_logging_callback,
)
from toolbridge.errors import TransportError

HOSTILE = str(Path(__file__).resolve().parents[1] / "faults" / "hostile_server.py")


def _gone(pgid: int) -> bool:
    """No live (non-zombie) process is left in group `pgid`."""
    return not _group_alive(pgid)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# ---------------------------------------------------------------------------------------------
# Line assembly (pure)
# ---------------------------------------------------------------------------------------------


def _lines(events: list[object]) -> list[bytes]:
    return [b"".join(e.pieces) for e in events if isinstance(e, _Line)]


def test_lines_split_across_chunks_and_several_per_chunk() -> None:
    asm = _LineAssembler(1000)
    events = asm.feed(b'{"a":1}\n{"b"')
    events += asm.feed(b":2")
    events += asm.feed(b"}\n\n{}\n")
    assert _lines(events) == [b'{"a":1}', b'{"b":2}', b"", b"{}"]
    assert asm.pending_bytes == 0


def test_a_line_above_the_cap_is_discarded_with_head_and_tail_kept() -> None:
    asm = _LineAssembler(100)
    head = b'{"jsonrpc":"2.0","id":7,"result":{"t":"'
    events = asm.feed(head + b"x" * 50)
    assert events == []
    events = asm.feed(b"x" * 100)
    assert len(events) == 1 and isinstance(events[0], _OversizeStarted)
    assert events[0].head.startswith(head)
    events = asm.feed(b"y" * 10_000)
    assert events == []
    assert asm.pending_bytes == len(head) + 10_150
    events = asm.feed(b'"}}\n{"next":1}\n')
    assert isinstance(events[0], _OversizeEnded)
    assert events[0].size == len(head) + 10_150 + 3
    assert events[0].tail.endswith(b'yyy"}}')
    assert _lines(events[1:]) == [b'{"next":1}']


def test_assembly_is_linear_in_the_line_length() -> None:
    """A 64 MiB line in 64 KiB chunks is assembled in about the time of one copy."""
    chunk = b"a" * 65536
    asm = _LineAssembler(DEFAULT_MAX_MESSAGE_BYTES)
    started = time.perf_counter()
    for _ in range(1024):
        assert not asm.feed(chunk)
    events = asm.feed(b"\n")
    line = b"".join(events[0].pieces)  # type: ignore[union-attr]
    elapsed = time.perf_counter() - started
    assert len(line) == 64 * 1024 * 1024
    assert elapsed < 1.0


# ---------------------------------------------------------------------------------------------
# Finding the id of a message that cannot be parsed
# ---------------------------------------------------------------------------------------------


def test_head_scan_finds_top_level_keys_and_id() -> None:
    info = _scan_head(b'{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"abc')
    assert info.request_id == 42
    assert info.keys == ["jsonrpc", "id", "result"]


def test_head_scan_ignores_nested_ids_and_strings() -> None:
    info = _scan_head(b'{"result":{"id":5,"s":"\\"id\\":6"},"note":"{\\"id\\":7}","id":"abc"}')
    assert info.request_id == "abc"
    assert info.keys == ["result", "note", "id"]
    truncated = _scan_head(b'{"result":{"id":5,"text":"xxxxxxxx')
    assert truncated.request_id is None
    assert truncated.keys == ["result"]
    assert _scan_head(b"not json").request_id is None
    assert _scan_head(b'{"id":true,"result":{}}').request_id is None


def test_tail_scan_only_accepts_the_last_member_of_the_top_level_object() -> None:
    assert _scan_tail(b'xxxx"}]},"jsonrpc":"2.0","id":17}') == 17
    assert _scan_tail(b'xxxx"}]},"jsonrpc":"2.0","id":"r-1"}  ') == "r-1"
    assert _scan_tail(b'xxxx"}]},"id":18,"jsonrpc":"2.0"}\n') == 18
    assert _scan_tail(b'xxxx","id":17}}') is None  # a nested object's id
    assert _scan_tail(b'xxxx","id":17,"jsonrpc":"2.0"}}') is None
    assert _scan_tail(b'xxxx \\"id\\":17}"}') is None  # inside a string


def test_malformed_lines_report_the_response_id_but_never_a_request_id() -> None:
    truncated = _parse_line(b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"ty')
    assert isinstance(truncated, _Malformed) and truncated.request_id == 3
    invalid = _parse_line(b'{"jsonrpc":"2.0","id":"x","result":"not an object"}')
    assert isinstance(invalid, _Malformed) and invalid.request_id == "x"
    request = _parse_line(b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":5}')
    assert isinstance(request, _Malformed) and request.request_id is None
    ts_request = _parse_line(b'{"method":"x","params":{"a":[1,2')
    assert isinstance(ts_request, _Malformed) and ts_request.request_id is None
    garbage = _parse_line(b"Server started on stdio")
    assert isinstance(garbage, _Malformed) and garbage.request_id is None
    assert _parse_line(b"   \r") is None


# ---------------------------------------------------------------------------------------------
# Logging helpers
# ---------------------------------------------------------------------------------------------


def test_rate_limiter_counts_what_it_suppressed() -> None:
    limiter = _RateLimiter(per_second=0.001, burst=3)
    assert [limiter.take()[0] for _ in range(5)] == [True, True, True, False, False]
    assert limiter.suppressed == 2


async def test_logging_callback_maps_levels_and_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("toolbridge.test.serverlog")
    callback = make_logging_callback(logger, per_second=0.001, burst=5)
    caplog.set_level(logging.DEBUG, logger=logger.name)
    await callback(types.LoggingMessageNotificationParams(level="error", logger="db", data={"x": 1}))
    await callback(types.LoggingMessageNotificationParams(level="notice", data="hello"))
    for _ in range(100):
        await callback(types.LoggingMessageNotificationParams(level="info", data="tick"))
    records = [r for r in caplog.records if r.name == logger.name]
    assert records[0].levelno == logging.ERROR and '[db] {"x": 1}' in records[0].getMessage()
    assert records[1].levelno == logging.INFO and "hello" in records[1].getMessage()
    assert len(records) == 5


# ---------------------------------------------------------------------------------------------
# The transport with a real process
# ---------------------------------------------------------------------------------------------


async def test_echo_and_concurrent_calls_through_the_sdk_client() -> None:
    transport = StdioTransport(sys.executable, [HOSTILE])
    async with Client(transport) as client:
        assert _text(await client.call_tool("echo", {"text": "hi ✓"})) == "hi ✓"
        results: list[str] = []

        async def one(i: int) -> None:
            results.append(_text(await client.call_tool("echo", {"text": str(i)})))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        assert sorted(results, key=int) == [str(i) for i in range(20)]
        pid = transport.pid
    assert pid is not None
    assert transport.returncode == 0  # it exited by itself when stdin closed
    assert _gone(pid)


async def test_server_stderr_goes_to_the_logger_and_the_tail(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    logger = logging.getLogger("toolbridge.test.stderr")
    caplog.set_level(logging.DEBUG, logger=logger.name)
    transport = StdioTransport(sys.executable, [HOSTILE], logger=logger)
    async with Client(transport) as client:
        await client.call_tool("echo", {"text": "x"})
    assert "hostile server: ready" in transport.stderr_tail()
    out, err = capfd.readouterr()
    assert "hostile server" not in out and "hostile server" not in err  # not passed through
    messages = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert any("hostile server: ready" in m for m in messages)


async def test_env_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBRIDGE_TEST_SECRET", "s3cret")
    inherited = StdioTransport(sys.executable, [HOSTILE], env={"EXTRA": "1"}, inherit_env=True)
    async with Client(inherited) as client:
        assert _text(await client.call_tool("env", {"name": "TOOLBRIDGE_TEST_SECRET"})) == "s3cret"
        assert _text(await client.call_tool("env", {"name": "EXTRA"})) == "1"
    restricted = StdioTransport(sys.executable, [HOSTILE], env={"EXTRA": "2"})  # the default
    async with Client(restricted) as client:
        assert _text(await client.call_tool("env", {"name": "TOOLBRIDGE_TEST_SECRET"})) == "<unset>"
        assert _text(await client.call_tool("env", {"name": "EXTRA"})) == "2"
        assert _text(await client.call_tool("env", {"name": "PATH"})) == os.environ["PATH"]


async def test_a_command_that_does_not_exist_is_a_transport_error() -> None:
    transport = StdioTransport("/nonexistent/toolbridge-server")
    with pytest.raises(TransportError) as info:
        async with Client(transport):
            pass
    assert info.value.code == "ERR_MCP_TRANSPORT"
    assert "/nonexistent/toolbridge-server" in info.value.message


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_message_bytes"):
        StdioTransport("x", max_message_bytes=0)
    with pytest.raises(ValueError, match="grace"):
        StdioTransport("x", shutdown_grace_s=-1)


async def test_shutdown_kills_a_grandchild_left_in_the_group() -> None:
    transport = StdioTransport(sys.executable, [HOSTILE, "--child"], term_grace_s=1.0)
    async with Client(transport) as client:
        await client.call_tool("echo", {"text": "x"})
        pid = transport.pid
    assert pid is not None
    assert _gone(pid), "the `sleep 60` grandchild survived the shutdown"


async def test_shutdown_escalates_to_sigkill_within_the_grace_periods() -> None:
    transport = StdioTransport(
        sys.executable, [HOSTILE, "--ignore-eof", "--ignore-term"], shutdown_grace_s=0.3, term_grace_s=0.3
    )
    async with Client(transport) as client:
        await client.call_tool("echo", {"text": "x"})
        started = time.perf_counter()
    assert time.perf_counter() - started < 3.0
    assert transport.returncode == -signal.SIGKILL
    assert transport.pid is not None and _gone(transport.pid)


async def test_cancelling_the_owner_still_stops_the_server() -> None:
    transport = StdioTransport(sys.executable, [HOSTILE, "--ignore-eof"], shutdown_grace_s=0.2)
    with anyio.move_on_after(1.0) as scope:
        async with Client(transport) as client:
            await client.call_tool("hang", {})
    assert scope.cancelled_caught
    assert transport.pid is not None and _gone(transport.pid)


async def test_the_transport_can_run_again_after_it_stopped() -> None:
    transport = StdioTransport(sys.executable, [HOSTILE])
    pids = []
    for _ in range(2):
        async with Client(transport) as client:
            assert _text(await client.call_tool("echo", {"text": "again"})) == "again"
            pids.append(transport.pid)
    assert pids[0] != pids[1]


def test_stderr_lines_are_logged_at_info_whatever_level_they_name(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("toolbridge.test.stderr.levels")
    caplog.set_level(logging.DEBUG, logger=logger.name)
    transport = StdioTransport("unused", logger=logger)
    for line in (b"2026-01-01 ERROR db down", b"WARN: slow", b"[DEBUG] x", b"plain line", b"   "):
        transport._stderr_line(line)
    levels = [r.levelno for r in caplog.records if r.name == logger.name]
    assert levels == [logging.INFO] * 4  # a server's own "ERROR" passes no WARNING threshold
    assert transport.stderr_tail(2) == "[DEBUG] x\nplain line"
    assert transport.stderr_tail(0) == ""
