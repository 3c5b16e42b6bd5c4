"""One bad call under the governed runtime: the other calls of the turn are not made unknown.

Two write-effect calls run in one model turn on one `StdioClient` (the hostile server): one
carries an argument no server could read, the other is a slow good call. The bad one fails
before anything reaches the server; the good one completes and is journaled `succeeded`. Before
the fix the bad argument broke the shared connection's writer, so the good call failed too and,
having effects, became `outcome_unknown`.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from toolbridge.agent import Agent
from toolbridge.agent.models import ScriptedModel
from toolbridge.clients import StdioClient
from toolbridge.runtime import create_runtime, define_mcp_tool


class EchoIn(pydantic.BaseModel):
    text: str


class SleepIn(pydantic.BaseModel):
    seconds: float
    structured: bool


class Slept(pydantic.BaseModel):
    slept: bool


def _tools(client: StdioClient) -> list[Any]:
    common: dict[str, Any] = {"version": "1", "effects": "write", "capabilities": [], "timeout_ms": 20_000}
    echo = define_mcp_tool(
        id="h.echo",
        description="Echo.",
        input=EchoIn,
        output=Slept,
        remote_name="echo",
        client=client,
        **common,
    )
    sleep = define_mcp_tool(
        id="h.sleep",
        description="Sleep.",
        input=SleepIn,
        output=Slept,
        remote_name="sleep",
        client=client,
        **common,
    )
    return [echo, sleep]


@pytest.mark.parametrize("bad", ["\ud800", "fine"], ids=["lone-surrogate", "control"])
async def test_a_bad_argument_does_not_make_another_write_call_unknown(
    hostile_cmd: list[str], bad: str
) -> None:
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:h.echo", "tool:h.sleep", "effect:write"]}
    )
    turn = {
        "tool_calls": [
            {"name": "h_sleep", "arguments": {"seconds": 0.5, "structured": True}},
            {"name": "h_echo", "arguments": {"text": bad}},
        ]
    }
    model = ScriptedModel([turn, {"text": "done"}])
    async with StdioClient(hostile_cmd[0], hostile_cmd[1:]) as client:
        await client.connect()
        pid = client.pid
        result = await runtime.run(Agent(model, tools=_tools(client), on_tool_error="feedback"), "go")
        assert client.pid == pid  # the connection survived the bad call
        received = json.loads((await client.call_tool("received", {}))["content"][0]["text"])
    calls = {c.tool_id: c for c in runtime.inspect(result.run_id).calls}
    assert calls["h.sleep"].outcome == "succeeded", calls
    assert calls["h.sleep"].request_sent and calls["h.sleep"].response_received
    if bad == "fine":  # the control: both calls reached the server
        assert received == ["sleep", "echo", "received"]
    else:  # the refused call never reached the server
        assert received == ["sleep", "received"]
        assert not calls["h.echo"].response_received
        # known not sent, so known not done: failed, never outcome_unknown
        assert (calls["h.echo"].outcome, calls["h.echo"].error_code) == ("failed", "INVALID_INPUT"), calls
        assert result.outcome != "outcome_unknown", result
