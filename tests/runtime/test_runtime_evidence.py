"""Evidence ordering, toolbridge clients, parallel calls, and reading back interrupted runs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pydantic
from mcp import StdioServerParameters
from rt_helpers import Empty, Message, call, scripted
from rt_server import SERVER_MARKER, server

from toolbridge.agent import Agent
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import InProcessClient, StdioClient
from toolbridge.runtime import Event, Journal, create_runtime, define_mcp_tool, define_tool


async def test_request_sent_is_committed_before_the_client_is_called(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite"
    seen_in_journal: list[tuple[int, int]] = []

    class Probe:
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
                seen_in_journal.append(
                    db.execute("SELECT request_sent, response_received FROM calls").fetchone()
                )
            return {"structuredContent": {"content": "ok"}}

    tool = define_mcp_tool(
        id="probe",
        version="2",
        description="",
        input=Empty,
        output=Message,
        effects="host",
        capabilities=["probe:use"],
        cost_micros=7,
        remote_name="probe",
        client=Probe(),
    )
    runtime = create_runtime(
        "durable",
        permissions={"allow": ["model:scripted", "tool:probe", "probe:use", "effect:host"]},
        limits={"max_cost_micros": 100},
        journal=journal,
    )
    result = await runtime.run(Agent(scripted(call("probe"), {"text": "done"}), tools=[tool]), "go")
    assert result.outcome == "succeeded" and result.cost_micros == 7
    assert seen_in_journal == [(1, 0)]
    (evidence,) = runtime.inspect(result.run_id).calls
    assert evidence.response_received and evidence.cost_micros == 7 and evidence.kind == "mcp"
    assert evidence.effects == "host" and evidence.ended_at is not None and evidence.sent_at is not None


class LongIn(pydantic.BaseModel):
    duration: float
    steps: int


async def test_toolbridge_stdio_client_timeout_is_unknown_and_session_survives(
    everything_params: StdioServerParameters,
) -> None:
    async with StdioClient(everything_params.command, everything_params.args) as client:
        tool = define_mcp_tool(
            id="ops.long",
            version="1",
            description="",
            input=LongIn,
            output=Empty,
            effects="write",
            capabilities=[],
            remote_name="trigger-long-running-operation",
            client=client,
            timeout_ms=300,
        )
        runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:ops.long", "effect:write"]})
        result = await runtime.run(Agent(scripted(call("ops_long", duration=5, steps=5)), tools=[tool]), "go")
        assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
        echoed = await client.call_tool("echo", {"message": "after"})
    assert "after" in json.dumps(echoed)


async def test_discovered_tool_error_text_never_leaks() -> None:
    events: list[Event] = []
    async with InProcessClient(server) as client:
        provider = McpToolProvider(client)
        model = scripted(call("t_fail"), {"text": "done"})
        agent = Agent(model, [{"provider": provider, "prefix": "t_", "effects": "none"}])
        runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:t_fail"]})
        runtime.subscribe(events.append)
        result = await runtime.run(agent, "go")
        # a bare agent would feed the server's text back to the model: the marker is real
        bare_model = scripted(call("t_fail"), {"text": "done"})
        await Agent(bare_model, [{"provider": provider, "prefix": "t_"}]).run("go")
    assert SERVER_MARKER in repr(bare_model.requests[1].messages)
    assert (result.outcome, result.error_code) == ("failed", "TOOL_ERROR")
    assert len(model.requests) == 1
    assert SERVER_MARKER not in repr(result) and SERVER_MARKER not in json.dumps(
        [e.to_dict() for e in events]
    )
    assert SERVER_MARKER not in json.dumps(runtime.inspect(result.run_id).to_dict())


async def test_a_failed_call_stops_the_calls_not_yet_started() -> None:
    order: list[str] = []

    def execute(inp: Empty, ctx: Any) -> Message:
        order.append(ctx.call_id)
        if ctx.call_id == "a":
            raise RuntimeError("first fails")
        return Message(content="ok")

    tool = define_tool("t", "1", "", Empty, Message, "none", [], execute=execute)
    turn = {"tool_calls": [{"id": "a", "name": "t"}, {"id": "b", "name": "t"}]}
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:t"]})
    result = await runtime.run(Agent(scripted(turn, "done"), tools=[tool], max_parallel_tools=1), "go")
    assert (result.outcome, result.error_code) == ("failed", "TOOL_FAILED")
    assert order == ["a"]
    calls = {c.call_id: c for c in runtime.inspect(result.run_id).calls}
    assert calls["a"].outcome == "failed" and calls["a"].request_sent
    assert calls["b"].outcome == "not_started" and not calls["b"].request_sent


async def test_parallel_calls_with_effects_one_unknown_makes_the_run_unknown() -> None:
    def execute(inp: Empty, ctx: Any) -> Message:
        if ctx.call_id == "b":
            raise RuntimeError("lost")
        return Message(content="ok")

    tool = define_tool("t", "1", "", Empty, Message, "write", [], execute=execute)
    turn = {"tool_calls": [{"id": "a", "name": "t"}, {"id": "b", "name": "t"}]}
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:t", "effect:write"]})
    result = await runtime.run(Agent(scripted(turn, "done"), tools=[tool]), "go")
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    outcomes = {c.call_id: c.outcome for c in runtime.inspect(result.run_id).calls}
    assert outcomes == {"a": "succeeded", "b": "outcome_unknown"}


def test_a_dead_run_with_nothing_in_flight_reads_back_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path, durable=True)
    journal.start_run("run_dead", agent="a", profile="durable")
    row = journal.plan_call(
        "run_dead",
        "c1",
        step=0,
        tool_id="t",
        tool_version="1",
        kind="declared",
        effects="none",
        args_sha256="0" * 64,
        args_bytes=2,
    )
    journal.request_sent(row)
    journal.plan_call(
        "run_dead",
        "c2",
        step=0,
        tool_id="w",
        tool_version="1",
        kind="declared",
        effects="write",
        args_sha256="0" * 64,
        args_bytes=2,
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    journal._db.execute("UPDATE runs SET pid=?", (int(dead.stdout),))
    journal.close()
    time.sleep(0.05)
    record = create_runtime("durable", journal=path).inspect("run_dead")
    assert record.interrupted and (record.outcome, record.error_code) == ("failed", "INTERRUPTED")
    assert [(c.call_id, c.outcome) for c in record.calls] == [("c1", "failed"), ("c2", "not_started")]
    # a run of a live process is still running
    live = Journal(path)
    live.start_run("run_live", agent="a", profile="durable")
    assert live.get_run("run_live") is not None and live.get_run("run_live").outcome == "running"  # type: ignore[union-attr]
    live.close()


async def test_bad_run_input_is_invalid_input() -> None:
    runtime = create_runtime(permissions={"allow": ["model:scripted"]})
    result = await runtime.run(Agent(scripted("x")), [{"role": "nobody", "content": 3}])
    assert (result.outcome, result.error_code) == ("failed", "INVALID_INPUT")
