"""StdioClient against real servers: server-everything (2025-11-25) and mcp-server-time (2026-07-28).

Covers the persistent connection, timeouts that cancel on the server, a server killed mid-call
(restarted by the next call), start-up failure, stderr routing, shutdown without leftovers,
idempotent close, cancellation, progress, and the sampling / elicitation / roots handlers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolbridge.clients import McpClient, StdioClient
from toolbridge.errors import ConfigError, McpTimeoutError, TransportError

EXPECTED_TOOLS = {
    "echo",
    "get-sum",
    "get-tiny-image",
    "get-structured-content",
    "get-resource-links",
    "get-resource-reference",
    "get-annotated-message",
    "trigger-long-running-operation",
}


def _text(result: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in result["content"] if b.get("type") == "text")


async def _all_gone(find: Callable[[str], list[Any]], marker: str, within: float = 5.0) -> bool:
    """Wait until no descendant process matches `marker` (True), or `within` seconds pass (False)."""
    for _ in range(int(within / 0.05)):
        if not find(marker):
            return True
        await anyio.sleep(0.05)
    return not find(marker)


@pytest.fixture
def everything(everything_cmd: list[str]) -> StdioClient:
    # A timed-out long operation keeps node's event loop busy; don't wait 5 s for it at close.
    return StdioClient(everything_cmd[0], everything_cmd[1:], timeout=20, shutdown_grace_ms=300)


async def test_lists_all_tools_and_identifies_the_server(everything: StdioClient) -> None:
    async with everything as client:
        assert isinstance(client, McpClient)
        tools = await client.list_tools()
        names = {t.name for t in tools}
        assert names >= EXPECTED_TOOLS
        assert all(isinstance(t, types.Tool) for t in tools)
        assert client.server_info is not None and client.server_info.name == "mcp-servers/everything"
        assert client.protocol_version == "2025-11-25"
        # The list is cached: a second listing is the same list, without a new connection.
        pid = client.pid
        assert [t.name for t in await client.list_tools()] == [t.name for t in tools]
        assert client.pid == pid


async def test_one_process_serves_many_concurrent_calls(
    everything: StdioClient, server_processes: Any
) -> None:
    async with everything as client:
        results = await asyncio.gather(*(client.call_tool("echo", {"message": f"m{i}"}) for i in range(30)))
        assert [_text(r) for r in results] == [f"Echo: m{i}" for i in range(30)]
        assert len(server_processes("server-everything")) == 1


async def test_call_result_is_wire_json(everything: StdioClient) -> None:
    async with everything as client:
        result = await client.call_tool("get-structured-content", {"location": "New York"})
        assert set(result) <= {"content", "structuredContent", "isError", "_meta"}
        assert set(result["structuredContent"]) == {"temperature", "conditions", "humidity"}
        failed = await client.call_tool("get-sum", {"a": "x", "b": 1})
        assert failed["isError"] is True
        assert "expected number" in _text(failed)


async def test_timeout_cancels_and_the_connection_keeps_serving(everything: StdioClient) -> None:
    async with everything as client:
        await client.list_tools()
        pid = client.pid
        started = time.monotonic()
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5}, timeout=0.3)
        assert time.monotonic() - started < 2
        assert info.value.code == "ERR_MCP_TIMEOUT"
        assert isinstance(info.value, TimeoutError)
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"
        assert client.pid == pid  # same process, same connection


async def test_client_wide_default_timeout(everything_cmd: list[str]) -> None:
    async with StdioClient(
        everything_cmd[0], everything_cmd[1:], timeout=0.3, shutdown_grace_ms=300
    ) as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5})
        # A per-call timeout overrides the default.
        result = await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.5, "steps": 1}, timeout=10
        )
        assert "completed" in _text(result).lower()


async def test_killed_server_fails_the_call_at_once_and_is_restarted(everything: StdioClient) -> None:
    async with everything as client:
        await client.list_tools()
        first_pid = client.pid
        assert first_pid is not None
        generation = client.generation

        async def long_call() -> float:
            with pytest.raises(TransportError) as info:
                await client.call_tool("trigger-long-running-operation", {"duration": 10, "steps": 10})
            assert info.value.code == "ERR_MCP_TRANSPORT"
            return time.monotonic()

        async with anyio.create_task_group() as tg:
            failed_at: list[float] = []

            async def run() -> None:
                failed_at.append(await long_call())

            tg.start_soon(run)
            await anyio.sleep(0.3)
            killed_at = time.monotonic()
            os.kill(first_pid, signal.SIGKILL)
        assert failed_at[0] - killed_at < 1.0
        # The next call starts the server again, on a fresh connection.
        assert _text(await client.call_tool("echo", {"message": "back"})) == "Echo: back"
        assert client.pid not in (None, first_pid)
        assert client.generation > generation  # a restarted server may have other tools


async def test_server_that_died_while_idle_is_restarted_by_the_next_call(everything: StdioClient) -> None:
    async with everything as client:
        await client.call_tool("echo", {"message": "one"})
        pid = client.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await anyio.sleep(0.5)
        assert _text(await client.call_tool("echo", {"message": "two"})) == "Echo: two"
        assert client.pid != pid


async def test_startup_failure_is_one_transport_error_quoting_stderr() -> None:
    script = (
        "import sys; print('boom: missing API key', file=sys.stderr); "
        "print('second line', file=sys.stderr); sys.exit(3)"
    )
    client = StdioClient(sys.executable, ["-c", script])
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        await client.list_tools()
    assert time.monotonic() - started < 2.0
    assert not isinstance(info.value, BaseExceptionGroup)
    assert "boom: missing API key" in info.value.message
    assert "second line" in info.value.message
    await client.aclose()


async def test_bad_command_is_a_transport_error() -> None:
    async with StdioClient("toolbridge-no-such-command-xyz") as client:
        with pytest.raises(TransportError, match="toolbridge-no-such-command-xyz"):
            await client.list_tools()


async def test_no_process_outlives_the_client(everything_cmd: list[str], server_processes: Any) -> None:
    # `sh -c` makes the server a grandchild, as `npx` would.
    command = " ".join(everything_cmd)
    async with StdioClient("sh", ["-c", command], shutdown_grace_ms=500) as client:
        await client.call_tool("echo", {"message": "hi"})
        assert server_processes("server-everything")
    assert await _all_gone(server_processes, "server-everything")


async def test_server_stderr_goes_to_logging_not_to_stdout(
    everything: StdioClient, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbridge.server")
    async with everything as client:
        await client.call_tool("echo", {"message": "hi"})
    out, err = capfd.readouterr()
    assert "Starting default" not in out
    assert "Starting default" not in err
    assert any(
        "Starting default" in r.getMessage() and r.name.startswith("toolbridge.server.")
        for r in caplog.records
    )


async def test_custom_logger_name(everything_cmd: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="my.everything")
    async with StdioClient(everything_cmd[0], everything_cmd[1:], logger_name="my.everything") as client:
        await client.call_tool("echo", {"message": "hi"})
    assert any(r.name == "my.everything" for r in caplog.records)


async def test_aclose_is_idempotent_and_later_calls_fail(everything: StdioClient) -> None:
    await everything.call_tool("echo", {"message": "hi"})
    await everything.aclose()
    await everything.aclose()
    assert everything.closed
    with pytest.raises(TransportError, match="closed"):
        await everything.call_tool("echo", {"message": "again"})
    with pytest.raises(TransportError):
        await everything.list_tools()


async def test_aclose_while_connecting_and_concurrently(
    everything_cmd: list[str], server_processes: Any
) -> None:
    client = StdioClient(everything_cmd[0], everything_cmd[1:])
    task = asyncio.create_task(client.list_tools())
    await anyio.sleep(0.05)
    await asyncio.gather(client.aclose(), client.aclose())
    with pytest.raises(TransportError):
        await task
    assert await _all_gone(server_processes, "server-everything")


async def test_cancelling_a_call_leaves_the_connection_usable(everything: StdioClient) -> None:
    async with everything as client:
        await client.list_tools()
        pid = client.pid
        with anyio.move_on_after(0.3) as scope:
            await client.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5})
        assert scope.cancelled_caught
        task = asyncio.create_task(
            client.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5})
        )
        await anyio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert _text(await client.call_tool("echo", {"message": "still here"})) == "Echo: still here"
        assert client.pid == pid


async def test_progress_notifications_reach_the_handler(everything: StdioClient) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    async with everything as client:
        await client.call_tool(
            "trigger-long-running-operation", {"duration": 0.6, "steps": 3}, progress=progress
        )
    assert [v for v, _ in seen] == [1, 2, 3]
    assert all(total == 3 for _, total in seen)


async def test_environment_reaches_the_server(everything_cmd: list[str]) -> None:
    env = {"TOOLBRIDGE_TEST_MARK": "42"}
    async with StdioClient(everything_cmd[0], everything_cmd[1:], env=env) as client:
        text = _text(await client.call_tool("get-env", {}))
    assert '"TOOLBRIDGE_TEST_MARK": "42"' in text
    assert "PYTEST_CURRENT_TEST" not in text  # by default the caller's variables stay out
    async with StdioClient(everything_cmd[0], everything_cmd[1:], env=env, inherit_env=True) as client:
        text = _text(await client.call_tool("get-env", {}))
    assert '"TOOLBRIDGE_TEST_MARK": "42"' in text and "PYTEST_CURRENT_TEST" in text  # the opt-in


async def test_elicitation_handler_answers(everything_cmd: list[str]) -> None:
    asked: list[str] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="cancel")

    async with StdioClient(everything_cmd[0], everything_cmd[1:], elicitation_handler=answer) as client:
        text = _text(await client.call_tool("trigger-elicitation-request", {}))
    assert asked
    assert "cancel" in text.lower()


async def test_sampling_handler_answers(everything_cmd: list[str]) -> None:
    prompts: list[Any] = []

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompts.append(params.messages[0].content)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="scripted",
            stop_reason="endTurn",
        )

    async with StdioClient(everything_cmd[0], everything_cmd[1:], sampling_handler=sample) as client:
        text = _text(
            await client.call_tool("trigger-sampling-request", {"prompt": "the answer?", "maxTokens": 5})
        )
    assert prompts
    assert "forty-two" in text


async def test_roots_are_advertised(everything_cmd: list[str], tmp_path: Any) -> None:
    async with StdioClient(everything_cmd[0], everything_cmd[1:], roots=[tmp_path]) as client:
        text = _text(await client.call_tool("get-roots-list", {}))
    assert tmp_path.as_uri() in text


async def test_python_server_on_the_2026_protocol(time_server_cmd: list[str]) -> None:
    async with StdioClient(time_server_cmd[0], time_server_cmd[1:], timeout=20) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert client.protocol_version == "2026-07-28"
        assert {"get_current_time", "convert_time"} <= set(tools)
        assert tools["get_current_time"].output_schema is not None
        result = await client.call_tool("get_current_time", {"timezone": "Europe/Oslo"})
        assert result["structuredContent"]["timezone"] == "Europe/Oslo"
        assert {"datetime", "day_of_week", "is_dst"} <= set(result["structuredContent"])


async def test_legacy_mode_uses_the_handshake(time_server_cmd: list[str]) -> None:
    async with StdioClient(time_server_cmd[0], time_server_cmd[1:], mode="legacy") as client:
        await client.list_tools()
        assert client.protocol_version == "2025-11-25"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"command": ""}, "command"),
        ({"command": "x", "args": "a b"}, "args"),
        ({"command": "x", "timeout": 0}, "timeout"),
        ({"command": "x", "max_message_bytes": 0}, "max_message_bytes"),
        ({"command": "x", "mode": "2024-01-01"}, "mode"),
    ],
)
def test_invalid_arguments_are_config_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        StdioClient(**kwargs)


async def test_invalid_call_timeout(everything: StdioClient) -> None:
    with pytest.raises(ConfigError):
        await everything.call_tool("echo", {"message": "x"}, timeout=-1)
    await everything.aclose()


async def test_the_call_deadline_also_bounds_connecting() -> None:
    # A server that never answers the handshake: the call's own deadline applies, not connect_timeout.
    client = StdioClient(sys.executable, ["-c", "import time; time.sleep(30)"], shutdown_grace_ms=100)
    started = time.monotonic()
    with pytest.raises(McpTimeoutError):
        await client.call_tool("anything", {}, timeout=0.5)
    assert time.monotonic() - started < 3
    await client.aclose()


async def test_connect_timeout() -> None:
    client = StdioClient(
        sys.executable, ["-c", "import time; time.sleep(30)"], shutdown_grace_ms=100, connect_timeout=0.5
    )
    with pytest.raises(McpTimeoutError, match="handshake"):
        await client.list_tools()
    await client.aclose()
