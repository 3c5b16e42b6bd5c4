"""docs/batch.md: its example is examples/batch_local.py verbatim, and it runs as shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "batch_local.py"
DOC = ROOT / "docs" / "batch.md"


def test_doc_includes_the_example_verbatim_and_its_output() -> None:
    doc = DOC.read_text()
    assert "```python\n" + EXAMPLE.read_text() + "```" in doc
    assert "```text\n" + "\n".join(EXPECTED) + "\n```" in doc


EXPECTED = [
    "ran 3: 3 succeeded, 1 input error",
    "1 a succeeded Read the notes.",
    "2 sha256-93ea9faa70058347 succeeded Read the notes.",
    "3 None failed ERR_BATCH_INPUT",
    "4 7 succeeded Read the notes.",
    "resumed: ran 0, still 3 succeeded",
    "refused: ERR_BATCH_UNKNOWN",
]


def test_example_runs(tmp_path: Path, filesystem_js: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED
    assert (tmp_path / "out.jsonl.journal.sqlite").stat().st_size > 0
