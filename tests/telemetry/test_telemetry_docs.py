"""docs/observability.md is real: its Python example runs and prints what the page says, and the
span tree it shows is what `toolbridge run --trace` prints for that manifest (durations aside)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "observability.md"
VENV_BIN = Path(sys.executable).parent


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_python_example_runs_and_prints_the_spans() -> None:
    runnable = [b for b in _blocks("python") if "anyio.run(main)" in b]
    assert len(runnable) == 1
    out = subprocess.run(
        [sys.executable, "-c", runnable[0]], cwd=ROOT, capture_output=True, text=True, timeout=90
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:-1] == [
        "chat scripted",
        "MCP send tools/call list_directory",
        "execute_tool fs_list_directory",
        "chat scripted",
        "invoke_agent files",
    ]
    assert "`chat scripted`, `MCP send tools/call list_directory`," in PAGE.read_text(encoding="utf-8")


def _shape(tree: str) -> list[str]:
    """The tree without durations: `  ├─ execute_tool x  ok`."""
    return [re.sub(r"  \d+\.\d ms  ", "  ", line) for line in tree.strip().splitlines()]


def test_the_tree_on_the_page_is_what_trace_prints() -> None:
    found = re.search(r"^```\n(trace:\n.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    assert found is not None
    shown = found.group(1)
    script = VENV_BIN / "toolbridge"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "toolbridge.cli"]
    out = subprocess.run(
        [
            *command,
            "run",
            "examples/manifests/governed-assistant.yaml",
            "--input",
            "Summarise my notes",
            "--trace",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 1, out.stderr  # the run is blocked, as the page says
    printed = out.stderr[out.stderr.index("trace:\n") :]
    assert _shape(printed) == _shape(shown)
