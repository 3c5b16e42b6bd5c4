"""The fault suite through `toolbridge.StdioClient`: the error codes a caller sees.

The transport-level behaviour (memory, CPU, isolation) is shown in test_faults_stdio.py; here each
fault is checked end to end for the stable toolbridge code, the time it takes, and recovery.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

import anyio
import pytest
from _support import group_gone

from toolbridge.clients import StdioClient
from toolbridge.errors import McpTimeoutError, ProtocolError, TransportError

MiB = 1024 * 1024


@asynccontextmanager
async def client_for(cmd: list[str], *extra: str, **options: Any) -> AsyncIterator[StdioClient]:
    client = StdioClient(cmd[0], [*cmd[1:], *extra], shutdown_grace_ms=1000, **options)
    pids: set[int] = set()
    try:
        async with client:
            await client.connect()
            yield client
            if client.pid is not None:
                pids.add(client.pid)
    finally:
        with anyio.fail_after(5):
            while not all(group_gone(pid) for pid in pids):  # noqa: ASYNC110 - polling /proc
                await anyio.sleep(0.02)


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_a_50mb_result_arrives(hostile_cmd: list[str], hostile: ModuleType) -> None:
    async with client_for(hostile_cmd) as client:
        result = await client.call_tool("big", {"size": 50_000_000}, timeout=30)
        assert text(result) == hostile.payload(50_000_000)


async def test_a_result_above_the_cap_is_a_protocol_error_naming_size_and_limit(
    hostile_cmd: list[str],
) -> None:
    async with client_for(hostile_cmd, max_message_bytes=2 * MiB) as client:
        started = time.perf_counter()
        with pytest.raises(ProtocolError) as info:
            await client.call_tool("big", {"size": 6 * MiB}, timeout=20)
        assert time.perf_counter() - started < 5
        assert info.value.code == "ERR_MCP_PROTOCOL"
        assert "2.0 MiB" in info.value.message and "limit" in info.value.message
        assert text(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_a_line_without_newline_above_the_cap(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd, max_message_bytes=4 * MiB) as client:
        with pytest.raises(ProtocolError):
            await client.call_tool("nonewline", {"size": 30 * MiB}, timeout=20)
        assert text(await client.call_tool("echo", {"text": "after id"})) == "after id"
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("nonewline", {"size": 30 * MiB, "with_id": False}, timeout=1.0)
        assert info.value.code == "ERR_MCP_TIMEOUT"
        assert text(await client.call_tool("echo", {"text": "after no id"})) == "after no id"


@pytest.mark.parametrize("kind", ["truncated", "invalid"])
async def test_a_malformed_response_is_a_protocol_error_at_once(hostile_cmd: list[str], kind: str) -> None:
    async with client_for(hostile_cmd) as client:
        started = time.perf_counter()
        with pytest.raises(ProtocolError):
            await client.call_tool("malformed", {"kind": kind}, timeout=10)
        assert time.perf_counter() - started < 2
        assert text(await client.call_tool("malformed", {"kind": "noid"}, timeout=10)) == "ok"


async def test_an_unknown_id_leaves_the_call_to_its_timeout(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("unknown_id", {}, timeout=0.8)
        assert text(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_never_answering_and_answering_late(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("hang", {}, timeout=0.5)
        with pytest.raises(McpTimeoutError):
            await client.call_tool("late", {"seconds": 0.5}, timeout=0.2)
        assert text(await client.call_tool("sleep", {"seconds": 0.5}, timeout=5)) == "slept"


async def test_a_crash_mid_call_is_a_transport_error_and_the_next_call_restarts(
    hostile_cmd: list[str],
) -> None:
    async with client_for(hostile_cmd) as client:
        first_pid = client.pid
        started = time.perf_counter()
        with pytest.raises(TransportError) as info:
            await client.call_tool("crash", {}, timeout=10)
        assert time.perf_counter() - started < 1.0
        assert info.value.code == "ERR_MCP_TRANSPORT"
        assert text(await client.call_tool("echo", {"text": "restarted"})) == "restarted"
        assert client.pid != first_pid


async def test_a_server_that_exits_at_start_is_one_plain_transport_error(hostile_cmd: list[str]) -> None:
    client = StdioClient(hostile_cmd[0], [*hostile_cmd[1:], "--exit-at-start"])
    started = time.perf_counter()
    try:
        await client.list_tools()
    except TransportError as exc:
        assert not isinstance(exc, BaseExceptionGroup)
        assert exc.code == "ERR_MCP_TRANSPORT"
        assert "fatal: cannot open /nonexistent/config.toml" in exc.message
    else:
        pytest.fail("no error for a server that exits at start")
    finally:
        await client.aclose()
    assert time.perf_counter() - started < 1.5


async def test_a_notification_flood_does_not_time_out(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        # Generous: on a loaded 2-core machine the SDK's own dispatch of 20,000 notifications can
        # take several seconds; the comparison with the raw SDK is in test_faults_stdio.py.
        result = await client.call_tool("flood", {"count": 20000}, timeout=60)
        assert text(result) == "flooded"


@pytest.mark.parametrize(
    ("switches", "signal_number"),
    [(("--ignore-eof",), 15), (("--ignore-eof", "--ignore-term"), 9)],
    ids=["exits-on-sigterm", "needs-sigkill"],
)
async def test_close_escalates_stdin_then_sigterm_then_sigkill(
    hostile_cmd: list[str], switches: tuple[str, ...], signal_number: int
) -> None:
    """A server that ignores stdin EOF gets SIGTERM; one that ignores SIGTERM too gets SIGKILL
    once `shutdown_grace_ms` is over. Either way `aclose()` returns within its bounds."""
    client = StdioClient(hostile_cmd[0], [*hostile_cmd[1:], *switches], shutdown_grace_ms=400)
    await client.connect()
    connection = client._conn  # the live connection, to read its process's exit status
    assert connection is not None
    transport = connection.transport
    started = time.perf_counter()
    await client.aclose()
    elapsed = time.perf_counter() - started
    assert transport.returncode == -signal_number
    assert elapsed < 5.0
    assert group_gone(transport.pid)


async def test_a_content_block_of_an_unknown_kind_passes_through_untouched(hostile_cmd: list[str]) -> None:
    """A block kind from a later protocol revision does not fail the call: the whole original
    array reaches the bridge untouched (kind `raw`), and nothing of the stash leaks."""
    from toolbridge.bridge import McpToolProvider

    expected = [{"type": "text", "text": "before"}, {"type": "hologram", "frames": [1, 2]}]
    async with client_for(hostile_cmd) as client:
        wire = await client.call_tool("future_content", {})
        assert wire == {"content": expected}
        result = await McpToolProvider(client).call_tool("future_content", {})
        assert result.kind == "raw"
        assert [dict(block) for block in result.raw] == expected
        assert (await client.call_tool("echo", {"text": "still fine"}))["content"][0]["text"] == "still fine"
