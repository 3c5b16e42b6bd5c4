"""The example in docs/security.md runs (it builds clients and auth objects; nothing is contacted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "security.md"


def _run(block: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "example.py"
    script.write_text(block, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_documented_examples_run(tmp_path: Path) -> None:
    blocks = _blocks()
    assert len(blocks) == 3
    redaction, oauth, dpop = blocks
    proc = _run(redaction, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "ERR_MCP_TRANSPORT True False"
    assert "sk-demo-4f9c2a7e1b" not in proc.stdout + proc.stderr
    assert any("started with" in line and "***" in line for line in lines)  # the stderr log line
    proc = _run(oauth, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "HttpClient HttpClient"
    proc = _run(dpop, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "HttpClient DPoPAuth"


def test_no_doc_imports_from_a_private_module() -> None:
    docs = [*DOC.parent.glob("*.md"), DOC.parent.parent / "README.md"]
    private = re.compile(r"^\s*(?:from|import)\s+toolbridge(?:\.\w+)*\._\w+", re.M)
    offenders = [
        f"{path.name}: {m.group().strip()}"
        for path in docs
        for block in re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        for m in private.finditer(block)
    ]
    assert not offenders, offenders
