"""The journal contract, on SQLite and PostgreSQL alike (a real server: TOOLBRIDGE_TEST_POSTGRES_URL).

Each test takes `journal_spec`: an SQLite file path or a fresh PostgreSQL database's URL, and a
`reader(spec)` that opens it read-only the way `toolbridge runs` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from rt_helpers import Empty, Message, call, scripted

from toolbridge.agent import Agent
from toolbridge.cli import main
from toolbridge.runtime import Journal, PostgresJournal, create_runtime, define_tool
from toolbridge.runtime._journal import JournalBackend

HERE = Path(__file__).resolve().parent


def reader(spec: str) -> JournalBackend:
    if spec.startswith("postgresql://"):
        return PostgresJournal.open_existing(spec)
    return Journal.open_existing(spec)


def tool(name: str, effects: str, execute: Callable[..., Any], cost: int = 0) -> Any:
    return define_tool(name, "1", name, Empty, Message, effects, [], cost_micros=cost, execute=execute)


async def test_request_sent_is_committed_before_the_tool_runs(journal_spec: str) -> None:
    seen: list[tuple[bool, bool, str]] = []

    async def probe(inp: Empty, ctx: Any) -> Message:
        r = reader(journal_spec)  # another connection: sees only what was committed
        try:
            record = r.get_run(ctx.run_id, active=True)
        finally:
            r.close()
        assert record is not None
        c = record.calls[0]
        seen.append((c.request_sent, c.response_received, c.outcome))
        return Message(content="ok")

    runtime = create_runtime(
        "durable",
        permissions={"allow": ["model:scripted", "tool:probe", "effect:write"]},
        limits={"max_cost_micros": 10},
        journal=journal_spec,
    )
    result = await runtime.run(
        Agent(scripted(call("probe"), "done"), tools=[tool("probe", "write", probe, 3)]), "go"
    )
    assert result.outcome == "succeeded" and result.cost_micros == 3
    assert seen == [(True, False, "running")]
    runtime.close()
    record = reader(journal_spec).get_run(result.run_id)
    assert record is not None and record.outcome == "succeeded" and record.cost_micros == 3
    (c,) = record.calls
    assert (c.tool_id, c.effects, c.outcome, c.cost_micros, c.kind) == (
        "probe",
        "write",
        "succeeded",
        3,
        "declared",
    )
    assert c.request_sent and c.response_received and c.sent_at is not None and len(c.args_sha256) == 64


async def test_the_five_outcomes_are_recorded_and_inspected(journal_spec: str) -> None:
    gate = anyio.Event()

    async def ok(inp: Empty, ctx: Any) -> Message:
        return Message(content="ok")

    async def boom(inp: Empty, ctx: Any) -> Message:
        raise RuntimeError("the server said no")

    async def slow(inp: Empty, ctx: Any) -> Message:
        gate.set()
        await anyio.sleep(30)
        return Message(content="late")

    tools = [tool("ok", "none", ok), tool("boom", "none", boom), tool("slow", "none", slow)]
    tools.append(tool("paid", "none", ok, cost=500))
    tools.append(define_tool("hang", "1", "", Empty, Message, "write", [], timeout_ms=50, execute=slow))
    allow = ["model:scripted", "tool:ok", "tool:boom", "tool:slow", "tool:paid", "tool:hang", "effect:write"]
    runtime = create_runtime(
        "durable", permissions={"allow": allow}, limits={"max_cost_micros": 100}, journal=journal_spec
    )
    got: dict[str, Any] = {}
    got["succeeded"] = await runtime.run(Agent(scripted(call("ok"), "done"), tools=tools), "go")
    got["failed"] = await runtime.run(Agent(scripted(call("boom"), "done"), tools=tools), "go")
    got["blocked"] = await runtime.run(Agent(scripted(call("paid"), "done"), tools=tools), "go")
    got["outcome_unknown"] = await runtime.run(Agent(scripted(call("hang"), "done"), tools=tools), "go")

    async def cancelled() -> None:
        got["cancelled"] = await runtime.run(
            Agent(scripted(call("slow")), tools=tools), "go", run_id="run_cancel"
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancelled)
        with anyio.fail_after(10):
            await gate.wait()
        assert runtime.cancel("run_cancel")
    for outcome, result in got.items():
        assert result.outcome == outcome, (outcome, result.error_code)
        assert runtime.inspect(result.run_id).outcome == outcome
    runtime.close()
    r = reader(journal_spec)
    listed = {rec.run_id: rec.outcome for rec in r.list_runs(10)}
    assert listed == {res.run_id: outcome for outcome, res in got.items()}
    unknown = r.get_run(got["outcome_unknown"].run_id)
    assert unknown is not None and unknown.calls[0].request_sent and not unknown.calls[0].response_received
    blocked = r.get_run(got["blocked"].run_id)
    assert blocked is not None and blocked.error_code == "BUDGET_EXCEEDED"
    (refused,) = blocked.calls  # the refused call has its row, nothing sent (issue 21)
    assert (refused.tool_id, refused.outcome) == ("paid", "not_started")
    assert refused.error_code == "BUDGET_EXCEEDED"
    assert not refused.request_sent and refused.cost_micros == 0
    r.close()


def _sent(spec: str) -> bool:
    try:
        r = reader(spec)
    except Exception:
        return False
    try:
        runs = r.list_runs(1)
        record = r.get_run(runs[0].run_id, active=True) if runs else None
        return bool(record and record.calls and record.calls[0].request_sent)
    finally:
        r.close()


def test_sigkill_mid_call_reads_back_as_outcome_unknown(
    journal_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, str(HERE / "rt_durable_child.py"), journal_spec, "run_killed"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not _sent(journal_spec):
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline, "the child never sent its request"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stderr:
            child.stderr.close()
    r = reader(journal_spec)
    record = r.get_run("run_killed")
    r.close()
    assert record is not None and record.interrupted
    assert (record.outcome, record.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    assert record.calls[0].outcome == "outcome_unknown" and record.calls[0].effects == "write"
    assert main(["runs", "--journal", journal_spec]) == 0
    assert "outcome_unknown (interrupted)" in capsys.readouterr().out
    assert main(["runs", "show", "run_killed", "--journal", journal_spec, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["calls"][0]["requestSent"] is True and shown["calls"][0]["responseReceived"] is False


WRITER = """
import sys, anyio
from rt_helpers import Empty, Message, call, scripted
from toolbridge.agent import Agent
from toolbridge.runtime import create_runtime, define_tool

async def ok(inp, ctx):
    return Message(content="ok")

async def main(spec, tag, n):
    rt = create_runtime("durable", permissions={"allow": ["model:scripted", "tool:ok"]}, journal=spec)
    t = define_tool("ok", "1", "", Empty, Message, "none", [], execute=ok)
    async def one(i):
        turns = [{"tool_calls": [{"name": "ok", "arguments": {}}] * 2}, "done"]
        r = await rt.run(Agent(scripted(*turns), tools=[t]), "go", run_id=f"{tag}_{i}")
        assert r.outcome == "succeeded", r
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    rt.close()

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def test_two_processes_write_one_postgresql_journal_at_once(postgres_url: str, tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), postgres_url, tag, "40"], env=env, stderr=subprocess.PIPE
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
    r = reader(postgres_url)
    runs = r.list_runs(1000)
    assert len(runs) == 80 and {x.outcome for x in runs} == {"succeeded"}
    assert {x.pid for x in runs} == {p.pid for p in procs}
    for run_id in ("a_0", "b_39"):
        record = r.get_run(run_id)
        assert record is not None and [c.outcome for c in record.calls] == ["succeeded", "succeeded"]
    r.close()


def test_registered_secrets_are_never_stored(journal_spec: str) -> None:
    from toolbridge.redact import register_secret
    from toolbridge.runtime._journal_postgres import is_postgres_url

    secret = "s3cret-token-in-a-name-91"
    assert register_secret(secret, name="token")
    writer: JournalBackend = (
        PostgresJournal(journal_spec) if is_postgres_url(journal_spec) else Journal(journal_spec)
    )
    writer.start_run("run_s", agent=f"agent {secret}", profile="durable", principal=secret)
    writer.plan_call("run_s", "c1", step=0, tool_id=f"tool_{secret}", tool_version=secret, kind="mcp",
                     effects="none", args_sha256="0" * 64, args_bytes=2)  # fmt: skip
    writer.close()
    record = reader(journal_spec).get_run("run_s")
    assert record is not None
    assert secret not in json.dumps(record.to_dict()) and record.calls[0].tool_id.startswith("tool_")
