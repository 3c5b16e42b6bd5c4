"""A batch's files, attacked: `--out` at devices, links, directories and FIFOs; `--inputs` from FIFOs,
devices and endless pipes; batch ids with control characters. Real files, real FIFOs, the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from batch_helpers import read_out, write_inputs, write_manifest

from toolbridge.batch import run_batch
from toolbridge.batch._inputs import MAX_BAD_LINES, item_digest_id, read_inputs
from toolbridge.errors import ConfigError

CLI = [sys.executable, "-m", "toolbridge.cli", "batch"]


def _cli(
    args: list[str], *, stdin: object = subprocess.DEVNULL, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], stdin=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )  # type: ignore[call-overload, no-any-return]


def _one_line(done: subprocess.CompletedProcess[str], code: str) -> str:
    lines = [x for x in done.stderr.splitlines() if not x.startswith("toolbridge: batch ")]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"toolbridge: {code}:"), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def _leftovers(folder: Path, before: set[str]) -> set[str]:
    return {p.name for p in folder.iterdir()} - before


@pytest.mark.parametrize("target", ["dir", "link-stdout", "link-file", "fifo", "devnull", "devfull"])
def test_out_that_is_not_a_regular_file_is_refused_and_nothing_is_left(tmp_path: Path, target: str) -> None:
    manifest, tally = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 1)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out: Path
    if target == "dir":
        out = tmp_path / "outdir"
        out.mkdir()
    elif target == "link-stdout":
        out = tmp_path / "out.jsonl"
        out.symlink_to("/dev/stdout")
    elif target == "link-file":
        out = tmp_path / "out.jsonl"
        out.symlink_to(victim)
    elif target == "fifo":
        out = tmp_path / "out.fifo"
        os.mkfifo(out)
    else:
        out = Path("/dev/null" if target == "devnull" else "/dev/full")
        if not out.exists():
            pytest.skip(f"{out} is missing here")
    before = {p.name for p in tmp_path.iterdir()}
    mode = os.lstat(out).st_mode
    done = _cli([str(manifest), "--inputs", str(inputs), "--out", str(out), "--no-progress"], timeout=60)
    line = _one_line(done, "ERR_BATCH_OUTPUT")
    assert str(out) in line
    assert os.lstat(out).st_mode == mode  # still what it was: a device stays a device, a link a link
    assert victim.read_text() == "keep me\n"
    assert _leftovers(tmp_path, before) == set()  # no OUT.tmp, no journal beside it
    assert not tally.exists()  # nothing ran


def test_out_in_a_missing_folder_or_equal_to_the_inputs_is_refused(tmp_path: Path) -> None:
    manifest, _ = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 1)
    for out, code in ((tmp_path / "no" / "out.jsonl", "ERR_BATCH_OUTPUT"), (inputs, "ERR_BATCH_OUTPUT")):
        with pytest.raises(ConfigError) as info:
            anyio.run(lambda: run_batch(manifest, inputs=inputs, out=out))  # noqa: B023
        assert info.value.code == code
    assert inputs.read_text().count("\n") == 1 and not (tmp_path / "no").exists()


async def test_a_regular_out_file_is_replaced_atomically_keeping_its_mode(tmp_path: Path) -> None:
    manifest, _ = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 2)
    out = tmp_path / "out.jsonl"
    out.write_text("old content\n")
    out.chmod(0o640)
    summary = await run_batch(manifest, inputs=inputs, out=out, concurrency=2)
    assert summary.succeeded == 2
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(x["id"] for x in read_out(out)) == ["item-0", "item-1"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # noqa: ASYNC240


@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "/dev/urandom", "dir"])
def test_inputs_that_are_not_regular_files_are_refused_at_once(tmp_path: Path, source: str) -> None:
    manifest, tally = write_manifest(tmp_path)
    if source == "fifo":
        path = tmp_path / "in.fifo"
        os.mkfifo(path)  # no writer ever opens it: opening it for reading must not wait
    elif source == "dir":
        path = tmp_path
    else:
        path = Path(source)
    before = {p.name for p in tmp_path.iterdir()}
    done = _cli([str(manifest), "--inputs", str(path), "--out", str(tmp_path / "o.jsonl")], timeout=60)
    line = _one_line(done, "ERR_INVALID_INPUT")
    assert "not a regular file" in line
    assert _leftovers(tmp_path, before) == set() and not tally.exists()


def test_stdin_that_is_a_device_is_refused(tmp_path: Path) -> None:
    manifest, _ = write_manifest(tmp_path)
    with open("/dev/zero", "rb") as zero:
        done = _cli([str(manifest), "--inputs", "-", "--out", str(tmp_path / "o.jsonl")], stdin=zero)
    assert "(standard input) is a device" in _one_line(done, "ERR_INVALID_INPUT")


_PEAK = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
os.close(0)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs the command in a child of a small process and writes the child's peak memory (KiB) to a
file. Measured directly, a child of the test process would start from the test process's own
peak: Linux carries the forking process's high-water mark across fork and exec, and a full test
run's process is over 400 MB by itself."""


def _feed(proc: subprocess.Popen[bytes], chunk: bytes) -> None:
    assert proc.stdin is not None
    try:
        while True:
            proc.stdin.write(chunk)
    except (BrokenPipeError, ValueError, OSError):
        pass


@pytest.mark.parametrize("kind", ["zeros", "random"])
def test_an_endless_pipe_is_refused_with_a_line_number_and_bounded_memory(tmp_path: Path, kind: str) -> None:
    manifest, tally = write_manifest(tmp_path)
    out = tmp_path / "o.jsonl"
    peak = tmp_path / "peak"
    proc = subprocess.Popen(
        [sys.executable, "-c", _PEAK, str(peak), *CLI, str(manifest), "--inputs", "-", "--out", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    chunk = bytes(1 << 16) if kind == "zeros" else os.urandom(1 << 16)
    feeder = threading.Thread(target=_feed, args=(proc, chunk), daemon=True)
    feeder.start()
    try:
        proc.returncode = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    with contextlib.suppress(OSError):
        proc.stdin.close()  # type: ignore[union-attr]  # the reader is gone
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    line = _one_line(done, "ERR_INVALID_INPUT")
    if kind == "zeros":
        assert "line 1: no end of line within" in line
    else:
        assert f"more than {MAX_BAD_LINES} lines cannot run" in line
    assert int(peak.read_text()) < 400 * 1024  # KiB: bounded (the unbounded reader grew to 1 GB)
    assert not out.exists() and not tally.exists()


def test_too_many_lines_are_refused_naming_the_line(tmp_path: Path) -> None:
    path = write_inputs(tmp_path / "in.jsonl", 5)
    with pytest.raises(ConfigError, match="line 4: more than 3 lines") as info:
        read_inputs(path, max_lines=3)
    assert info.value.code == "ERR_INVALID_INPUT"
    items, errors = read_inputs(path, max_lines=5)
    assert len(items) == 5 and not errors


def test_bare_string_ids_are_digests_stable_when_the_file_is_edited(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('"first"\n{"input": "second"}\n{"id": 9, "input": "third"}\n')
    before = {it.input: it.id for it in read_inputs(path)[0]}
    path.write_text('\n"a new one"\n\n{"id": 9, "input": "third"}\n"second"\n"first"\n')
    after = {it.input: it.id for it in read_inputs(path)[0]}
    for text in ("first", "second", "third"):
        assert after[text] == before[text]  # wherever the line moved
    assert before["first"] == item_digest_id("first") and before["first"].startswith("sha256-")
    assert before["second"] == item_digest_id("second") and after["a new one"] not in before.values()
    path.write_text('"same"\n"same"\n')
    items, errors = read_inputs(path)
    assert len(items) == 1 and [e.code for e in errors] == ["ERR_BATCH_DUPLICATE_ID"]


@pytest.mark.parametrize("bad", ["a\n", "a\nb", "x\x1b[2J", "a" * 65, ".a", "é", ""])
def test_batch_ids_with_control_characters_or_too_long_are_refused(tmp_path: Path, bad: str) -> None:
    manifest, _ = write_manifest(tmp_path)
    inputs = write_inputs(tmp_path / "in.jsonl", 1)
    done = _cli([str(manifest), "--inputs", str(inputs), "--out", str(tmp_path / "o"), "--batch-id", bad])
    assert "--batch-id: 1 to 64 ASCII letters" in _one_line(done, "ERR_BATCH_CONFIG")
    done = _cli(["status", bad, "--journal", str(tmp_path / "j.sqlite")])
    assert "--batch-id" in _one_line(done, "ERR_BATCH_CONFIG")
    assert not (tmp_path / "o").exists() and not (tmp_path / "j.sqlite").exists()
    json.dumps(bad)
