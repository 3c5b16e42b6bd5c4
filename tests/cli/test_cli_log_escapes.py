"""A server's log notifications reach the command line's stderr neutralised, without `-v`: terminal
escapes (clear screen, window title, OSC 52 clipboard, BEL) shown as `\\x1b`…, a forged
"toolbridge:" line kept on its record's line, and the secret the server was given scrubbed in
every letter case; in `call`, `run` and `run --json` (the gateway's own stderr is tested in
tests/gateway/test_gateway_secrets.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "gateway" / "upstreams" / "secret_echo_server.py"
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
SECRET = "sk-Cli-Echo-0123456789abcdef"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([TOOLBRIDGE, *args], cwd=cwd, env=env, capture_output=True, timeout=120)


def _assert_neutralised(stderr: bytes) -> None:
    assert b"server log:" in stderr, stderr[-2000:]
    assert b"\x1b" not in stderr and b"\x07" not in stderr
    assert b"\\x1b]52;c;" in stderr  # shown, not obeyed
    assert not any(line.startswith(b"toolbridge: all checks passed") for line in stderr.splitlines())
    assert SECRET.lower().encode() not in stderr.lower()


def test_call_shows_log_escapes_visibly(tmp_path: Path) -> None:
    done = _run(
        [
            "call",
            "--mode",
            "legacy",
            "--env",
            f"ECHO_SECRET={SECRET}",
            "leak_log",
            "{}",
            "--",
            sys.executable,
            str(SERVER),
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == b"logged"
    _assert_neutralised(done.stderr)


@pytest.mark.parametrize("as_json", [False, True])
def test_run_shows_log_escapes_visibly(tmp_path: Path, as_json: bool) -> None:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(
        f"""kind: Runtime
metadata: {{ name: Policy }}
permissions: {{ allow: [model:scripted, tool:sx_leak_log, effect:read] }}
---
kind: Ai.ScriptedModel
metadata: {{ name: Scripted }}
turns:
  - toolCalls: [{{ name: sx_leak_log, arguments: {{}} }}]
  - text: done
---
{{ kind: Mcp.StdioClient, metadata: {{ name: EchoMcp }}, mode: legacy,
  command: {json.dumps(sys.executable)}, args: [{json.dumps(str(SERVER))}],
  env: {{ ECHO_SECRET: "${{{{ secrets.echoKey }}}}" }} }}
---
{{ kind: AiMcp.ToolProvider, metadata: {{ name: Echo }}, client: !ref EchoMcp }}
---
kind: Ai.Agent
metadata: {{ name: Leaker }}
model: !ref Scripted
toolProviders:
  - provider: !ref Echo
    prefix: sx_
    effects: read
""",
        encoding="utf-8",
    )
    done = _run(
        [
            "run",
            str(manifest),
            "--input",
            "leak",
            "--secret",
            f"echoKey={SECRET}",
            *(["--json"] if as_json else []),
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _assert_neutralised(done.stderr)
    assert SECRET.lower().encode() not in done.stdout.lower()
