"""Resume that cannot duplicate: unknown ids refused, a second batch over the same inputs refused,
digest ids across edits, the lease (a live one elsewhere holds the batch; a dead or stopped driver
does not), Ctrl-C / SIGTERM printing the resume command. Real SQLite and PostgreSQL journals, the
real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from batch_helpers import (
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
from toolbridge.errors import ConfigError
from toolbridge.runtime._journal import Writer


def _setup(tmp_path: Path, journal_spec: str, n: int) -> tuple[Path, dict[str, object]]:
    """A manifest, `n` inputs, and the arguments every `run_batch` of a test shares; the tally."""
    manifest, tally = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", n)
    out = tmp_path / "out.jsonl"
    return tally, {"manifest": manifest, "inputs": inputs, "out": out, "journal": journal_spec}


def _refused(code: str, **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        anyio.run(lambda: run_batch(**kwargs))  # type: ignore[arg-type]
    assert info.value.code == code, info.value
    return info.value


def test_an_unknown_id_is_refused_and_a_new_batch_is_its_own_action(
    tmp_path: Path, journal_spec: str
) -> None:
    tally, common = _setup(tmp_path, journal_spec, 3)
    out = tmp_path / "out.jsonl"
    error = _refused("ERR_BATCH_UNKNOWN", batch_id="typo", **common)
    assert "--new starts a new batch" in str(error)
    assert not out.exists() and tally_count(tally) == 0
    if not journal_spec.startswith("postgresql"):
        assert not Path(journal_spec).exists()  # a refused resume creates no journal
    first = anyio.run(lambda: run_batch(batch_id="real", new=True, **common))  # type: ignore[arg-type]
    assert first.succeeded == 3 and tally_count(tally) == 3
    _refused("ERR_BATCH_UNKNOWN", batch_id="reel", **common)  # a typo of a known one
    _refused("ERR_BATCH_EXISTS", batch_id="real", new=True, **common)  # --new never resumes
    # a second batch over the same inputs, without an id: refused, naming the batch to resume
    error = _refused("ERR_BATCH_EXISTS", **common)
    assert "resume it with --batch-id real" in str(error) and "--rerun" in str(error)
    assert tally_count(tally) == 3  # nothing ran twice
    again = anyio.run(lambda: run_batch(rerun=True, **common))  # type: ignore[arg-type]
    assert again.ran == 3 and again.batch_id != "real" and tally_count(tally) == 6  # asked for: runs


def test_resume_after_editing_the_file_runs_nothing_twice(tmp_path: Path, journal_spec: str) -> None:
    manifest, tally = write_manifest(tmp_path)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"alpha"\n"beta"\n{"id": "c", "input": "gamma"}\n')
    out = tmp_path / "out.jsonl"
    common = {"manifest": manifest, "inputs": inputs, "out": out, "journal": journal_spec}
    first = anyio.run(lambda: run_batch(batch_id="ed", new=True, **common))  # type: ignore[arg-type]
    assert first.succeeded == 3
    # an empty line on top, the lines reordered, one new line: only the new one runs
    inputs.write_text('\n{"id": "c", "input": "gamma"}\n"new one"\n"beta"\n"alpha"\n')
    second = anyio.run(lambda: run_batch(batch_id="ed", **common))  # type: ignore[arg-type]
    assert (second.ran, second.succeeded, tally_count(tally)) == (1, 4, 4)
    assert len(read_out(out)) == 4 and len({x["id"] for x in read_out(out)}) == 4


def test_a_live_lease_elsewhere_holds_the_batch_and_an_expired_one_does_not(
    tmp_path: Path, journal_spec: str
) -> None:
    tally, common = _setup(tmp_path, journal_spec, 3)
    journal = open_journal(journal_spec)
    store = open_store(journal)
    items = [Item(key=json.dumps(f"item-{i}"), id=f"item-{i}", line=i + 1, input=f"question {i}",
                  sha256=__import__("hashlib").sha256(f"question {i}".encode()).hexdigest())
             for i in range(3)]  # fmt: skip
    store.add_items("held", items)
    remote = Lease("remote-token", "another-machine", 4242, None)
    assert store.create_batch("held", "0" * 64, remote, 100.0)
    # the remote driver claimed item-0 and its run sent nothing yet, from another machine
    journal.writer = Writer(pid=4242, host="another-machine", proc_start=None)
    assert store.claim("held", items[0].key, "held-run-0", 1, 0) == "claimed"
    journal.start_run("held-run-0", agent=None, profile="durable")
    journal.writer = Writer.current()
    status = batch_status("held", journal=journal_spec)
    assert (status.in_doubt, status.interrupted) == (1, 0)  # its driver may really still be running
    error = _refused("ERR_BATCH_BUSY", batch_id="held", **common)
    assert "another-machine" in str(error) and tally_count(tally) == 0
    # the lease expires (no heartbeat): the batch is free, the remote run is read back and run again
    store._exec(
        store._q("UPDATE {batches} SET lease_until = ? WHERE batch_id = ?"), (time.time() - 1, "held")
    )
    status = batch_status("held", journal=journal_spec)
    assert (status.in_doubt, status.interrupted) == (0, 1)
    resumed = anyio.run(lambda: run_batch(batch_id="held", **common))  # type: ignore[arg-type]
    assert (resumed.succeeded, resumed.in_doubt, tally_count(tally)) == (3, 0, 3)
    row = store.batch("held")
    assert row is not None and row.owner is None  # released at the end
    store.close()
    journal.close()


def test_a_driver_that_lost_its_lease_claims_nothing(journal_spec: str) -> None:
    journal = open_journal(journal_spec)
    first, second = open_store(journal), open_store(journal)
    items = [Item(key=json.dumps(i), id=i, line=i + 1, input="x", sha256="0" * 64) for i in range(2)]
    first.add_items("fence", items)
    assert first.create_batch("fence", "1" * 64, Lease.mine(), 30.0)
    assert first.claim("fence", items[0].key, "r0", 1, 0) == "claimed"
    first._exec(first._q("UPDATE {batches} SET lease_until = 0 WHERE batch_id = ?"), ("fence",))
    assert second.acquire("fence", Lease.mine(), 30.0) is None  # lapsed: taken over
    assert second.prior is not None and second.prior.lapsed(time.time())
    assert first.claim("fence", items[1].key, "r1", 1, 0) == "taken"  # fenced by the lease
    assert not first.renew("fence", 30.0)
    assert second.claim("fence", items[1].key, "r1b", 1, 0) == "claimed"
    first.close()
    second.close()
    journal.close()


def _cli_cmd(manifest: Path, inputs: Path, out: Path, journal: str, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "toolbridge.cli", "batch", str(manifest), "--inputs", str(inputs)]
    return [*cmd, "--out", str(out), "--journal", journal, "--concurrency", "2", "--no-progress", *extra]


def _wait_for(tally: Path, n: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while tally_count(tally) < n:
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_batch_prints_the_resume_command_and_is_not_in_doubt(
    tmp_path: Path, signum: int
) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=2.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 6)
    out = tmp_path / "out.jsonl"
    journal = str(tmp_path / "j.sqlite")
    child = subprocess.Popen(
        _cli_cmd(manifest, inputs, out, journal), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for(tally, 2, child)  # two slow calls in flight
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert child.returncode == 128 + signum, err
    text = err.decode()
    assert "Traceback" not in text
    (line,) = [x for x in text.splitlines() if "interrupted" in x]
    name = "SIGINT" if signum == signal.SIGINT else "SIGTERM"
    head, _, command = line.partition("; resume it with: ")
    assert head.startswith("toolbridge: batch b") and head.endswith(f"interrupted ({name})")
    argv = shlex.split(command)
    assert argv[:2] == ["toolbridge", "batch"] and "--batch-id" in argv and "--new" not in argv
    batch_id = argv[argv.index("--batch-id") + 1]
    status = batch_status(batch_id, journal=journal)
    assert (status.in_doubt, status.interrupted) == (0, 0)  # stopped cleanly: nothing in doubt
    # the printed command, as printed, resumes the batch
    write_manifest(tmp_path, slow_s=0.05)
    cli = [sys.executable, "-m", "toolbridge.cli", *argv[1:]]
    done = subprocess.run(cli, capture_output=True, timeout=240, check=False)
    assert done.returncode in (0, 1), done.stderr.decode()
    lines = read_out(out)
    assert sorted(x["id"] for x in lines) == [f"item-{i}" for i in range(6)]  # one line each
    assert max(slow_sends(journal).values()) == 1  # no item's effectful call left twice
    assert {x["outcome"] for x in lines} <= {"succeeded", "cancelled", "outcome_unknown"}


@pytest.mark.timeout(300)
def test_a_killed_driver_on_this_machine_is_not_in_doubt_and_resumes_at_once(tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=2.0)
    inputs = write_inputs(tmp_path / "in.jsonl", 4)
    out = tmp_path / "out.jsonl"
    journal = str(tmp_path / "j.sqlite")
    cmd = _cli_cmd(manifest, inputs, out, journal, "--batch-id", "kill", "--new")
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_when_started(child, tally, 2)
    status = batch_status("kill", journal=journal)
    assert status.in_doubt == 0 and status.interrupted == 2  # its lease is dead with it
    write_manifest(tmp_path, slow_s=0.05)
    resumed = anyio.run(lambda: run_batch(manifest, inputs=inputs, out=out, batch_id="kill", journal=journal))
    assert resumed.in_doubt == 0 and resumed.unknown == 2 and resumed.succeeded == 2
    assert max(slow_sends(journal).values()) == 1 and os.path.getsize(out) > 0


@pytest.mark.timeout(300)
async def test_a_running_driver_whose_lease_is_taken_stops(tmp_path: Path) -> None:
    manifest, tally = write_manifest(tmp_path, slow_s=0.5)
    inputs = write_inputs(tmp_path / "in.jsonl", 8)
    out = tmp_path / "out.jsonl"
    journal_spec = str(tmp_path / "j.sqlite")
    errors: list[ConfigError] = []

    async def driver() -> None:
        try:
            await run_batch(
                manifest, inputs=inputs, out=out, journal=journal_spec, batch_id="steal", new=True,
                concurrency=1, lease_s=1.5,
            )  # fmt: skip
        except ConfigError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(driver)
        with anyio.fail_after(120):
            while tally_count(tally) < 1:  # noqa: ASYNC110 - polling a file
                await anyio.sleep(0.02)
        journal = open_journal(journal_spec)
        store = open_store(journal)
        # another driver took the batch (as after a lapse): the running one must notice and stop
        steal = "UPDATE {batches} SET owner = 'thief', lease_until = ? WHERE batch_id = 'steal'"
        store._exec(store._q(steal), (time.time() + 600,))
        store.close()
        journal.close()
    (error,) = errors
    assert error.code == "ERR_BATCH_BUSY" and "another driver took" in str(error)
    assert tally_count(tally) < 8  # it stopped claiming
    assert max(slow_sends(journal_spec).values()) == 1
