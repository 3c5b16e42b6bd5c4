"""docs/cli.md: the example session runs as written, and every subcommand is documented."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
TOOLBRIDGE = [sys.executable, "-c", "import sys, toolbridge.cli as c; sys.exit(c.main())"]


def _session() -> list[tuple[str, list[str]]]:
    text = DOC.read_text()
    block = re.search(r"<!-- tested: tests/cli/test_cli_doc.py -->\n```console\n(.*?)```", text, re.S)
    assert block is not None
    steps: list[tuple[str, list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_example_session(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from toolbridge.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("openaiApiKey", raising=False)
    for command, expected in _session():
        argv = shlex.split(command)
        assert argv[0] == "toolbridge"
        main(argv[1:])
        out, err = capsys.readouterr()
        assert out.splitlines() == expected, (command, err)


def test_the_session_as_real_processes() -> None:
    """One command once more as a real process: the console entry point behaves the same."""
    command, expected = _session()[1]
    assert command.startswith("toolbridge check")
    proc = subprocess.run(
        [*TOOLBRIDGE, *shlex.split(command)[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout.splitlines() == expected, proc.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "openaiApiKey")}


def test_every_subcommand_has_a_section() -> None:
    from toolbridge.cli import build_parser

    parser = build_parser()
    [sub] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    names = set(sub.choices)  # type: ignore[union-attr]
    documented = set(re.findall(r"^## `toolbridge ([a-z-]+)`", DOC.read_text(), flags=re.M))
    assert names == documented
