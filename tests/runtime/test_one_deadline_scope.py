"""A governed call over a toolbridge client enters one cancel scope for both deadlines.

The runtime gives the client its tool timeout (`McpTool.send_until` -> `call_tool(deadline=)`),
and the client enforces it in the call's own scope beside the client's own timeout. What must
not change: a tool timeout is `TIMEOUT` (`outcome_unknown` for a tool with effects), so is the
client's own shorter timeout (an `McpTimeoutError` is a `TimeoutError`), the session's deadline
still bounds the call, cancelling a run still cancels the call, and another client (`mcp.Client`)
still gets the runtime's own scope. Against server-everything over stdio.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pydantic
import pytest
from mcp import Client, StdioServerParameters
from rt_helpers import call, scripted

from toolbridge import _deadlines
from toolbridge.agent import Agent
from toolbridge.clients import StdioClient
from toolbridge.errors import PolicyError
from toolbridge.runtime import create_runtime, define_mcp_tool


class LongIn(pydantic.BaseModel):
    duration: float
    steps: int


class Empty(pydantic.BaseModel):
    pass


def _long(client: Any, effects: str, timeout_ms: int) -> Any:
    return define_mcp_tool(
        id="ops.long", version="1", description="", input=LongIn, output=Empty, effects=effects,
        capabilities=[], remote_name="trigger-long-running-operation", client=client, timeout_ms=timeout_ms,
    )  # fmt: skip


def _client(params: StdioServerParameters, timeout: float | None = 20) -> StdioClient:
    return StdioClient(params.command, list(params.args), timeout=timeout, shutdown_grace_ms=300)


def _grants(effects: str) -> dict[str, list[str]]:
    return {"allow": ["model:scripted", "tool:ops.long", f"effect:{effects}"]}


async def _run_long(client: Any, effects: str, timeout_ms: int) -> tuple[str, str | None, Any]:
    runtime = create_runtime(permissions=_grants(effects))
    model = scripted(call("ops_long", duration=5, steps=5), {"text": "never"})
    started = time.monotonic()
    result = await runtime.run(Agent(model, tools=[_long(client, effects, timeout_ms)]), "go")
    assert time.monotonic() - started < 3
    return result.outcome, result.error_code, runtime.inspect(result.run_id)


@pytest.mark.parametrize(
    ("effects", "expected"),
    [("none", ("failed", "TIMEOUT")), ("write", ("outcome_unknown", "OUTCOME_UNKNOWN"))],
)
async def test_the_tool_timeout_through_a_toolbridge_client(
    everything_params: StdioServerParameters, effects: str, expected: tuple[str, str]
) -> None:
    async with _client(everything_params) as client:
        outcome, code, record = await _run_long(client, effects, timeout_ms=300)
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"
    assert (outcome, code) == expected
    (evidence,) = record.calls
    assert evidence.request_sent and not evidence.response_received


async def test_the_clients_own_shorter_timeout_is_still_a_timeout(
    everything_params: StdioServerParameters,
) -> None:
    async with _client(everything_params, timeout=0.3) as client:
        outcome, code, _ = await _run_long(client, "none", timeout_ms=60_000)
    assert (outcome, code) == ("failed", "TIMEOUT")


async def test_the_session_deadline_bounds_a_client_call(everything_params: StdioServerParameters) -> None:
    runtime = create_runtime(
        permissions={"allow": ["tool:ops.long", "effect:none"]}, limits={"max_duration_ms": 400}
    )
    started = time.monotonic()
    client = _client(everything_params)
    async with client, runtime.session(tools=[_long(client, "none", 60_000)]) as session:
        with pytest.raises(PolicyError) as late:
            await session.call_tool("ops_long", {"duration": 5, "steps": 5})
    assert late.value.code == "TIMEOUT" and time.monotonic() - started < 3


async def test_cancelling_the_run_cancels_the_client_call(everything_params: StdioServerParameters) -> None:
    runtime = create_runtime(permissions=_grants("write"))
    model = scripted(call("ops_long", duration=5, steps=5), {"text": "never"})
    async with _client(everything_params) as client:
        agent = Agent(model, tools=[_long(client, "write", 60_000)])
        async with anyio.create_task_group() as tg:

            async def cancel_soon() -> None:
                await anyio.sleep(0.4)
                assert runtime.cancel("run_cancel_call")

            tg.start_soon(cancel_soon)
            started = time.monotonic()
            result = await runtime.run(agent, "go", run_id="run_cancel_call")
        assert time.monotonic() - started < 3
        assert _text(await client.call_tool("echo", {"message": "again"})) == "Echo: again"
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = runtime.inspect(result.run_id).calls
    assert evidence.request_sent and evidence.outcome == "outcome_unknown"


async def test_one_scope_per_governed_call_and_the_runtimes_own_for_other_clients(
    everything_params: StdioServerParameters, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed: list[float] = []
    real = _deadlines.DeadlineWatch.arm

    def spy(self: _deadlines.DeadlineWatch, scope: Any, deadline: float) -> None:
        armed.append(deadline)
        real(self, scope, deadline)

    monkeypatch.setattr(_deadlines.DeadlineWatch, "arm", spy)
    runtime = create_runtime(permissions={"allow": ["tool:ops.long", "effect:none"]})
    async with _client(everything_params) as ours, Client(everything_params) as sdk:
        await ours.list_tools()
        for client, scopes in ((ours, 1), (sdk, 1)):
            tool = define_mcp_tool(
                id="ops.long", version="1", description="", input={"type": "object"},
                output={"type": "object"}, effects="none", capabilities=[],
                remote_name="get-structured-content", client=client, timeout_ms=7_000,
            )  # fmt: skip
            async with runtime.session(tools=[tool]) as session:
                armed.clear()
                before = anyio.current_time()
                await session.call_tool("ops_long", {"location": "New York"})
            # one armed scope, whose deadline is the tool's (7 s, earlier than the client's 20 s)
            assert len(armed) == scopes, (client, armed)
            assert before + 6.5 < armed[0] < anyio.current_time() + 7
        assert tool.send_until({"location": "x"}, 0.0) is None  # mcp.Client: the runtime's scope


@pytest.mark.parametrize(("effects", "expected"), [("none", "TIMEOUT"), ("write", "OUTCOME_UNKNOWN")])
async def test_the_runs_max_duration_in_the_runs_one_scope(
    everything_params: StdioServerParameters, effects: str, expected: str
) -> None:
    # The run's deadline and `cancel(run_id)` share one scope: a deadline is still TIMEOUT (or
    # OUTCOME_UNKNOWN with effects in flight), never CANCELLED, and the runtime runs on after it.
    runtime = create_runtime(permissions=_grants(effects), limits={"max_duration_ms": 400})
    model = scripted(call("ops_long", duration=5, steps=5), {"text": "never"})
    async with _client(everything_params) as client:
        started = time.monotonic()
        result = await runtime.run(Agent(model, tools=[_long(client, effects, 60_000)]), "go")
        assert time.monotonic() - started < 3
        assert result.error_code == expected
        again = await runtime.run(Agent(scripted({"text": "quick"})), "go")
    assert again.outcome == "succeeded"


async def test_cancel_before_the_runs_deadline_is_cancelled(everything_params: StdioServerParameters) -> None:
    runtime = create_runtime(permissions=_grants("none"), limits={"max_duration_ms": 1_500})
    model = scripted(call("ops_long", duration=5, steps=5), {"text": "never"})
    async with _client(everything_params) as client, anyio.create_task_group() as tg:

        async def cancel_soon() -> None:
            await anyio.sleep(0.3)
            assert runtime.cancel("run_cancel_first")

        tg.start_soon(cancel_soon)
        result = await runtime.run(
            Agent(model, tools=[_long(client, "none", 60_000)]), "go", run_id="run_cancel_first"
        )
    assert (result.outcome, result.error_code) == ("cancelled", "CANCELLED")


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


class _Wrapped(StdioClient):
    """A user's own wrapper of a toolbridge client: `call_tool` without `deadline=`."""

    seen: list[str]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:  # type: ignore[override]
        self.seen.append(name)
        return await super().call_tool(name, arguments)


async def test_a_subclass_that_overrides_call_tool_keeps_the_runtimes_scope(
    everything_params: StdioServerParameters,
) -> None:
    """No hand-off to an override (it may not take the keyword, or not pass it on): the call
    works, and the tool timeout is still enforced, by the runtime's own scope."""
    client = _Wrapped(
        everything_params.command, list(everything_params.args), timeout=20, shutdown_grace_ms=300
    )
    client.seen = []
    async with client:
        assert _long(client, "none", 300).send_until({"duration": 1.0, "steps": 1}, 0.0) is None
        outcome, code, _ = await _run_long(client, "none", timeout_ms=300)
        assert (outcome, code) == ("failed", "TIMEOUT")
        assert client.seen == ["trigger-long-running-operation"]
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"
    async with _client(everything_params) as plain:
        handed = _long(plain, "none", 300).send_until({"duration": 1.0, "steps": 1}, 0.0)
        assert handed is not None
        handed.close()  # not sent: only whether the deadline would be handed over


async def test_an_instance_whose_call_tool_was_replaced_keeps_the_runtimes_scope(
    everything_params: StdioServerParameters,
) -> None:
    """A wrapper set on one client instance (not its class) is not handed the deadline either:
    the call goes through the wrapper, and the tool timeout still holds."""
    seen: list[str] = []
    async with _client(everything_params) as client:
        own = client.call_tool

        async def wrapper(name: str, arguments: dict[str, Any] | None = None) -> Any:
            seen.append(name)
            return await own(name, arguments)

        client.call_tool = wrapper  # type: ignore[method-assign]
        assert _long(client, "none", 300).send_until({"duration": 1.0, "steps": 1}, 0.0) is None
        outcome, code, _ = await _run_long(client, "none", timeout_ms=300)
        assert (outcome, code) == ("failed", "TIMEOUT")
        assert seen == ["trigger-long-running-operation"]
