"""docs/declare.md: its examples are examples/*.py verbatim and run; its other Python blocks run too."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "declare_filesystem.py"
SESSION = ROOT / "examples" / "governed_session.py"


def test_doc_includes_the_examples_verbatim() -> None:
    doc = (ROOT / "docs" / "declare.md").read_text()
    assert "```python\n" + EXAMPLE.read_text() + "```" in doc
    assert "```python\n" + SESSION.read_text() + "```" in doc


def test_example_runs(tmp_path: Path, filesystem_js: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "without grants: blocked PERMISSION_DENIED; file exists: False"
    assert lines[1] == "with grants: succeeded; answer: 'Wrote note.txt.'; file: 'hello'"
    assert lines[2].startswith("  fs.write_file v1: sent=True response=True outcome=succeeded")
    assert (tmp_path / "note.txt").read_text() == "hello"


def test_session_example_runs_and_prints_what_the_doc_shows(tmp_path: Path, filesystem_js: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SESSION), str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "declare.md").read_text()
    shown = doc.split("What it prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert done.stdout == shown
    assert (tmp_path / "notes.txt").exists() and not (tmp_path / "x.txt").exists()


def test_the_other_python_blocks_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """The runtime and guard examples (every block that is not an example file or a fragment)."""
    doc = (ROOT / "docs" / "declare.md").read_text()
    files = {EXAMPLE.read_text(), SESSION.read_text()}
    blocks = [
        m.group(1)
        for m in re.finditer(r"^```python\n(.*?)^```", doc, re.S | re.M)
        if m.group(1) not in files
        and not doc[: m.start()].rstrip("\n").rsplit("\n", 1)[-1].startswith("<!-- fragment")
    ]
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "docs/declare.md", "exec"), {"__name__": "docs_example"})
        shown = [line.strip()[3:] for line in block.splitlines() if line.strip().startswith("#> ")]
        assert shown, "each block says what it prints"
        assert capsys.readouterr().out.splitlines() == shown
