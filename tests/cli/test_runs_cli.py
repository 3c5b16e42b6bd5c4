"""`toolbridge runs` writes through the shared `emit`, so a reader that stops early is no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from toolbridge.runtime import Journal


def test_runs_listing_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal = Journal(path)
    for i in range(3000):  # a listing larger than a pipe's buffer
        run_id = f"run_{i:040d}"
        journal.start_run(run_id, agent="agent", profile="durable")
        journal.end_run(
            run_id,
            outcome="succeeded",
            error_code=None,
            cost_micros=0,
            input_tokens=0,
            output_tokens=0,
            model_calls=0,
        )
    journal.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolbridge.cli", "runs", "--journal", str(path), "--limit", "5000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before anything is read (`| head -0`)
    try:
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"BrokenPipeError" not in stderr and b"Traceback" not in stderr
