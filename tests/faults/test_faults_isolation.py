"""One bad message fails one call, never the connection (issue 11 section 3).

Each test runs the hostile server (hostile_server.py) through `toolbridge.StdioClient`, has one
call carry or receive something hostile, and checks three things: that call fails with the
documented code (or, for recoverable junk, succeeds), a concurrent unrelated call on the same
connection succeeds, and the server process is the same one afterwards (the connection survived).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from _support import group_gone

from toolbridge.clients import DEFAULT_TIMEOUT, MAX_ARGUMENT_DEPTH, StdioClient
from toolbridge.errors import ConfigError, McpTimeoutError, ProtocolError

MiB = 1024 * 1024


@asynccontextmanager
async def client_for(cmd: list[str], *extra: str, **options: Any) -> AsyncIterator[StdioClient]:
    client = StdioClient(cmd[0], [*cmd[1:], *extra], shutdown_grace_ms=1000, **options)
    pid: int | None = None
    try:
        async with client:
            await client.connect()
            pid = client.pid
            yield client
            assert client.pid == pid, "the connection was replaced: the bad message broke it"
    finally:
        with anyio.fail_after(5):
            while pid is not None and not group_gone(pid):  # noqa: ASYNC110 - polling /proc
                await anyio.sleep(0.02)


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def fails_alone(client: StdioClient, name: str, arguments: dict[str, Any]) -> BaseException:
    """Run the bad call beside a slow good one; return the bad call's error (the good one must pass)."""
    outcome: dict[str, Any] = {}

    async def bad() -> None:
        try:
            await client.call_tool(name, arguments, timeout=20)
        except Exception as exc:
            outcome["error"] = exc

    async def good() -> None:
        outcome["good"] = text(await client.call_tool("sleep", {"seconds": 0.5}, timeout=20))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(good)
            await anyio.sleep(0.1)  # the good call is in flight when the bad one happens
            tg.start_soon(bad)
    assert outcome.get("good") == "slept", outcome
    assert "error" in outcome, f"the bad call succeeded: {outcome}"
    assert text(await client.call_tool("echo", {"text": "after"}, timeout=20)) == "after"
    error: BaseException = outcome["error"]
    return error


# -- inbound: a response the client cannot take --------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 100_000])
async def test_a_deeply_nested_response_fails_only_its_call(hostile_cmd: list[str], depth: int) -> None:
    async with client_for(hostile_cmd) as client:
        started = time.perf_counter()
        error = await fails_alone(client, "deep", {"depth": depth})
        assert isinstance(error, ProtocolError) and error.code == "ERR_MCP_PROTOCOL", repr(error)
        assert "recursion limit" in error.message
        assert time.perf_counter() - started < 10  # at once, not at a timeout


async def test_a_response_the_sdk_cannot_validate_fails_only_its_call(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        error = await fails_alone(client, "malformed", {"kind": "invalid"})
        assert isinstance(error, ProtocolError) and error.code == "ERR_MCP_PROTOCOL"


# -- outbound: arguments no server could read ----------------------------------------------------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"text": "\ud800"}, "lone surrogate"),
        ({"nested": {"\udfff key": 1}}, "lone surrogate"),
        ({"text": "ok", "n": math.nan}, "nan"),
        ({"n": [1, math.inf]}, "inf"),
        ({"n": -math.inf}, "inf"),
        ({"v": _nested(1_000)}, "nested deeper"),
        ({"v": _nested(100_000)}, "nested deeper"),
        ({"v": _cycle()}, "cycle"),
    ],
    ids=[
        "surrogate",
        "surrogate-key",
        "nan",
        "inf-in-list",
        "minus-inf",
        "depth-1000",
        "depth-100000",
        "cycle",
    ],
)
async def test_unsendable_arguments_fail_only_their_call_before_anything_is_sent(
    hostile_cmd: list[str], arguments: dict[str, Any], says: str
) -> None:
    async with client_for(hostile_cmd) as client:
        error = await fails_alone(client, "echo", arguments)
        assert isinstance(error, ConfigError) and error.code == "ERR_INVALID_INPUT", repr(error)
        assert says in error.message and "nothing was sent" in error.message
        received = json.loads(text(await client.call_tool("received", {}, timeout=20)))
        assert received == ["sleep", "echo", "received"]  # the refused `echo` never reached the server


async def test_a_surrogate_in_the_tool_name_is_refused_before_sending(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        error = await fails_alone(client, "echo\ud800", {})
        assert isinstance(error, ConfigError) and error.code == "ERR_INVALID_INPUT"


async def test_arguments_at_the_depth_limit_are_sent(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        result = await client.call_tool("echo", {"text": "deep ok", "v": _nested(MAX_ARGUMENT_DEPTH - 2)})
        assert text(result) == "deep ok"


async def test_a_message_the_encoder_refuses_fails_only_its_own_request(hostile_cmd: list[str]) -> None:
    """Below the argument check: the transport's writer itself fails one request, not the pipe."""
    async with client_for(hostile_cmd) as client:
        error = await fails_alone(client, "echo", {"when": object()})
        assert isinstance(error, ConfigError) and error.code == "ERR_INVALID_INPUT", repr(error)
        assert "not sent" in error.message


# -- junk on stdout ------------------------------------------------------------------------------


async def test_a_message_glued_after_junk_is_recovered(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        result = await client.call_tool("junk", {"size": 500, "text": 'Loading {"x": 1} [ok] '}, timeout=20)
        assert text(result) == "after junk"
        assert text(await client.call_tool("glued", {}, timeout=20)) == "glued"


async def test_the_next_call_answers_after_100mb_of_junk_without_a_newline(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd) as client:
        started = time.perf_counter()
        result = await client.call_tool("junk", {"size": 100_000_000}, timeout=60)
        assert text(result) == "after junk"
        assert time.perf_counter() - started < 30
        assert text(await client.call_tool("echo", {"text": "next"}, timeout=20)) == "next"


async def test_junk_past_the_size_cap_is_trimmed_and_the_answer_still_arrives(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd, max_message_bytes=1 * MiB) as client:
        transport = client._conn.transport if client._conn is not None else None
        result = await client.call_tool("junk", {"size": 20 * MiB, "text": "progress 42% "}, timeout=30)
        assert text(result) == "after junk"
        assert transport is not None and transport.junk_bytes >= 20 * MiB
        assert text(await client.call_tool("echo", {"text": "next"}, timeout=20)) == "next"


async def test_a_banner_on_stdout_is_logged_once_at_info_and_never_as_a_warning(
    hostile_cmd: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    name = "toolbridge.test.banner"
    caplog.set_level(logging.DEBUG, logger=name)
    async with client_for(hostile_cmd, "--banner", logger_name=name) as client:
        assert text(await client.call_tool("echo", {"text": "hi"}, timeout=20)) == "hi"
        await client.call_tool("junk", {"size": 10, "text": "more "}, timeout=20)
    stdout_records = [r for r in caplog.records if r.name == name and "on stdout" in r.getMessage()]
    assert [r.levelno for r in stdout_records] == [logging.INFO] + [logging.DEBUG] * 3
    assert "Hostile MCP server v1.0" in stdout_records[0].getMessage()
    assert not [r for r in caplog.records if r.name == name and r.levelno >= logging.WARNING]


# -- no caller waits forever ---------------------------------------------------------------------


def test_every_client_has_a_default_deadline() -> None:
    assert StdioClient("x")._timeout == DEFAULT_TIMEOUT == 300.0
    assert StdioClient("x", timeout=None)._timeout is None  # waiting forever is an explicit choice


async def test_a_lost_answer_times_out_at_the_client_wide_deadline(hostile_cmd: list[str]) -> None:
    async with client_for(hostile_cmd, timeout=0.5) as client:
        started = time.perf_counter()
        with pytest.raises(McpTimeoutError):
            await client.call_tool("hang", {})
        assert time.perf_counter() - started < 3
        assert text(await client.call_tool("echo", {"text": "alive"})) == "alive"


async def test_progress_notifications_push_the_deadline_back(hostile_cmd: list[str]) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with client_for(hostile_cmd, timeout=0.6) as client:
        started = time.perf_counter()
        # 6 x 0.25 s = 1.5 s in all, well past 0.6 s, but never 0.6 s without progress.
        result = await client.call_tool("progress", {"count": 6, "interval": 0.25}, progress=on_progress)
        assert text(result) == "progressed" and time.perf_counter() - started > 1.2
        assert seen == [1, 2, 3, 4, 5, 6]
        with pytest.raises(McpTimeoutError):  # without progress the same wait is too long
            await client.call_tool("sleep", {"seconds": 1.5})
