"""Local batches against a real stdio MCP server: outputs, hostile inputs, budgets, resuming after a kill."""

from __future__ import annotations

import json
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
    tally_count,
    write_inputs,
    write_manifest,
)

from toolbridge.batch import batch_status, run_batch
from toolbridge.batch._driver import open_journal, reconcile
from toolbridge.batch._inputs import item_digest_id
from toolbridge.batch._store import Item, open_store
from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.runtime._journal import Writer


async def test_every_item_runs_once_and_has_one_output_line(tmp_path: Path, journal_spec: str) -> None:
    manifest, tally = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 6)
    out = tmp_path / "out.jsonl"
    summary = await run_batch(
        manifest, inputs=inputs, out=out, concurrency=3, batch_id="b1", new=True, journal=journal_spec
    )
    assert (summary.items, summary.succeeded, summary.failed, summary.unknown, summary.ran) == (6, 6, 0, 0, 6)
    lines = read_out(out)
    assert sorted(x["id"] for x in lines) == [f"item-{i}" for i in range(6)]
    for x in lines:
        assert (x["outcome"], x["text"], x["errorCode"]) == ("succeeded", "done", None)
        assert x["usage"] == {"inputTokens": 0, "outputTokens": 0, "modelCalls": 3}  # camelCase too
        assert x["runId"].startswith("b1-")
        assert set(x) >= {
            "id",
            "line",
            "outcome",
            "text",
            "output",
            "errorCode",
            "usage",
            "costMicros",
            "runId",
        }
    assert tally_count(tally) == 6  # the remote side acted once per item
    reader = open_journal(journal_spec, reader=True)
    record = reader.get_run(lines[0]["runId"])
    reader.close()
    assert record is not None and [c.tool_id for c in record.calls] == ["t_echo", "t_echo", "ops.tally"]
    # the same batch again: nothing runs, the output is the same
    again = await run_batch(manifest, inputs=inputs, out=out, batch_id="b1", journal=journal_spec)
    assert again.ran == 0 and again.succeeded == 6 and tally_count(tally) == 6
    assert sorted(map(json.dumps, read_out(out))) == sorted(map(json.dumps, lines))


HOSTILE = [
    b'{"id": "a", "input": "fine"}',
    b"not json at all",
    b'"a bare string"',
    b'{"id": "a", "input": "the same id again"}',
    b'{"id": "bad\xff\xfe", "input": "x"}',
    b'{"id": true, "input": "x"}',
    b'{"id": "n", "input": 3}',
    b"[" * 100_000,
    b'{"id": "huge", "input": "' + b"y" * 300_000 + b'"}',
    b"",
    b'{"id": 7, "input": "an integer id"}',
]


async def test_hostile_input_lines_each_give_one_error_line(tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path)
    inputs = tmp_path / "in.jsonl"
    inputs.write_bytes(b"\n".join(HOSTILE) + b"\n")
    out = tmp_path / "out.jsonl"
    summary = await run_batch(manifest, inputs=inputs, out=out, max_line_bytes=200_000)
    lines = {x["line"]: x for x in read_out(out)}
    assert summary.items == 3 and summary.succeeded == 3 and tally_count(tally) == 3
    assert {n for n, x in lines.items() if x["outcome"] == "succeeded"} == {1, 3, 11}
    assert lines[3]["id"] == item_digest_id("a bare string") and lines[11]["id"] == 7
    assert lines[2]["id"] is None  # an error line without a declared id has none (never a line number)
    codes = {n: x["errorCode"] for n, x in lines.items() if x["outcome"] != "succeeded"}
    assert codes == {
        2: "ERR_BATCH_INPUT",
        4: "ERR_BATCH_DUPLICATE_ID",
        5: "ERR_BATCH_INPUT",
        6: "ERR_BATCH_INPUT",
        7: "ERR_BATCH_INPUT",
        8: "ERR_BATCH_INPUT",
        9: "ERR_BATCH_INPUT",
    }
    assert "longer than 200000 bytes" in lines[9]["error"] and "y" * 50 not in json.dumps(lines[9])
    assert summary.input_errors == 7


async def test_a_batch_budget_is_never_overspent_and_a_resume_with_more_runs_the_rest(tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path, cost=10)
    inputs = write_inputs(tmp_path / "in.jsonl", 6)
    out = tmp_path / "out.jsonl"
    journal = str(tmp_path / "j.sqlite")
    first = await run_batch(
        manifest, inputs=inputs, out=out, batch_id="bb", new=True, journal=journal, budget_micros=35
    )
    assert (first.succeeded, first.skipped, first.cost_micros) == (3, 3, 30)
    skipped = [x for x in read_out(out) if x["outcome"] == "blocked"]
    assert len(skipped) == 3 and {x["errorCode"] for x in skipped} == {"BATCH_BUDGET_EXCEEDED"}
    assert tally_count(tally) == 3
    second = await run_batch(
        manifest, inputs=inputs, out=out, batch_id="bb", journal=journal, budget_micros=100
    )
    assert (second.ran, second.succeeded, second.skipped, second.cost_micros) == (3, 6, 0, 60)
    assert tally_count(tally) == 6
    lines = read_out(out)
    assert len(lines) == 6 and {x["outcome"] for x in lines} == {"succeeded"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_driver_killed_and_the_batch_resumed(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = (
        str(tmp_path / "j.sqlite") if backend == "sqlite" else str(request.getfixturevalue("postgres_url"))
    )
    manifest, tally = write_manifest(tmp_path, slow_s=1.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 8)
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "toolbridge.cli", "batch", str(manifest), "--inputs", str(inputs)]
    cmd += [
        "--out",
        str(out),
        "--batch-id",
        "bk",
        "--new",
        "--journal",
        journal,
        "--concurrency",
        "2",
        "--json",
    ]
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_when_started(child, tally, 4)  # two rounds of two: some ended, two in flight
    assert main(["batch", str(manifest), "--inputs", str(inputs), "--out", str(out), "--batch-id", "bk",
                 "--journal", journal, "--json"]) == 1  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    lines = read_out(out)
    check_no_effect_twice(lines, journal, tally, 8)  # nothing lost, nothing twice
    unknown = [x for x in lines if x["outcome"] == "outcome_unknown"]
    assert len(unknown) >= 1 and summary["unknown"] == len(unknown)
    assert summary["ran"] >= 1  # items whose runs never sent the effectful call ran again
    assert {x["id"] for x in summary["unknownItems"]} == {x["id"] for x in unknown}
    assert main(["batch", "status", "bk", "--journal", journal]) == 0
    shown = capsys.readouterr().out
    assert "outcome_unknown" in shown and all(x["id"] in shown for x in unknown)
    status = batch_status("bk", journal=journal)
    assert status.unknown == len(unknown) and status.succeeded == summary["succeeded"]


async def test_runs_that_never_sent_a_request_are_run_again(tmp_path: Path, journal_spec: str) -> None:
    journal = open_journal(journal_spec)
    store = open_store(journal)
    items = [
        Item(key=json.dumps(f"k{i}"), id=f"k{i}", line=i + 1, input="x", sha256="0" * 64) for i in range(4)
    ]
    store.add_items("br", items)
    dead = Writer(pid=2**22 + 12345, host=journal.writer.host, proc_start=None)
    journal.writer = dead  # as if written by a process that died since
    for i, effects in enumerate(["none", "write", "write"]):
        assert store.claim("br", items[i].key, f"run-{i}", 1, 0) == "claimed"
        journal.start_run(f"run-{i}", agent=None, profile="durable")
        row = journal.plan_call(f"run-{i}", "c", step=0, tool_id="t", tool_version="1", kind="mcp",
                                effects=effects, args_sha256="0" * 64, args_bytes=2)  # fmt: skip
        if i == 2:
            journal.request_sent(row)
    journal.writer = Writer.current()  # the fourth run's writer is alive (this process)
    assert store.claim("br", items[3].key, "run-3", 1, 0) == "claimed"
    journal.start_run("run-3", agent=None, profile="durable")
    states = [reconcile(store, journal, "br", s, writer_dead=False) for s in store.items("br", "claimed")]
    assert states == ["pending", "pending", "unknown", "claimed"]  # never taken from a live writer
    stored = {s.key: s for s in store.items("br")}
    assert (
        stored[items[2].key].result is not None
        and stored[items[2].key].result["outcome"] == "outcome_unknown"
    )
    status = batch_status("br", journal=journal_spec)
    assert (status.unknown, status.in_doubt) == (1, 1)
    assert [x["id"] for x in status.in_doubt_items] == ["k3"] and status.unknown_items[0]["id"] == "k2"
    store.close()
    journal.close()


def test_bad_options_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest, _ = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 1)
    for kwargs, code in (
        ({"batch_id": "../../etc"}, "ERR_BATCH_CONFIG"),
        ({"concurrency": 0}, "ERR_BATCH_CONFIG"),
        ({"budget_micros": -1}, "ERR_BATCH_CONFIG"),
        ({"server_limits": {"Server": 0}}, "ERR_BATCH_CONFIG"),
        ({"server_limits": {"Nope": 1}}, "ERR_BATCH_CONFIG"),
        ({"inputs": tmp_path / "missing.jsonl"}, "ERR_INVALID_INPUT"),
    ):
        args = {"inputs": inputs, "out": tmp_path / "o.jsonl", **kwargs}
        with pytest.raises(ConfigError) as info:
            anyio.run(lambda: run_batch(manifest, **args))  # type: ignore[arg-type]  # noqa: B023
        assert info.value.code == code, kwargs
    plain = tmp_path / "plain.yaml"
    plain.write_text(manifest.read_text().split("\n---\n", 1)[1])  # no Runtime document
    with pytest.raises(ConfigError, match="Runtime document"):
        anyio.run(lambda: run_batch(plain, inputs=inputs, out=tmp_path / "o.jsonl"))
    assert main(["batch", str(manifest)]) == 1
    assert main(["batch", "status", "nope", "--journal", str(tmp_path / "none.sqlite")]) == 1
    assert main(["batch", str(manifest), "--inputs", str(inputs), "--out", "o", "--server-limit", "x"]) == 1
    err = capsys.readouterr().err
    assert err.count("toolbridge:") == 3 and "Traceback" not in err


async def test_a_server_limit_caps_calls_in_flight(tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=0.3)
    inputs = write_inputs(tmp_path / "in.jsonl", 4)
    out = tmp_path / "out.jsonl"
    began = time.monotonic()
    summary = await run_batch(manifest, inputs=inputs, out=out, concurrency=4, server_limits={"Server": 1})
    took = time.monotonic() - began
    assert summary.succeeded == 4 and tally_count(tally) == 4
    assert took >= 4 * 0.3  # the four slow calls ran one at a time
    assert Path(str(out) + ".journal.sqlite").stat().st_size > 0  # noqa: ASYNC240


async def test_a_worker_failing_unexpectedly_leaves_its_item_for_the_next_resume(tmp_path: Path) -> None:
    from toolbridge.batch._driver import BatchSummary, _dispatch, _fill, _Out, _Progress

    journal = open_journal(str(tmp_path / "j.sqlite"))
    store = open_store(journal)
    items = [
        Item(key=json.dumps(f"k{i}"), id=f"k{i}", line=i + 1, input="x", sha256="0" * 64) for i in range(2)
    ]
    store.add_items("bx", items)
    out = _Out(tmp_path / "out.jsonl", [])

    async def runner(item: Item, run_id: str) -> dict[str, object]:
        if item.id == "k1":
            raise RuntimeError("a bug in a worker")
        return {"id": item.id, "line": item.line, "outcome": "succeeded", "costMicros": 0, "runId": run_id}

    ran = await _dispatch(
        [(it, 0) for it in items],
        runner,
        store,
        journal,
        "bx",
        out,
        _Progress(2, False),
        workers=2,
        ceiling=0,
    )
    out.close()
    summary = BatchSummary(batch_id="bx")
    _fill(summary, store, "bx", 2, 0)
    assert (ran, summary.succeeded, summary.pending, summary.in_doubt) == (2, 1, 1, 0)
    assert [x["id"] for x in read_out(tmp_path / "out.jsonl")] == ["k0"]
    store.close()
    journal.close()
