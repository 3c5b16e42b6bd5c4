"""Leases and the reaper (`runtime._leases`), on SQLite and PostgreSQL alike.

Runs of a writer on "another host" (which no reader can prove dead) are settled once its lease
has expired, by another journal connection, with the read-back rules; a writer without a lease,
or with a live one, is never touched. `toolbridge runs reap` and `runs --outcome/--status` too.
"""

from __future__ import annotations

import json
import time

import pytest

from toolbridge.cli import main
from toolbridge.runtime import Journal, PostgresJournal
from toolbridge.runtime._journal import JournalBackend, Writer
from toolbridge.runtime._leases import writer_key


def writer(spec: str) -> JournalBackend:
    return PostgresJournal(spec) if spec.startswith("postgresql://") else Journal(spec)


def a_run(j: JournalBackend, run_id: str) -> None:
    """A run left running: calls never sent, sent with effects, sent without effects, ended."""
    j.start_run(run_id, agent="gateway g", profile="durable", principal="alice")
    rows = []
    for n, effects in enumerate(("write", "write", "none", "read")):
        rows.append(
            j.plan_call(
                run_id,
                f"c{n}",
                step=0,
                tool_id=f"t{n}",
                tool_version=None,
                kind="mcp",
                effects=effects,
                args_sha256="0" * 64,
                args_bytes=2,
            )
        )
    j.request_sent(rows[1])
    j.request_sent(rows[2])
    j.request_sent(rows[3])
    j.end_call(rows[3], outcome="succeeded", error_code=None, cost_micros=0)


def test_expired_leases_are_settled_by_another_connection(journal_spec: str) -> None:
    dead, live, old = writer(journal_spec), writer(journal_spec), writer(journal_spec)
    dead.writer = Writer(pid=4_000_001, host="node-a", proc_start="17")
    live.writer = Writer(pid=4_000_002, host="node-b", proc_start="18")
    old.writer = Writer(pid=4_000_003, host="node-c", proc_start=None)  # never held a lease
    now = time.time()
    dead.hold_lease(writer_key(dead.writer), now - 1)
    live.hold_lease(writer_key(live.writer), now + 60)
    for j, run_id in ((dead, "r-dead"), (live, "r-live"), (old, "r-old")):
        a_run(j, run_id)
    reaper = writer(journal_spec)
    try:
        assert reaper.reap_expired(time.time()) == ["r-dead"]
        assert reaper.reap_expired(time.time()) == []  # settled once
        record = reaper.get_run("r-dead")
        assert record is not None and not record.interrupted
        assert (record.outcome, record.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
        assert [(c.outcome, c.error_code) for c in record.calls] == [
            ("not_started", "INTERRUPTED"),
            ("outcome_unknown", "OUTCOME_UNKNOWN"),
            ("failed", "INTERRUPTED"),
            ("succeeded", None),
        ]
        for run_id in ("r-live", "r-old"):  # another host: never claimed dead by a reader
            other = reaper.get_run(run_id)
            assert other is not None and other.outcome == "running"
    finally:
        for j in (dead, live, old, reaper):
            j.close()


def test_runs_reap_and_the_filters(journal_spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    dead = writer(journal_spec)
    dead.writer = Writer(pid=4_000_001, host="node-a", proc_start="17")
    dead.hold_lease(writer_key(dead.writer), time.time() - 1)
    a_run(dead, "r-dead")
    dead.start_run("r-ok", agent="gateway g", profile="durable", principal="alice")
    dead.end_run(
        "r-ok",
        outcome="succeeded",
        error_code=None,
        cost_micros=0,
        input_tokens=0,
        output_tokens=0,
        model_calls=0,
    )
    dead.close()
    assert main(["runs", "--journal", journal_spec, "--status", "running", "--json"]) == 0
    assert [r["runId"] for r in json.loads(capsys.readouterr().out)] == ["r-dead"]
    assert main(["runs", "reap", "--journal", journal_spec, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"settled": ["r-dead"]}
    assert main(["runs", "--journal", journal_spec, "--status", "running", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["runs", "--journal", journal_spec, "--outcome", "outcome_unknown", "--json"]) == 0
    assert [r["runId"] for r in json.loads(capsys.readouterr().out)] == ["r-dead"]
    assert main(["runs", "--journal", journal_spec, "--outcome", "succeeded"]) == 0
    out = capsys.readouterr().out
    assert "r-ok" in out and "r-dead" not in out
    assert main(["runs", "reap", "--journal", journal_spec]) == 0
    assert capsys.readouterr().out.strip() == "settled 0 run(s)"
