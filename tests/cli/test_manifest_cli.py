"""`toolbridge check`, `run` and `schema` from the command line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from subprocess_helpers import stderr_until
from toolbridge.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOOLBRIDGE = [sys.executable, "-c", "import sys, toolbridge.cli as c; sys.exit(c.main())"]
SEED = ROOT / "examples" / "manifests" / "seed-assistant.yaml"
SECRET = "sk-SEKRET-4f1d9a"


def test_check_seed_without_key(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("openaiApiKey", raising=False)
    assert main(["check", str(SEED)]) == 1
    out = capsys.readouterr().out
    assert f"{SEED}:4:9: error ERR_MANIFEST_SECRET_UNRESOLVED: secret openaiApiKey cannot be resolved" in out
    assert "1 error(s), 0 warning(s) in 1 file" in out


def test_check_seed_with_key(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert main(["check", str(SEED)]) == 0
    out, err = capsys.readouterr()
    assert "ok: 1 file checked" in out
    assert SECRET not in out + err


def test_check_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Mcp.StdioClient\nmetadata: { name: A }\ncommand: node\nargz: []\n")
    assert main(["check", "--json", str(SEED), str(bad)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["errorCount"] == 2
    assert [(d["file"], d["line"], d["column"], d["code"]) for d in report["diagnostics"]] == [
        (str(SEED), 4, 9, "ERR_MANIFEST_SECRET_UNRESOLVED"),
        (str(bad), 4, 1, "ERR_MANIFEST_UNKNOWN_FIELD"),
    ]
    assert set(report["diagnostics"][0]) == {"file", "line", "column", "severity", "code", "message"}


def test_check_secret_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["check", str(SEED), "--secret", f"openaiApiKey={SECRET}"]) == 0
    env_file = tmp_path / "s.env"
    env_file.write_text(f"openaiApiKey={SECRET}\n")
    assert main(["check", str(SEED), "--secrets-file", str(env_file)]) == 0
    assert SECRET not in "".join(capsys.readouterr())


def test_check_bad_secret_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(SEED), "--secret", SECRET]) == 1
    out, err = capsys.readouterr()
    assert "ERR_MANIFEST_SECRET_ARG" in err
    assert SECRET not in out + err


def test_secret_values_never_printed_by_check(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Every output channel of `check`, with the secret used correctly and in wrong places."""
    monkeypatch.setenv("WEB_TOKEN", SECRET)
    text = (
        "kind: Mcp.HttpClient\n"
        "metadata: { name: Web }\n"
        'url: "http://127.0.0.1:1/mcp?k=${{ secrets.webToken }}"\n'
        "headers:\n"
        '  Authorization: "Bearer ${{ secrets.webToken }}"\n'
        '  X-Count: ["${{ secrets.webToken }}"]\n'  # wrong type, holding a secret
        'unknown: "${{ secrets.webToken }}"\n'  # unknown field, holding a secret
        "---\n"
        "kind: Ai.ScriptedModel\n"
        "metadata: { name: M }\n"
        "turns:\n"
        '  - text: "${{ secrets.webToken }}"\n'  # a field that takes no secret
        '  - toolCalls: [{ name: x, arguments: { a: "${{ secrets.webToken }}" } }]\n'
    )
    path = tmp_path / "m.yaml"
    path.write_text(text)
    caplog.set_level(logging.DEBUG)
    assert main(["-vv", "check", str(path)]) == 1
    assert main(["check", "--json", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "ERR_MANIFEST_SECRET_PLACEMENT" in out
    assert "ERR_MANIFEST_UNKNOWN_FIELD" in out
    everything = out + err + caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert SECRET not in everything
    assert SECRET[3:] not in everything


def test_schema_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    kinds = {s["$ref"].rsplit("/", 1)[1] for s in schema["oneOf"]}
    assert "AgentDoc" in kinds and "StdioClientDoc" in kinds
    assert schema["$defs"]["StdioClientDoc"]["additionalProperties"] is False


def test_check_as_a_real_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "openaiApiKey")}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, toolbridge.cli as c; sys.exit(c.main())", "check", str(SEED)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "secret openaiApiKey cannot be resolved" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_run_stops_on_analysis_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["run", str(SEED), "--input", "hi"]) == 1
    err = capsys.readouterr().err
    assert "secret openaiApiKey cannot be resolved" in err
    assert "nothing was started" in err


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode(errors="replace").rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _slow_manifest(everything_js: str, node: str) -> str:
    """A governed agent (durable journal `runs.db`) whose one tool call takes 30 s."""
    return f"""\
kind: Runtime
metadata: {{ name: Policy }}
profile: durable
journal: runs.db
permissions: {{ allow: ["model:scripted", "tool:ev_trigger-long-running-operation"] }}
---
kind: Ai.ScriptedModel
metadata: {{ name: Scripted }}
turns:
  - toolCalls: [ {{ name: ev_trigger-long-running-operation, arguments: {{ duration: 30, steps: 30 }} }} ]
  - text: never reached
---
kind: Mcp.StdioClient
metadata: {{ name: Everything }}
command: {node}
args: ["{everything_js}", "stdio"]
shutdownGraceMs: 2000
---
kind: AiMcp.ToolProvider
metadata: {{ name: Ev }}
client: !ref Everything
---
kind: Ai.Agent
metadata: {{ name: Slow }}
model: !ref Scripted
toolProviders: [ {{ provider: !ref Ev, prefix: ev_, effects: none }} ]
"""


def _wait_for_the_slow_call(proc: subprocess.Popen[bytes]) -> str:
    """What `toolbridge run` wrote on stderr until the slow tool call started (60 s at most)."""
    return stderr_until(proc, "→ ev_trigger-long-running-operation", "the slow tool call's start")


@pytest.mark.parametrize("mode", ["runtime", "plain", "stream"])
def test_ctrl_c_cancels_cleanly(
    tmp_path: Path, everything_js: str, node: str, mode: str, request: pytest.FixtureRequest
) -> None:
    """SIGINT mid-tool-call: exit 130, no server left behind, the journal (if any) says cancelled."""
    import signal
    import time

    from toolbridge.runtime import create_runtime

    manifest = tmp_path / "slow.yaml"
    text = _slow_manifest(everything_js, node)
    governed = mode == "runtime"
    if not governed:
        text = text.split("---\n", 1)[1]  # drop the Runtime document
    if mode == "stream":
        text = text.replace("kind: Ai.Agent\n", "kind: Ai.AgentStream\n")
    manifest.write_text(text)
    proc = subprocess.Popen(
        [*TOOLBRIDGE, "run", str(manifest), "--input", "go"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = _wait_for_the_slow_call(proc)
        time.sleep(0.3)  # the call is in flight on the server now
        helpers = request.config.pluginmanager.get_plugin(str(ROOT / "tests" / "conftest.py"))
        servers = [pid for pid, cmd in helpers.descendants_of_this_process() if "server-everything" in cmd]
        assert servers, f"the server should be running: {seen!r}"
        proc.send_signal(signal.SIGINT)
        raw_out, raw_err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = raw_out.decode(errors="replace"), raw_err.decode(errors="replace")
    assert proc.returncode == 130, (out, seen + err)
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in servers), "a server process outlived the run"
    if not governed:
        return
    runtime = create_runtime(profile="durable", journal=tmp_path / "runs.db")
    try:
        [run] = runtime.runs()
        assert run.outcome == "cancelled", run
        assert run.error_code == "CANCELLED"
    finally:
        runtime.close()


def test_a_governed_run_holds_its_writers_lease_while_it_lives(
    tmp_path: Path, everything_js: str, node: str
) -> None:
    """`toolbridge run` under a durable Runtime holds this process's lease in the journal (as a
    gateway or batch driver does), renewed while the run lives, so another host may settle the
    run once it expires if the process dies."""
    import signal
    import sqlite3
    import time

    manifest = tmp_path / "slow.yaml"
    manifest.write_text(_slow_manifest(everything_js, node))
    proc = subprocess.Popen(
        [*TOOLBRIDGE, "run", str(manifest), "--input", "go"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for_the_slow_call(proc)
        with sqlite3.connect(tmp_path / "runs.db") as db:
            leases = db.execute("SELECT writer, expires_at FROM leases").fetchall()
            pids = {row[0] for row in db.execute("SELECT pid FROM runs WHERE status = 'running'")}
        assert pids == {proc.pid}
        mine = [expires for writer, expires in leases if writer.split("/")[1] == str(proc.pid)]
        assert mine and mine[0] > time.time(), leases  # held, and not expired
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
