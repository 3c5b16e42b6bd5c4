"""The README's quick start is real code: it runs from the repository root and does what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_quick_start_runs() -> None:
    block = re.search(r"## Quick start\n.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    out = subprocess.run(
        [sys.executable, "-c", block.group(1)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "meeting-notes.txt" in out.stdout
    assert "done" in out.stdout


def test_the_readme_starts_with_exactly_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text()
    head = text.split("\n---\n", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", head, re.S)
    assert len(commands) == 2
    assert all(len(c.strip().splitlines()) == 1 for c in commands)
    assert "examples/agent_offline.py" in commands[0]
    assert commands[1].strip() == "bash .ci/run"
    assert "scripts/check.sh" in (ROOT / ".ci" / "run").read_text()
