"""A governed call of a discovered tool (an `McpToolProvider` binding) enters one cancel scope.

The session gives the provider its deadline (`call_tool_until`), which hands it to a toolbridge
client's own scope (`call_tool(deadline=)`) or, for another client, bounds the call with a scope
of its own. What must not change: a tool timeout is `TIMEOUT` (`OUTCOME_UNKNOWN` for a tool with
effects), so is the client's own shorter timeout, the session's deadline still bounds the call,
cancelling the caller still cancels the call, and a provider or client whose `call_tool` is
replaced (a user's wrapper, the gateway's) is still called, under the runtime's own scope.
Against server-everything over stdio.
"""

from __future__ import annotations

import math
import time
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from toolbridge import _deadlines
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.errors import ConfigError, PolicyError
from toolbridge.runtime import create_runtime

LONG = "trigger-long-running-operation"
SLOW = {"duration": 5, "steps": 5}


def _client(params: StdioServerParameters, timeout: float | None = 20) -> StdioClient:
    return StdioClient(params.command, list(params.args), timeout=timeout, shutdown_grace_ms=300)


def _runtime(effects: str, **limits: int) -> Any:
    return create_runtime(
        permissions={"allow": [f"tool:{LONG}", "tool:echo", f"effect:{effects}"]}, limits=limits or None
    )


def _binding(provider: Any, effects: str, timeout_ms: int) -> dict[str, Any]:
    return {"provider": provider, "effects": effects, "timeout_ms": timeout_ms}


async def _call_long(provider: Any, effects: str, timeout_ms: int, **limits: int) -> tuple[str, str, Any]:
    """The long call through a session: (the refusal's code, the session's outcome, its record)."""
    runtime = _runtime(effects, **limits)
    started = time.monotonic()
    async with runtime.session(tool_providers=[_binding(provider, effects, timeout_ms)]) as session:
        with pytest.raises(PolicyError) as failed:
            await session.call_tool(LONG, SLOW)
    assert time.monotonic() - started < 3
    return failed.value.code, session.result().outcome, runtime.inspect(session.run_id)


def _text(result: Any) -> str:
    if isinstance(result, dict):
        return str(result["content"][0]["text"])
    return str(result.content[0].text)


@pytest.mark.parametrize(
    ("effects", "expected"),
    [("none", ("TIMEOUT", "failed")), ("write", ("OUTCOME_UNKNOWN", "outcome_unknown"))],
)
async def test_the_tool_timeout_of_a_discovered_tool(
    everything_params: StdioServerParameters, effects: str, expected: tuple[str, str]
) -> None:
    async with _client(everything_params) as client:
        code, outcome, record = await _call_long(McpToolProvider(client), effects, timeout_ms=300)
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"
    assert (code, outcome) == expected
    (evidence,) = record.calls
    assert evidence.request_sent and not evidence.response_received


async def test_the_clients_own_shorter_timeout_is_still_a_timeout(
    everything_params: StdioServerParameters,
) -> None:
    async with _client(everything_params, timeout=1.0) as client:
        await client.connect()  # the listing and the call are bounded by 1 s, not the start
        code, outcome, _ = await _call_long(McpToolProvider(client), "none", timeout_ms=60_000)
    assert (code, outcome) == ("TIMEOUT", "failed")


async def test_the_session_deadline_bounds_a_discovered_call(
    everything_params: StdioServerParameters,
) -> None:
    async with _client(everything_params) as client:
        code, outcome, _ = await _call_long(
            McpToolProvider(client), "none", timeout_ms=60_000, max_duration_ms=400
        )
    assert (code, outcome) == ("TIMEOUT", "failed")


@pytest.mark.parametrize(("effects", "expected"), [("none", "cancelled"), ("write", "outcome_unknown")])
async def test_cancelling_the_caller_cancels_the_discovered_call(
    everything_params: StdioServerParameters, effects: str, expected: str
) -> None:
    runtime = _runtime(effects)
    async with _client(everything_params) as client:
        # Started and listed first: on a loaded machine starting node alone can take longer than
        # the caller's patience below, and then no call would be in flight to cancel.
        await client.connect()
        await client.list_tools()
        binding = _binding(McpToolProvider(client), effects, 60_000)
        started = time.monotonic()
        with anyio.move_on_after(0.4) as outer:
            async with runtime.session(tool_providers=[binding]) as session:
                await session.call_tool(LONG, SLOW)
        assert outer.cancelled_caught and time.monotonic() - started < 4.5  # the call takes 5 s
        assert _text(await client.call_tool("echo", {"message": "again"})) == "Echo: again"
    assert session.result().outcome == expected
    (evidence,) = runtime.inspect(session.run_id).calls
    assert evidence.request_sent and evidence.outcome == expected


class _Wrapped(StdioClient):
    """A user's own wrapper of a toolbridge client: `call_tool` without `deadline=`."""

    seen: list[str]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:  # type: ignore[override]
        self.seen.append(name)
        return await super().call_tool(name, arguments)


class _Logged(McpToolProvider):
    """A user's own provider subclass: `call_tool` overridden (`call_tool_until` would skip it)."""

    seen: list[str]

    async def call_tool(self, name: str, args: Any) -> Any:
        self.seen.append(name)
        return await super().call_tool(name, args)


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The deadline of every scope armed on the loop's `DeadlineWatch` (the runtime's and the
    client's scopes both arm theirs there)."""
    seen: list[float] = []
    real = _deadlines.DeadlineWatch.arm

    def spy(self: _deadlines.DeadlineWatch, scope: Any, deadline: float) -> None:
        seen.append(deadline)
        real(self, scope, deadline)

    monkeypatch.setattr(_deadlines.DeadlineWatch, "arm", spy)
    return seen


async def _armed_by_one_call(provider: Any, armed: list[float]) -> tuple[float, list[float]]:
    runtime = _runtime("none")
    async with runtime.session(tool_providers=[_binding(provider, "none", 7_000)]) as session:
        armed.clear()
        before = anyio.current_time()
        result = await session.call_tool("echo", {"message": "hi"})
    assert result.to_text() == "Echo: hi"
    return before, list(armed)


class _SdkShape:
    """`mcp.Client` in the `McpClient` shape (a list of tools), as a user would wrap it."""

    def __init__(self, sdk: Client) -> None:
        self.sdk = sdk

    async def list_tools(self) -> list[Any]:
        return list((await self.sdk.list_tools()).tools)

    async def call_tool(self, name: str, arguments: Any = None) -> Any:
        return await self.sdk.call_tool(name, arguments)

    async def aclose(self) -> None:
        pass


async def test_one_scope_per_discovered_call_whatever_the_client(
    everything_params: StdioServerParameters, armed: list[float]
) -> None:
    """Our client's own scope takes the tool's deadline; another client gets the provider's."""
    async with _client(everything_params) as ours, Client(everything_params) as sdk:
        await ours.list_tools()
        for client in (ours, _SdkShape(sdk)):
            before, deadlines = await _armed_by_one_call(McpToolProvider(client), armed)
            # one armed scope, whose deadline is the tool's (7 s, earlier than our client's 20 s)
            assert len(deadlines) == 1, (client, deadlines)
            assert before + 6.5 < deadlines[0] < anyio.current_time() + 7


async def test_an_overriding_provider_keeps_the_runtimes_scope(
    everything_params: StdioServerParameters, armed: list[float]
) -> None:
    """The subclass's `call_tool` is what runs, inside the runtime's scope (plus the client's
    own): the tool timeout still holds."""
    async with _client(everything_params) as client:
        await client.list_tools()
        provider = _Logged(client)
        provider.seen = []
        _, deadlines = await _armed_by_one_call(provider, armed)
        assert provider.seen == ["echo"] and len(deadlines) == 2
        code, _, _ = await _call_long(provider, "none", timeout_ms=300)
        assert code == "TIMEOUT" and provider.seen == ["echo", LONG]
        # An instance whose `call_tool` was replaced is called the same way.
        plain = McpToolProvider(client)
        calls: list[str] = []
        original = plain.call_tool

        async def traced(name: str, args: Any) -> Any:
            calls.append(name)
            return await original(name, args)

        plain.call_tool = traced  # type: ignore[method-assign]
        _, deadlines = await _armed_by_one_call(plain, armed)
        assert calls == ["echo"] and len(deadlines) == 2


async def test_a_client_that_overrides_call_tool_is_bounded_by_the_providers_scope(
    everything_params: StdioServerParameters, armed: list[float]
) -> None:
    """No `deadline=` for an override (it may not take the keyword, or not pass it on): the
    call works, the provider bounds it, and the tool timeout is still `TIMEOUT`."""
    client = _Wrapped(
        everything_params.command, list(everything_params.args), timeout=20, shutdown_grace_ms=300
    )
    client.seen = []
    async with client:
        provider = McpToolProvider(client)
        _, deadlines = await _armed_by_one_call(provider, armed)
        # the provider's scope (7 s) and the client's own (20 s), as with the runtime's before
        assert len(deadlines) == 2 and client.seen == ["echo"]
        code, outcome, _ = await _call_long(provider, "none", timeout_ms=300)
        assert (code, outcome) == ("TIMEOUT", "failed")
        assert client.seen == ["echo", LONG]
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"


async def test_call_tool_until_directly(everything_params: StdioServerParameters) -> None:
    """The public method: a result before the deadline, `TimeoutError` after it (through our
    client and through `mcp.Client`), and the client usable afterwards."""
    async with _client(everything_params) as ours, Client(everything_params) as sdk:
        for client in (ours, sdk):
            provider = McpToolProvider(client)
            now = anyio.current_time()
            result = await provider.call_tool_until("echo", {"message": "x"}, now + 10)
            assert result.to_text() == "Echo: x"
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await provider.call_tool_until(LONG, SLOW, anyio.current_time() + 0.3)
            assert time.monotonic() - started < 3
            with pytest.raises(TimeoutError):  # already past: cancelled at once
                await provider.call_tool_until("echo", {"message": "late"}, now - 1)
            assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"


@pytest.mark.parametrize("deadline", [math.nan, "soon", True, None, [1.0]])
async def test_call_tool_until_refuses_a_bad_deadline(
    everything_params: StdioServerParameters, deadline: Any
) -> None:
    async with _client(everything_params) as ours, Client(everything_params) as sdk:
        for client in (ours, sdk):
            with pytest.raises(ConfigError) as bad:
                await McpToolProvider(client).call_tool_until("echo", {"message": "x"}, deadline)
            assert bad.value.code == "ERR_CONFIG" and "deadline" in str(bad.value)
            with pytest.raises(ConfigError) as args:
                await McpToolProvider(client).call_tool_until("echo", ["x"], 1e12)  # type: ignore[arg-type]
            assert args.value.code == "ERR_INVALID_INPUT"


async def test_an_agent_step_runs_the_call_the_runtimes_way(
    everything_params: StdioServerParameters, armed: list[float]
) -> None:
    """Under `runtime.run` the governor runs a discovered tool's call as a session does (one way
    to run a governed call): the provider takes the tool's deadline into the client's one scope,
    so a step arms the run's scope and the call's, not a third (the client's 20 s)."""
    from toolbridge import Agent, ScriptedModel

    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:echo", "effect:none"]},
        limits={"max_duration_ms": 60_000},
    )
    async with _client(everything_params) as client:
        await client.list_tools()
        binding = _binding(McpToolProvider(client), "none", 7_000)
        turns: list[dict[str, Any]] = [
            {"tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}]},
            {"text": "done"},
        ]
        armed.clear()
        before = anyio.current_time()
        result = await runtime.run(Agent(ScriptedModel(turns), tool_providers=[binding]), "go")
    assert result.ok, (result.outcome, result.error_code)
    assert result.steps[0].tool_results[0].content[0].text == "Echo: hi"
    # the run's deadline (60 s) and the call's (the tool's 7 s): nothing at the client's 20 s
    assert len(armed) == 2, armed
    assert before + 6.5 < min(armed) < before + 8 and max(armed) > before + 59
