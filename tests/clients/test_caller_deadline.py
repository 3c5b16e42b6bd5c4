"""A caller's deadline given to `call_tool(deadline=...)`: enforced in the call's one cancel scope.

The governed runtime gives a toolbridge client its tool timeout this way, so that a governed call
enters one cancel scope instead of the runtime's around the client's. What must hold: the
caller's deadline raises a plain `TimeoutError` (the caller's limit), the client's own raises
`McpTimeoutError` as always, progress pushes back only the client's deadline, cancelling the
calling task is still a cancellation, and the connection keeps serving after each of them.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge._deadlines import deadline_watch
from toolbridge.clients import StdioClient
from toolbridge.clients import _base as client_base
from toolbridge.clients._call_support import RollingDeadline
from toolbridge.errors import ConfigError, McpTimeoutError

LONG = "trigger-long-running-operation"


@pytest.fixture
def everything(everything_cmd: list[str]) -> StdioClient:
    return StdioClient(everything_cmd[0], everything_cmd[1:], timeout=20, shutdown_grace_ms=300)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_the_callers_deadline_raises_timeout_error_and_the_connection_keeps_serving(
    everything: StdioClient,
) -> None:
    async with everything as client:
        await client.list_tools()
        pid = client.pid
        started = time.monotonic()
        with pytest.raises(TimeoutError) as info:
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, deadline=anyio.current_time() + 0.3)
        assert time.monotonic() - started < 2
        assert not isinstance(info.value, McpTimeoutError)  # the caller's limit, not the client's
        assert "caller's deadline" in str(info.value)
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"
        assert client.pid == pid


async def test_the_clients_own_timeout_still_raises_mcp_timeout_error(everything: StdioClient) -> None:
    async with everything as client:
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool(
                LONG, {"duration": 5, "steps": 5}, timeout=0.3, deadline=anyio.current_time() + 30
            )
        assert info.value.code == "ERR_MCP_TIMEOUT"


async def test_a_deadline_already_past_sends_nothing_that_is_waited_for(everything: StdioClient) -> None:
    async with everything as client:
        await client.list_tools()
        started = time.monotonic()
        with pytest.raises(TimeoutError) as info:
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, deadline=anyio.current_time() - 1)
        assert not isinstance(info.value, McpTimeoutError)
        assert time.monotonic() - started < 1
        assert _text(await client.call_tool("echo", {"message": "still"})) == "Echo: still"


async def test_progress_moves_the_clients_deadline_but_never_the_callers(everything: StdioClient) -> None:
    # A progress notification every 0.3 s: a 1 s client timeout is pushed back past the end of
    # the 1.8 s operation, but a caller's deadline 1.2 s away is not.
    async with everything as client:
        # Connected first: the 1 s client timeout covers a call's start too, and starting node on
        # a loaded machine can take most of it before the first progress could come.
        await client.list_tools()
        done = await client.call_tool(LONG, {"duration": 1.8, "steps": 6}, timeout=1.0)
        assert "completed" in _text(done).lower()
        started = time.monotonic()
        with pytest.raises(TimeoutError) as info:
            await client.call_tool(
                LONG, {"duration": 1.8, "steps": 6}, timeout=1.0, deadline=anyio.current_time() + 1.2
            )
        assert not isinstance(info.value, McpTimeoutError)
        assert 1.1 < time.monotonic() - started < 1.75


async def test_cancelling_the_caller_is_still_a_cancellation(everything: StdioClient) -> None:
    async with everything as client:
        await client.list_tools()
        with anyio.move_on_after(0.3) as outer:
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, deadline=anyio.current_time() + 10)
        assert outer.cancelled_caught  # the caller's own scope caught it: no TimeoutError
        assert _text(await client.call_tool("echo", {"message": "again"})) == "Echo: again"


async def test_no_client_deadline_and_a_callers_deadline(everything_cmd: list[str]) -> None:
    async with StdioClient(
        everything_cmd[0], everything_cmd[1:], timeout=None, shutdown_grace_ms=300
    ) as client:
        with pytest.raises(TimeoutError) as info:
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, deadline=anyio.current_time() + 0.3)
        assert not isinstance(info.value, McpTimeoutError)
        assert _text(await client.call_tool("echo", {"message": "x"})) == "Echo: x"


async def test_the_callers_deadline_is_recorded_as_a_cancelled_operation(
    everything: StdioClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As it was when the caller cancelled the call with a scope of its own: the operation's
    # `error.type` is CANCELLED, and the client's own timeout stays ERR_MCP_TIMEOUT.
    recorded: list[BaseException | None] = []
    real = client_base.record_mcp_operation

    def spy(*args: Any, error: BaseException | None = None, **kwargs: Any) -> None:
        recorded.append(error)
        real(*args, error=error, **kwargs)

    monkeypatch.setattr(client_base, "record_mcp_operation", spy)
    async with everything as client:
        with pytest.raises(TimeoutError):
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, deadline=anyio.current_time() + 0.2)
        with pytest.raises(McpTimeoutError):
            await client.call_tool(LONG, {"duration": 5, "steps": 5}, timeout=0.2)
    caller, own = recorded[-2:]
    assert type(caller).__name__ == "CancelledError"
    assert isinstance(own, McpTimeoutError)


@pytest.mark.parametrize("bad", [math.nan, "soon", True, None.__class__, [1.0]])
async def test_a_bad_deadline_is_one_config_error_and_nothing_is_sent(
    everything: StdioClient, bad: Any
) -> None:
    async with everything as client:
        with pytest.raises(ConfigError) as info:
            await client.call_tool("echo", {"message": "x"}, deadline=bad)
        assert info.value.code == "ERR_CONFIG" and "deadline" in str(info.value)
        assert client.pid is None  # refused before connecting: nothing was started or sent


_NOW = 1000.0
_limits = st.one_of(st.none(), st.floats(min_value=1e-3, max_value=1e6))
_callers = st.one_of(st.none(), st.floats(min_value=-1e6, max_value=1e6).map(lambda d: _NOW + d))


@settings(max_examples=200, deadline=None)
@given(limit=_limits, caller=_callers)
def test_the_armed_deadline_is_the_earlier_of_the_two(limit: float | None, caller: float | None) -> None:
    # The loop's clock is held at _NOW, so the oracle is exact: the scope gets min(client's,
    # caller's) deadline (none when both are missing; cancelled at once when it is already past),
    # and the caller's deadline is the one that ends the call when it is not later.
    async def check() -> None:
        loop = asyncio.get_running_loop()
        loop.time = lambda: _NOW  # type: ignore[method-assign]
        rolling = RollingDeadline(limit, None, caller)
        own = math.inf if limit is None else _NOW + limit
        expected = min(own, math.inf if caller is None else caller)
        with rolling.scope_class() as scope:
            rolling.arm(scope)
            watch = deadline_watch()
            armed = dict(watch._deadlines).get(scope)
            cancelled = scope.cancel_called
            rolling.disarm(scope)
            assert scope not in watch._deadlines
        if expected == math.inf:
            assert armed is None and not cancelled
        elif expected <= _NOW:
            assert armed is None and cancelled
        else:
            assert armed == expected and not cancelled
        assert rolling.caller_first == (caller is not None and caller <= own)

    asyncio.run(check())
