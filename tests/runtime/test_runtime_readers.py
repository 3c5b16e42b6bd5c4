"""Readers of a journal never write: read-only SQLite, no migration, no WAL switch, no new journal."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolbridge.errors import ConfigError
from toolbridge.runtime import Journal, create_runtime

SETPRIV = shutil.which("setpriv")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runs(*args: str, user: int | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolbridge.cli", "runs", *args]
    if user is not None:
        assert SETPRIV, "setpriv (util-linux) is needed to read as an unprivileged user"
        command = [SETPRIV, f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/")


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def _journal_with_a_run(path: Path) -> None:
    journal = Journal(path, durable=True)
    journal.start_run("run_1", agent="agent", profile="durable")
    row = journal.plan_call(
        "run_1", "c1", step=0, tool_id="t", tool_version="1", kind="declared", effects="none",
        args_sha256="0" * 64, args_bytes=2,
    )  # fmt: skip
    journal.request_sent(row)
    journal.end_call(row, outcome="succeeded", error_code=None, cost_micros=0)
    journal.end_run(
        "run_1", outcome="succeeded", error_code=None, cost_micros=0, input_tokens=1, output_tokens=2,
        model_calls=1,
    )  # fmt: skip
    journal.close()


def test_an_empty_file_is_not_turned_into_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    done = _runs("--journal", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "is not a toolbridge journal: the file is empty" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert path.stat().st_size == 0 and _siblings(path) == ["empty.sqlite"]


def test_another_applications_database_is_left_exactly_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.execute("INSERT INTO notes (body) VALUES ('keep me')")
    db.close()
    before = _digest(path)
    for args in (["--journal", str(path)], ["show", "run_1", "--journal", str(path)]):
        done = _runs(*args)
        assert done.returncode == 1 and "holds tables of another application" in done.stderr
    with pytest.raises(ConfigError, match="not a toolbridge journal"):
        create_runtime("durable", journal=path)  # the writer refuses it too
    with pytest.raises(ConfigError, match="not a toolbridge journal"):
        Journal.open_existing(path)
    assert _digest(path) == before and _siblings(path) == ["app.db"]
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["notes"]
    db.close()


@pytest.mark.parametrize("content", [b"not a database at all\n", b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_a_journal_gives_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(content)
    done = _runs("--journal", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "junk.sqlite" in done.stderr
    assert path.read_bytes() == content


def test_a_missing_journal_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.sqlite"
    done = _runs("--journal", str(path))
    assert done.returncode == 1 and "does not exist" in done.stderr
    assert not path.exists() and _siblings(path) == []


@pytest.fixture
def read_only_journal() -> Iterator[Path]:
    """A journal in a folder any user can reach, then made read-only (file 0444, folder 0555)."""
    base = Path(tempfile.mkdtemp(prefix="tb-ro-"))
    base.chmod(0o755)
    folder = base / "journals"
    folder.mkdir()
    path = folder / "runs.sqlite"
    _journal_with_a_run(path)
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield path
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


def test_a_read_only_journal_can_be_read_by_a_user_who_cannot_write_it(read_only_journal: Path) -> None:
    path = read_only_journal
    before, files = _digest(path), _siblings(path)
    nobody = 65534
    listing = _runs("--journal", str(path), user=nobody)
    assert listing.returncode == 0, listing.stderr
    assert "run_1" in listing.stdout and "succeeded" in listing.stdout
    shown = _runs("show", "run_1", "--journal", str(path), "--json", user=nobody)
    assert shown.returncode == 0, shown.stderr
    assert '"outcome": "succeeded"' in shown.stdout and '"callId": "c1"' in shown.stdout
    assert _digest(path) == before and _siblings(path) == files


def test_reading_in_process_changes_no_byte(read_only_journal: Path) -> None:
    path = read_only_journal
    before = _digest(path)
    reader = Journal.open_existing(path)
    record = reader.get_run("run_1")
    assert record is not None and record.outcome == "succeeded" and len(record.calls) == 1
    assert [r.run_id for r in reader.list_runs()] == ["run_1"]
    reader.close()
    assert _digest(path) == before and os.access(path, os.R_OK)


def test_a_reader_sees_a_live_writers_runs(tmp_path: Path) -> None:
    path = tmp_path / "live.sqlite"
    writer = Journal(path, durable=True)
    writer.start_run("run_live", agent="a", profile="durable", principal="alice")
    reader = Journal.open_existing(path)
    record = reader.get_run("run_live")
    assert record is not None and record.outcome == "running" and record.principal == "alice"
    reader.close()
    writer.close()
