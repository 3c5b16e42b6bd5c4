"""The gateway's stdio wire, spoken by hand: junk lines from a client are survived, and stdin/stdout
that are regular files (not pipes) are served through the SDK's own stdio transport."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from gw_helpers import TOOLBRIDGE, upstream_manifest

CLIENTS = """clients:
  - name: me
    local: true
    permissions: { allow: [tool:up_echo, effect:read] }
"""
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "up_echo", "arguments": {"text": "hi"}},
}


def _lines(*messages: object) -> bytes:
    return b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages)


def _answers(out: bytes) -> dict[int, dict[str, object]]:
    answers: dict[int, dict[str, object]] = {}
    for line in out.splitlines():
        message = json.loads(line)  # every line the gateway writes is JSON-RPC
        if "id" in message:
            answers[message["id"]] = message
    return answers


def test_junk_lines_from_the_client_are_survived_on_pipes(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    wire = _lines(INIT, b"this is not JSON", INITIALIZED, b"\x00\xff{", b"", CALL)
    proc = subprocess.Popen(
        [TOOLBRIDGE, "gateway", str(manifest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen = b""
    try:
        proc.stdin.write(wire)
        proc.stdin.flush()
        while b'"id":2' not in seen.replace(b" ", b""):  # stdin stays open until the call is answered
            line = proc.stdout.readline()
            assert line, "the gateway closed stdout"
            seen += line
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    answers = _answers(seen)
    assert answers[1]["result"]["serverInfo"]["name"] == "TestGate"  # type: ignore[index]
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "hi"}]  # type: ignore[index]
    assert proc.returncode == 0


def test_regular_files_as_stdin_and_stdout(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(_lines(INIT, INITIALIZED, CALL))
    responses = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, responses.open("wb") as stdout:
        subprocess.run(
            [TOOLBRIDGE, "gateway", str(manifest)], stdin=stdin, stdout=stdout, timeout=120, check=False
        )
    answers = _answers(responses.read_bytes())  # (the file's end closes the session at once)
    assert answers[1]["result"]["serverInfo"]["name"] == "TestGate"  # type: ignore[index]


def test_an_oversized_line_is_dropped_and_the_next_call_answered(tmp_path: Path) -> None:
    """A line longer than `MAX_LINE_BYTES` is read past (never buffered whole) and the session
    goes on: the next call is answered."""
    from toolbridge.gateway._stdio import MAX_LINE_BYTES

    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    huge = b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "' + b"x" * (MAX_LINE_BYTES + 1024)
    proc = subprocess.Popen(
        [TOOLBRIDGE, "gateway", str(manifest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    seen = b""
    try:
        proc.stdin.write(_lines(INIT, INITIALIZED, huge + b'"}}', CALL))
        proc.stdin.flush()
        while b'"id":2' not in seen.replace(b" ", b""):
            line = proc.stdout.readline()
            assert line, "the gateway closed stdout"
            seen += line
        proc.stdin.close()
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    answers = _answers(seen)
    assert 7 not in answers, "the oversized request was dropped"
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "hi"}]  # type: ignore[index]
    assert b"Traceback" not in err and proc.returncode == 0


def test_a_client_that_closes_its_reading_end_ends_the_gateway_quietly(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    proc = subprocess.Popen(
        [TOOLBRIDGE, "gateway", str(manifest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(_lines(INIT))
        proc.stdin.flush()
        assert proc.stdout.readline()  # initialized: now stop reading for good
        proc.stdout.close()
        proc.stdin.write(_lines(INITIALIZED, CALL, {**CALL, "id": 3}))
        proc.stdin.close()
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert b"Traceback" not in err, err[-2000:]
    assert proc.returncode in (0, 1), err[-2000:]
