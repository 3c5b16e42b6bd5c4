"""The durable journal: a process killed mid-call leaves evidence read back as outcome_unknown."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rt_helpers import call, scripted

from toolbridge.agent import Agent
from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.runtime import create_runtime

HERE = Path(__file__).resolve().parent


def _request_sent(journal: Path) -> bool:
    if not journal.exists():
        return False
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
            row = db.execute("SELECT request_sent FROM calls").fetchone()
    except sqlite3.Error:
        return False
    return bool(row and row[0])


def test_sigkill_mid_call_reads_back_as_outcome_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "runs.sqlite"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, str(HERE / "rt_durable_child.py"), str(journal), "run_killed"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not _request_sent(journal):
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
    assert child.returncode == -signal.SIGKILL

    runtime = create_runtime("durable", journal=journal)
    record = runtime.inspect("run_killed")
    assert record.interrupted
    assert (record.outcome, record.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = record.calls
    assert evidence.request_sent is True and evidence.response_received is False
    assert evidence.outcome == "outcome_unknown"
    assert (evidence.tool_id, evidence.tool_version, evidence.effects) == ("ops.slow", "3", "write")
    assert len(evidence.args_sha256) == 64 and evidence.sent_at is not None
    runtime.close()

    assert main(["runs", "--journal", str(journal)]) == 0
    listing = capsys.readouterr().out
    assert "run_killed" in listing and "outcome_unknown (interrupted)" in listing
    assert main(["runs", "show", "run_killed", "--journal", str(journal)]) == 0
    shown = capsys.readouterr().out
    assert "ops.slow" in shown and "outcome_unknown" in shown and "check it" in shown
    assert main(["runs", "show", "run_killed", "--journal", str(journal), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["calls"][0]["requestSent"] is True and data["calls"][0]["responseReceived"] is False


async def test_durable_runs_are_listed_and_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "runs.sqlite"
    runtime = create_runtime("durable", permissions={"allow": ["model:scripted"]}, journal=journal)
    ok = await runtime.run(Agent(scripted("fine")), "q")
    denied = await runtime.run(Agent(scripted(call("x"))), "q")
    runtime.close()
    assert main(["runs", "--journal", str(journal), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["runId"]: r["outcome"] for r in listed} == {ok.run_id: "succeeded", denied.run_id: "failed"}
    assert main(["runs", "show", "run_nope", "--journal", str(journal)]) == 1
    assert "no run" in capsys.readouterr().err
    assert main(["runs", "--journal", str(tmp_path / "missing.sqlite")]) == 1


def test_profile_and_journal_configuration(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="durable profile needs"):
        create_runtime("durable")
    with pytest.raises(ConfigError, match="ephemeral"):
        create_runtime("ephemeral", journal=tmp_path / "j.sqlite")
    with pytest.raises(ConfigError, match="profile"):
        create_runtime("sqlite")
    with pytest.raises(ConfigError, match="no run"):
        create_runtime().inspect("run_missing")
