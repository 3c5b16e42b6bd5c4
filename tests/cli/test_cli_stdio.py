"""Serving over stdio from the command line: hostile stdin is one line in bounded time, and Ctrl-C
on a terminal ends `serve-tasks` (real subprocesses; a pseudo-terminal for Ctrl-C)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
HOSTILE = ROOT / "tests" / "faults" / "hostile_server.py"
TASKS = ROOT / "examples" / "tasks" / "tools.json"
INIT = json.loads(
    '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", '
    '"capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}'
)
REFUSED = "toolbridge: ERR_MCP_PROTOCOL: the client sent more than 128 MiB without a line break"


def _gateway_manifest(tmp_path: Path) -> Path:
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        "kind: Gateway\nmetadata: { name: Gate }\nruntime: !ref Policy\n"
        "toolProviders: [{ provider: !ref Up, prefix: up_, effects: read }]\n"
        "clients: [{ name: me, local: true, permissions: { allow: [tool:up_echo, effect:read] } }]\n---\n"
        "kind: Runtime\nmetadata: { name: Policy }\nprofile: durable\njournal: journal.db\n"
        "permissions: { allow: [] }\n---\n"
        f"kind: Mcp.StdioClient\nmetadata: {{ name: UpMcp }}\ncommand: {json.dumps(sys.executable)}\n"
        f"args: [{json.dumps(str(HOSTILE))}]\nmode: legacy\n---\n"
        "kind: AiMcp.ToolProvider\nmetadata: { name: Up }\nclient: !ref UpMcp\n"
    )
    return manifest


@pytest.mark.parametrize("stdout", ["pipe", "file"])
def test_gateway_reading_dev_zero_is_one_line_and_ends(tmp_path: Path, stdout: str) -> None:
    manifest = _gateway_manifest(tmp_path)
    out = tmp_path / "out"
    with open("/dev/zero", "rb") as zero, out.open("wb") as sink:
        done = subprocess.run(
            [TOOLBRIDGE, "gateway", str(manifest)],
            stdin=zero,
            stdout=subprocess.PIPE if stdout == "pipe" else sink,
            stderr=subprocess.PIPE,
            timeout=300,  # a hang guard only
            cwd=tmp_path,
        )
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(REFUSED)
    assert (done.stdout or b"") == b"" and out.read_bytes() == b""


def test_gateway_fed_zeros_through_a_pipe_is_one_line_and_ends(tmp_path: Path) -> None:
    manifest = _gateway_manifest(tmp_path)
    feeder = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [TOOLBRIDGE, "gateway", str(manifest)],
            stdin=feeder.stdout,
            capture_output=True,
            timeout=300,
            cwd=tmp_path,
        )
    finally:
        feeder.kill()
        feeder.wait()
        assert feeder.stdout is not None
        feeder.stdout.close()
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith(REFUSED), done.stderr[-2000:]


def test_an_oversized_line_then_a_request_is_still_answered(tmp_path: Path) -> None:
    # the file fallback (`_stdio_wire`): one bad message, the next one answered
    from toolbridge._stdio_wire import MAX_LINE_BYTES

    requests = tmp_path / "in.jsonl"
    with requests.open("wb") as f:
        f.write(
            b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": "' + b"x" * (MAX_LINE_BYTES + 10)
        )
        f.write(b'"}}\n' + json.dumps(INIT).encode() + b"\n")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [TOOLBRIDGE, "serve-tasks", str(TASKS)],
            stdin=stdin,
            capture_output=True,
            timeout=300,
            cwd=tmp_path,
        )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("id") for a in answers if "result" in a] == [1], done.stderr[-2000:]
    assert "Traceback" not in done.stderr.decode()


def test_serve_tasks_on_a_terminal_ends_on_ctrl_c_after_serving() -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: serve-tasks with the terminal as stdin and stdout
        os.execv(TOOLBRIDGE, [TOOLBRIDGE, "serve-tasks", str(TASKS)])
    seen = b""
    try:
        os.write(fd, json.dumps(INIT).encode() + b"\n")
        deadline = time.monotonic() + 120  # hang guard
        while b'"serverInfo"' not in seen:  # it served one request (its reader is waiting again)
            assert time.monotonic() < deadline, seen
            if select.select([fd], [], [], 1)[0]:
                seen += os.read(fd, 65536)
        os.write(fd, b"\x03")  # Ctrl-C, as the terminal sends it: SIGINT to the foreground group
        status = None
        while status is None:
            assert time.monotonic() < deadline, f"still running after Ctrl-C: {seen[-500:]!r}"
            if select.select([fd], [], [], 1)[0]:
                with contextlib.suppress(OSError):
                    seen += os.read(fd, 65536)
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    assert status == 130, seen[-500:]
    assert seen.rstrip().endswith(b"toolbridge: interrupted") and b"Traceback" not in seen
