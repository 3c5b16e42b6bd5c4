"""docs/describe.md: its examples are the files in examples/tasks (verbatim) and they run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "describe.md"
EXAMPLE = ROOT / "examples" / "tasks"


def fenced(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_doc_includes_the_example_files_verbatim() -> None:
    assert (EXAMPLE / "tools.json").read_text(encoding="utf-8") in fenced("json")
    assert (EXAMPLE / "run_example.py").read_text(encoding="utf-8") in fenced("python")


def test_every_python_example_of_the_doc_runs(capsys: pytest.CaptureFixture[str]) -> None:
    example = (EXAMPLE / "run_example.py").read_text(encoding="utf-8")
    blocks = [b for b in fenced("python") if b != example]
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "describe_example"})
    out = capsys.readouterr().out
    assert "hey hey hey" in out  # the custom action
    assert "'status': 'error'" in out and "the scheduler is down" in out  # the parser API


@pytest.mark.browser
def test_run_example(chromium: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "run_example.py")],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "TOOLBRIDGE_CHROMIUM": chromium},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"status": "success"' in done.stdout
    assert "Ada Lovelace\\tada@example.org\\t1843-07-10\\tmember" in done.stdout
