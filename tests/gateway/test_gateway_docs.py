"""The Python example of docs/gateway.md runs: a 2026-07-28 client listens through the gateway
serving examples/manifests/gateway.yaml and hears server-everything's resource update."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "gateway.md"
EXAMPLE = ROOT / "examples" / "manifests" / "gateway.yaml"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_listen_example_hears_an_update(tmp_path: Path) -> None:
    blocks = [b for b in _BLOCK.findall(DOC.read_text(encoding="utf-8")) if "client.listen(" in b]
    assert len(blocks) == 1, "docs/gateway.md has one listen example"
    text = EXAMPLE.read_text(encoding="utf-8").replace("../../tests/servers", str(ROOT / "tests" / "servers"))
    (tmp_path / "examples" / "manifests").mkdir(parents=True)
    (tmp_path / "examples" / "manifests" / "gateway.yaml").write_text(text, encoding="utf-8")
    shutil.copytree(EXAMPLE.parent / "data", tmp_path / "examples" / "manifests" / "data")
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "updated: demo://resource/static/document/architecture.md"
    assert (tmp_path / "examples" / "manifests" / "gateway-journal.db").exists()
