"""The fault suite over stdio: toolbridge's transport under the official SDK session.

Each test starts the hostile server (tests/faults/hostile_server.py), injects one fault, and checks
the documented behaviour: the call fails with the right error within its timeout, memory stays
bounded, other clients in the process are unaffected, the next call recovers where it can, nothing
hangs and no process is left. The same faults through `toolbridge.StdioClient` (with toolbridge's
error codes) are in test_faults_client.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

import anyio
import mcp_types as types
import pytest
from _support import group_gone, rss_bytes
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolbridge.clients._stdio_transport import StdioTransport, make_logging_callback

MiB = 1024 * 1024
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


@asynccontextmanager
async def hostile_client(
    cmd: list[str], *extra: str, **options: Any
) -> AsyncIterator[tuple[Client, StdioTransport]]:
    transport = StdioTransport(cmd[0], [*cmd[1:], *extra], **options)
    async with Client(transport) as client:
        yield client, transport
    assert transport.pid is not None
    pid = transport.pid
    await wait_until(lambda: group_gone(pid), 5)


async def wait_until(predicate: Callable[[], bool], limit_s: float) -> None:
    """Poll `predicate` (state of a process or a counter, no event to wait on) for `limit_s`."""
    with anyio.fail_after(limit_s):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.01)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def marker(exc: MCPError) -> dict[str, Any]:
    data = exc.error.data
    assert isinstance(data, dict) and data.get("toolbridge") == "protocol", exc.error
    return data


class RssSampler:
    """Samples this process's RSS every few ms while it runs; `growth` is the peak minus the start."""

    def __init__(self) -> None:
        self.start = rss_bytes()
        self.peak = self.start

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_bytes())
            await anyio.sleep(0.005)

    @property
    def growth(self) -> int:
        return self.peak - self.start


# ---------------------------------------------------------------------------------------------
# Big results
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [8 * MiB, 16 * MiB, 32 * MiB, 50_000_000, 64 * MiB])
async def test_big_results_arrive_intact(hostile_cmd: list[str], hostile: ModuleType, size: int) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        result = await client.call_tool("big", {"size": size}, read_timeout_seconds=30)
        text = text_of(result)
        assert len(text) == size
        assert text == hostile.payload(size)
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


async def test_big_result_with_the_id_last_arrives_intact(
    hostile_cmd: list[str], hostile: ModuleType
) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        result = await client.call_tool("big", {"size": 16 * MiB, "order": "ts"}, read_timeout_seconds=30)
        assert text_of(result) == hostile.payload(16 * MiB)


# ---------------------------------------------------------------------------------------------
# Above the size cap
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["python", "ts"])
async def test_a_result_above_the_cap_fails_at_once_and_the_session_goes_on(
    hostile_cmd: list[str], order: str
) -> None:
    cap = 4 * MiB
    async with hostile_client(hostile_cmd, max_message_bytes=cap) as (client, _):
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("big", {"size": 12 * MiB, "order": order}, read_timeout_seconds=20)
        assert time.perf_counter() - started < 5
        data = marker(info.value)
        assert data["reason"] == "message_too_large"
        assert data["limit"] == cap and data["size"] > cap
        assert "limit" in info.value.error.message and "MiB" in info.value.error.message
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_a_100mb_line_without_newline_keeps_memory_bounded_and_fails_at_once(
    hostile_cmd: list[str],
) -> None:
    cap = 8 * MiB
    line = 100_000_000
    async with hostile_client(hostile_cmd, max_message_bytes=cap) as (client, transport):
        await client.call_tool("echo", {"text": "warm up"})
        sampler = RssSampler()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            started = time.perf_counter()
            with pytest.raises(MCPError) as info:
                await client.call_tool("nonewline", {"size": line}, read_timeout_seconds=20)
            failed_after = time.perf_counter() - started
            # Let the rest of the 100 MB stream through the transport, then watch it idle.
            await wait_until(lambda: transport.unfinished_line_bytes >= line, 10)
            cpu_before = time.process_time()
            await anyio.sleep(0.5)
            idle_cpu = time.process_time() - cpu_before
            tg.cancel_scope.cancel()
        assert failed_after < 5
        assert marker(info.value)["reason"] == "message_too_large"
        assert sampler.growth < 48 * MiB, f"RSS grew by {sampler.growth / MiB:.0f} MiB for a 95 MiB line"
        assert idle_cpu < 0.2, f"{idle_cpu:.2f} s of CPU while the server was silent"
        # The server ends the line before answering its next request: the session goes on.
        assert text_of(await client.call_tool("echo", {"text": "recovered"})) == "recovered"


async def test_a_line_without_id_above_the_cap_fails_at_the_timeout(hostile_cmd: list[str]) -> None:
    async with hostile_client(hostile_cmd, max_message_bytes=4 * MiB) as (client, _):
        sampler = RssSampler()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            started = time.perf_counter()
            with pytest.raises(MCPError) as info:
                await client.call_tool(
                    "nonewline", {"size": 40 * MiB, "with_id": False}, read_timeout_seconds=1.5
                )
            elapsed = time.perf_counter() - started
            tg.cancel_scope.cancel()
        assert info.value.error.code == REQUEST_TIMEOUT
        assert 1.4 < elapsed < 4
        assert sampler.growth < 32 * MiB
        assert text_of(await client.call_tool("echo", {"text": "recovered"})) == "recovered"


# ---------------------------------------------------------------------------------------------
# Malformed lines and unknown ids
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["truncated", "invalid"])
async def test_a_malformed_response_with_the_id_fails_that_call_at_once(
    hostile_cmd: list[str], kind: str
) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("malformed", {"kind": kind}, read_timeout_seconds=10)
        assert time.perf_counter() - started < 2
        assert marker(info.value)["reason"] == "malformed"
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_malformed_lines_without_an_id_are_logged_and_skipped(
    hostile_cmd: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("toolbridge.test.malformed")
    caplog.set_level(logging.INFO, logger=logger.name)
    async with hostile_client(hostile_cmd, logger=logger) as (client, _):
        result = await client.call_tool("malformed", {"kind": "noid"}, read_timeout_seconds=10)
        assert text_of(result) == "ok"
    records = [r for r in caplog.records if r.name == logger.name and "server stderr" not in r.getMessage()]
    # Text that is no JSON is a banner, not a protocol fault: INFO; a JSON object that is no
    # JSON-RPC message is a protocol fault: WARNING.
    text = [r for r in records if "this line is not JSON at all" in r.getMessage()]
    assert [r.levelno for r in text] == [logging.INFO] and "skipped" in text[0].getMessage()
    json_line = [r for r in records if "a JSON object that is no JSON-RPC message" in r.getMessage()]
    assert [r.levelno for r in json_line] == [logging.WARNING]


async def test_an_answer_with_an_unknown_id_is_dropped_and_the_call_times_out(hostile_cmd: list[str]) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("unknown_id", {}, read_timeout_seconds=1.0)
        assert info.value.error.code == REQUEST_TIMEOUT
        assert time.perf_counter() - started < 3
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


# ---------------------------------------------------------------------------------------------
# Notification flood
# ---------------------------------------------------------------------------------------------


async def test_a_flood_of_20000_log_notifications_never_times_out_the_call(hostile_cmd: list[str]) -> None:
    """20,000 log notifications before the answer: the call still completes and the session goes on.

    How its cost compares with the raw SDK's is measured side by side in `bench/bench_flood.py`
    (timings belong in benchmarks, not in tests on a shared machine).
    """
    logger = logging.getLogger("toolbridge.test.flood")
    transport = StdioTransport(hostile_cmd[0], hostile_cmd[1:])
    async with Client(transport, logging_callback=make_logging_callback(logger)) as client:
        result = await client.call_tool("flood", {"count": 20000}, read_timeout_seconds=60)
        assert text_of(result) == "flooded"
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


# ---------------------------------------------------------------------------------------------
# Crashes, hangs, late answers, start-up failures
# ---------------------------------------------------------------------------------------------


async def test_a_crash_mid_call_fails_the_call_at_once(hostile_cmd: list[str]) -> None:
    async with hostile_client(hostile_cmd) as (client, transport):
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("crash", {}, read_timeout_seconds=10)
        assert info.value.error.code == CONNECTION_CLOSED
        assert time.perf_counter() - started < 1.0
        assert transport.exited.is_set()
        await wait_until(lambda: transport.returncode is not None, 2)
        assert transport.returncode == 3
        assert "crashing on purpose" in transport.stderr_tail()


async def test_a_call_that_never_answers_times_out_and_others_go_on(hostile_cmd: list[str]) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        outcome: dict[str, Any] = {}

        async def hang() -> None:
            started = time.perf_counter()
            try:
                await client.call_tool("hang", {}, read_timeout_seconds=1.0)
            except MCPError as exc:
                outcome["code"] = exc.error.code
            outcome["elapsed"] = time.perf_counter() - started

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            for i in range(5):
                assert text_of(await client.call_tool("echo", {"text": str(i)})) == str(i)
        assert outcome["code"] == REQUEST_TIMEOUT
        assert 0.9 < outcome["elapsed"] < 3


async def test_an_answer_after_the_call_was_cancelled_is_ignored(hostile_cmd: list[str]) -> None:
    async with hostile_client(hostile_cmd) as (client, _):
        with pytest.raises(MCPError) as info:
            await client.call_tool("late", {"seconds": 0.6}, read_timeout_seconds=0.3)
        assert info.value.error.code == REQUEST_TIMEOUT
        # The late answer arrives while this call waits; it must not be taken for this one.
        result = await client.call_tool("sleep", {"seconds": 0.6}, read_timeout_seconds=5)
        assert text_of(result) == "slept"
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_a_server_that_exits_at_start_ends_the_connection_within_a_second(
    hostile_cmd: list[str],
) -> None:
    transport = StdioTransport(hostile_cmd[0], [*hostile_cmd[1:], "--exit-at-start"])
    started = time.perf_counter()
    with pytest.raises(BaseException) as info:  # the SDK's session wraps its error in a group
        async with Client(transport):
            pass
    assert time.perf_counter() - started < 1.0
    closed = [e for e in _leaves(info.value) if isinstance(e, MCPError)]
    assert closed and closed[0].error.code == CONNECTION_CLOSED
    assert "fatal: cannot open /nonexistent/config.toml" in transport.stderr_tail()
    assert transport.returncode == 2


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


# ---------------------------------------------------------------------------------------------
# Isolation, tool definitions
# ---------------------------------------------------------------------------------------------


async def test_other_clients_in_the_process_are_unaffected(hostile_cmd: list[str]) -> None:
    """While one server floods its client with 100 MB of garbage and 64 MiB results, another
    client in the same event loop keeps answering promptly."""
    latencies: list[float] = []
    async with (
        hostile_client(hostile_cmd, max_message_bytes=8 * MiB) as (victim, _),
        hostile_client(hostile_cmd) as (bystander, _),
        hostile_client(hostile_cmd) as (heavy, _),
    ):
        done = anyio.Event()

        async def abuse() -> None:
            with pytest.raises(MCPError):
                await victim.call_tool("nonewline", {"size": 100_000_000}, read_timeout_seconds=20)
            assert (
                len(text_of(await heavy.call_tool("big", {"size": 64 * MiB}, read_timeout_seconds=30)))
                == 64 * MiB
            )
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(abuse)
            while not done.is_set():
                started = time.perf_counter()
                assert text_of(await bystander.call_tool("echo", {"text": "ping"})) == "ping"
                latencies.append(time.perf_counter() - started)
                await anyio.sleep(0.01)
        assert text_of(await victim.call_tool("echo", {"text": "back"})) == "back"
    assert len(latencies) > 5
    assert max(latencies) < 3.0, f"slowest bystander call took {max(latencies):.2f} s"


async def test_a_changed_description_between_listings_is_passed_on_as_is(hostile_cmd: list[str]) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    transport = StdioTransport(hostile_cmd[0], [*hostile_cmd[1:], "--rug-pull"])
    async with Client(transport, message_handler=on_message) as client:
        first = {t.name: t.description for t in (await client.list_tools()).tools}
        with anyio.fail_after(2):
            await changed.wait()
        second = {t.name: t.description for t in (await client.list_tools(cache_mode="bypass")).tools}
    assert first["echo"] != second["echo"]
    assert "(version 1)" in str(first["echo"]) and "(version 2)" in str(second["echo"])


async def test_escape_sequences_and_invisible_unicode_arrive_byte_exact(
    hostile_cmd: list[str], hostile: ModuleType
) -> None:
    """The transport neither strips nor chokes on them; cleaning is the tool layer's job."""
    async with hostile_client(hostile_cmd, "--poison") as (client, _):
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["poisoned"].description == hostile.POISON_DESCRIPTION


async def test_a_crash_is_noticed_even_when_a_grandchild_holds_stdout_open(hostile_cmd: list[str]) -> None:
    """`--child` leaves a `sleep 60` holding the server's stdout: no EOF comes when the server dies,
    so the transport ends the read side itself, shortly after the exit."""
    async with hostile_client(hostile_cmd, "--child") as (client, transport):
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("crash", {}, read_timeout_seconds=10)
        assert info.value.error.code == CONNECTION_CLOSED
        assert time.perf_counter() - started < 1.0
        assert transport.exited.is_set()


@pytest.mark.parametrize(
    ("tool", "args"), [("big", {}), ("nonewline", {"with_id": False})], ids=["big", "nonewline"]
)
async def test_closing_while_a_big_message_streams_does_not_hang(
    hostile_cmd: list[str], tool: str, args: dict[str, Any]
) -> None:
    """The caller gives up mid-message: shutdown drains the pipe so the server can exit, and the
    whole thing stays within the grace periods."""
    started = time.perf_counter()
    async with hostile_client(hostile_cmd, max_message_bytes=16 * MiB, shutdown_grace_s=2.0) as (client, _):
        with anyio.move_on_after(0.3):
            await client.call_tool(tool, {"size": 64 * MiB, **args}, read_timeout_seconds=30)
    assert time.perf_counter() - started < 6


async def test_a_request_the_writer_cannot_encode_fails_alone_with_the_invalid_input_marker(
    hostile_cmd: list[str],
) -> None:
    """The SDK hands the transport a request with a lone surrogate: only that request fails."""
    async with hostile_client(hostile_cmd) as (client, transport):
        with pytest.raises(MCPError) as info:
            await client.call_tool("echo", {"text": "\ud800"}, read_timeout_seconds=10)
        data = info.value.error.data
        assert isinstance(data, dict) and data["toolbridge"] == "invalid_input", info.value.error
        assert data["reason"] == "unencodable" and "surrogates not allowed" in data["detail"]
        assert text_of(await client.call_tool("echo", {"text": "next"}, read_timeout_seconds=10)) == "next"
        assert not transport.exited.is_set()
