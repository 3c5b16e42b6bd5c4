"""Leases for batch items (`runtime._leases`, `batch._driver.reconcile`), on SQLite and PostgreSQL.

A claimed item's run is covered by its writer's lease in the journal: a real driver SIGKILLed
mid-batch leaves its runs `running` under a lease that nobody may settle while it is live; once
it expired, `toolbridge runs reap` settles them with the read-back rules (a call whose request was
sent with effects `outcome_unknown`, one never sent `not_started`), and the resume runs again only
the items that never sent a request with effects. A run of a writer on another machine is left in
doubt while that writer's lease lives, and decided by the journal once it expired.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from batch_helpers import (
    check_no_effect_twice,
    kill_when_started,
    read_out,
    slow_sends,
    tally_count,
    write_inputs,
    write_manifest,
)

from toolbridge.batch import batch_status, run_batch
from toolbridge.batch._driver import open_journal
from toolbridge.batch._store import Item, Lease, open_store
from toolbridge.cli import main
from toolbridge.runtime._journal import Writer
from toolbridge.runtime._leases import writer_key

LEASE_S = 6
"""The killed driver's lease (renewed every 2 s): long enough that reading it right after the kill
finds it live on a loaded machine, short enough to wait out."""


def _running(spec: str) -> set[str]:
    journal = open_journal(spec, reader=True)
    try:
        # stored as running (read back as interrupted here, where the writer is proven dead)
        return {r.run_id for r in journal.list_runs(1000) if r.outcome == "running" or r.interrupted}
    finally:
        journal.close()


@pytest.mark.timeout(300)
def test_a_sigkilled_driver_s_runs_are_settled_by_their_lease_and_resumed(
    tmp_path: Path, journal_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=3.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 5)
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "toolbridge.cli", "batch", str(manifest), "--inputs", str(inputs)]
    cmd += ["--out", str(out), "--journal", journal_spec, "--concurrency", "3", "--no-progress"]
    cmd += ["--batch-id", "k", "--new"]
    env = {**os.environ, "TOOLBRIDGE_LEASE_S": str(LEASE_S)}
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    kill_when_started(child, tally, 2)  # two effectful requests sent, the driver SIGKILLed
    running = _running(journal_spec)
    assert len(running) >= 2
    journal = open_journal(journal_spec)
    store = open_store(journal)
    try:
        # its lease is live: no reaper may settle its runs yet (from this host or any other)
        assert journal.reap_expired(time.time()) == []
        leases = {store.run_writer(r).lease_until for r in running}  # type: ignore[union-attr]
        (until,) = leases  # one writer: the driver's process
        assert until is not None and until > time.time()
        while time.time() <= until:
            time.sleep(0.2)
    finally:
        store.close()
        journal.close()
    sent = slow_sends(journal_spec)  # per item: the effectful requests the journal says left
    assert main(["runs", "reap", "--journal", journal_spec, "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["settled"]) == running
    assert _running(journal_spec) == set()
    journal = open_journal(journal_spec, reader=True)
    try:
        for run_id in running:
            record = journal.get_run(run_id)
            assert record is not None and not record.interrupted  # settled in the journal itself
            for call in record.calls:
                if not call.request_sent:
                    assert (call.outcome, call.error_code) == ("not_started", "INTERRUPTED")
                elif call.effects != "none" and call.error_code in ("OUTCOME_UNKNOWN", "INTERRUPTED"):
                    assert call.outcome == "outcome_unknown"
            acted = any(c.request_sent and c.effects != "none" for c in record.calls)
            assert record.outcome == ("outcome_unknown" if acted else "failed")
    finally:
        journal.close()
    status = batch_status("k", journal=journal_spec)
    assert (status.in_doubt, status.interrupted) == (0, len(running))
    write_manifest(tmp_path, slow_s=0.05)
    common = {"inputs": inputs, "out": out, "batch_id": "k", "journal": journal_spec}
    resumed = anyio.run(lambda: run_batch(manifest, **common))  # type: ignore[arg-type]
    acted = sum(1 for n in sent.values() if n)
    assert (resumed.unknown, resumed.succeeded, resumed.in_doubt) == (acted, 5 - acted, 0)
    assert resumed.ran == 5 - acted  # only the items that never sent an effectful request ran again
    check_no_effect_twice(read_out(out), journal_spec, tally, 5)


def test_a_run_on_another_machine_waits_for_its_lease_then_runs_again_if_never_sent(
    tmp_path: Path, journal_spec: str
) -> None:
    manifest, tally = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 2)
    out = tmp_path / "out.jsonl"
    journal = open_journal(journal_spec)
    store = open_store(journal)
    items = [
        Item(json.dumps(f"item-{i}"), f"item-{i}", i + 1, f"question {i}",
             hashlib.sha256(f"question {i}".encode()).hexdigest())
        for i in range(2)
    ]  # fmt: skip
    store.add_items("far", items)
    # a driver on another machine claimed item-0 and stopped renewing the batch's lease; the
    # worker running item-0 (another process there) planned an effectful call, never sent
    assert store.create_batch("far", "0" * 64, Lease("t", "node-b", 4242, None), -1.0)
    assert store.claim("far", items[0].key, "far-run-0", 1, 0) == "claimed"
    journal.writer = Writer(pid=4243, host="node-b", proc_start="9")
    key = writer_key(journal.writer)
    journal.hold_lease(key, time.time() + 600)
    journal.start_run("far-run-0", agent=None, profile="durable")
    journal.plan_call(
        "far-run-0", "c1", step=0, tool_id="ops.tally", tool_version="1", kind="mcp",
        effects="write", args_sha256="0" * 64, args_bytes=2,
    )  # fmt: skip
    journal.writer = Writer.current()
    common = {"manifest": manifest, "inputs": inputs, "out": out, "journal": journal_spec}
    try:
        first = anyio.run(lambda: run_batch(batch_id="far", **common))  # type: ignore[arg-type]
        # node-b's worker lease is live: its run may still be running there; never run twice
        assert (first.in_doubt, first.succeeded, tally_count(tally)) == (1, 1, 1)
        record = journal.get_run("far-run-0")
        assert record is not None and record.outcome == "running"
        journal.hold_lease(key, time.time() - 1)  # node-b is gone: its lease expires
        second = anyio.run(lambda: run_batch(batch_id="far", **common))  # type: ignore[arg-type]
        assert (second.in_doubt, second.succeeded, second.ran, tally_count(tally)) == (0, 2, 1, 2)
        record = journal.get_run("far-run-0")
        assert record is not None and (record.outcome, record.error_code) == ("failed", "INTERRUPTED")
        assert [(c.outcome, c.request_sent) for c in record.calls] == [("not_started", False)]
        (line,) = [x for x in read_out(out) if x["id"] == "item-0"]
        assert line["outcome"] == "succeeded" and line["runId"].endswith("-2")  # its second attempt
    finally:
        store.close()
        journal.close()
