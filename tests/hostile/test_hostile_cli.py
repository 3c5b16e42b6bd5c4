"""The command line under hostile conditions: one line, a documented exit code, never a traceback.

Every case runs the installed console script in a real subprocess: Ctrl-C during start-up, a
closed or full stdout, `--timeout nan`, NaN and deep JSON arguments; and a real MCP server
(`terminal_server.py`, official SDK) whose names, descriptions, results and errors try to take
over the terminal through `tools`, `call`, `lock --check` and `run`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolbridge import __version__

HERE = Path(__file__).resolve().parent
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
SERVER = [sys.executable, str(HERE / "terminal_server.py")]
sys.path.insert(0, str(HERE))
import terminal_server as hostile  # noqa: E402

# Bytes that must never reach a terminal from an untrusted source.
RAW = ("\x1b", "\x07", "\r", "\u202e", "\u2066", "\x9b", "\u200b")


def _run(*argv: str, timeout: float = 60, **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [TOOLBRIDGE, *argv], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("toolbridge: ")
    return lines[0]


def _terminal_safe(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text)


# ----------------------------------------------------------------------------- start-up and output


# The console script, saying when the interpreter has started it (a Ctrl-C inside Python's own
# start-up, before any line of a program runs, is the interpreter's business).
_SCRIPT = (
    "import os, sys\n"
    "from _toolbridge_cli import main\n"
    "os.write(int(os.environ['STARTED_FD']), b'started')\n"
    "sys.exit(main())\n"
)


@pytest.mark.parametrize("delay", [0.02, 0.1, 0.2, 0.35, 0.5, 0.8])
def test_ctrl_c_during_start_up_is_one_line(delay: float) -> None:
    started_r, started_w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, "tools", "--", *SERVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(started_w,),
        env={**os.environ, "STARTED_FD": str(started_w)},
    )
    os.close(started_w)
    assert os.read(started_r, 7) == b"started"
    os.close(started_r)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if proc.returncode == 0:  # it finished before the signal: nothing to check
        return
    assert proc.returncode == 130, (proc.returncode, err)
    assert _one_line(err).startswith("toolbridge: interrupted")


def test_stdout_closed() -> None:
    proc = _run("schema", stdout=None, pass_fds=(), preexec_fn=lambda: os.close(1))
    assert proc.returncode == 74
    assert _one_line(proc.stderr) == "toolbridge: cannot write the output: standard output is closed"


def test_stdout_full() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [TOOLBRIDGE, "schema"], stdout=full, stderr=subprocess.PIPE, text=True, check=False
        )
    assert proc.returncode == 74
    assert "No space left on device" in _one_line(proc.stderr)


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    proc = subprocess.run(
        f"{TOOLBRIDGE} schema | head -c 10", shell=True, capture_output=True, text=True, check=False
    )
    assert proc.stderr == "" and proc.stdout == _run("schema").stdout[:10]


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (["call", "--timeout", "nan", "echo", "{}", "--", "true"], 2, "finite number of seconds"),
        (["call", "echo", "{}", "--timeout=-inf", "--", "true"], 2, "finite number of seconds"),
        (["call", "echo", '{"text": NaN}', "--", "true"], 1, "ERR_INVALID_INPUT"),
        (["call", "echo", '{"text": Infinity}', "--", "true"], 1, "ERR_INVALID_INPUT"),
        (["call", "echo", "[" * 100_000, "--", "true"], 1, "deeper than 100"),
        (["call", "echo", '{"a":' * 1000 + "1" + "}" * 1000, "--", "true"], 1, "deeper than 100"),
        (["call", "echo", '{"n": ' + "1" * 5000 + "}", "--", "true"], 1, "ERR_INVALID_INPUT"),
        (["check", "m.yaml", "--nope"], 2, "unrecognized arguments"),
        (["nope"], 2, "invalid choice"),
        (["lock", "--check", "--out", "/nonexistent/x.lock", "--", "true"], 1, "not found"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], code: int, fragment: str) -> None:
    proc = _run(*argv)
    assert proc.returncode == code, proc.stderr
    assert fragment in _one_line(proc.stderr)
    assert proc.stdout == ""


def test_version_and_verbose_after_the_subcommand(tmp_path: Path) -> None:
    proc = _run("--version")
    assert (proc.returncode, proc.stdout) == (0, f"toolbridge {__version__}\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: hi } ]\n")
    quiet = _run("tools", "--", *SERVER)
    loud = _run("tools", "-vv", "--", *SERVER)
    assert quiet.returncode == loud.returncode == 0
    assert "DEBUG" not in quiet.stderr and "DEBUG" in loud.stderr
    assert _run("check", str(manifest), "-v").returncode == 0


# ---------------------------------------------------------------------------- terminal injection


def test_tools_shows_hostile_names_as_escapes() -> None:
    proc = _run("tools", "--", *SERVER)
    assert proc.returncode == 0
    _terminal_safe(proc.stdout + proc.stderr)
    assert "clip\\x1b]52;c;" in proc.stdout  # visible, not executed
    assert "cr\\rserver: matches x.lock" in proc.stdout
    assert "rtl\\u202etxt.exe" in proc.stdout
    exact = json.loads(_run("tools", "--json", "--", *SERVER).stdout)
    assert {t["name"] for t in exact} >= set(hostile.NAMES)  # --json stays exact


def test_call_result_and_errors_are_terminal_safe() -> None:
    ok = _run("call", hostile.NAMES[0], "--", *SERVER)
    assert ok.returncode == 0
    _terminal_safe(ok.stdout)
    assert ok.stdout.startswith("result")
    for tool in ("fail", "iserror"):
        failed = _run("call", tool, "--", *SERVER)
        assert failed.returncode == 1
        _terminal_safe(failed.stderr)
        assert "boom" in failed.stderr


def test_lock_check_cannot_fake_a_match(tmp_path: Path) -> None:
    lock = tmp_path / "tools.lock"
    assert _run("lock", "--out", str(lock), "--", *SERVER).returncode == 0
    proc = _run("lock", "--check", "--out", str(lock), "--", *SERVER, "--more")
    assert proc.returncode == 1
    _terminal_safe(proc.stdout)
    [line] = [line for line in proc.stdout.splitlines() if "new tool" in line]
    assert line.startswith("server: new tool new\\x1b]0;owned\\x07\\rserver: matches tools.lock: sha256:")


def test_lock_check_with_a_missing_lock_file(tmp_path: Path) -> None:
    proc = _run("lock", "--check", "--out", str(tmp_path / "none.lock"), "--", *SERVER)
    assert proc.returncode == 1
    line = _one_line(proc.stderr)
    assert "ERR_LOCK_INVALID" in line and "not found" in line


def test_relocking_a_manifest_whose_lock_file_is_missing(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"kind: Mcp.StdioClient\nmetadata: {{ name: Hostile }}\ncommand: {sys.executable}\n"
        f"args: [{json.dumps(str(HERE / 'terminal_server.py'))}]\n---\n"
        "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: !ref Hostile\nlock: pins/tools.lock\n"
    )
    assert _run("check", str(manifest)).returncode == 1  # the lock is missing: check says so
    proc = _run("lock", str(manifest))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pins" / "tools.lock").exists()  # the manifest's own lock file
    assert _run("check", str(manifest)).returncode == 0
    assert _run("lock", "--check", str(manifest)).returncode == 0


def test_run_shows_a_failed_call_and_exits_3(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns:\n"
        "  - toolCalls: [ { name: h_fail, arguments: {} } ]\n"
        '  - toolCalls: [ { name: "nope\\e]0;x\\a", arguments: {} } ]\n'
        "  - text: done\n---\n"
        f"kind: Mcp.StdioClient\nmetadata: {{ name: Hostile }}\ncommand: {sys.executable}\n"
        f"args: [{json.dumps(str(HERE / 'terminal_server.py'))}]\n---\n"
        "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: !ref Hostile\n---\n"
        "kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref M\n"
        "toolProviders: [ { provider: !ref P, prefix: h_, include: [fail] } ]\n"
    )
    proc = _run("run", str(manifest), "--input", "go")
    assert proc.returncode == 3, proc.stderr
    _terminal_safe(proc.stderr + proc.stdout)
    assert proc.stdout == "done\n"
    assert "✗ h_fail" in proc.stderr and "error ERR_MCP_JSON_RPC_ERROR" in proc.stderr
    assert "✗ nope\\x1b]0;x\\x07" in proc.stderr and "ERR_AGENT_UNKNOWN_TOOL" in proc.stderr
    assert proc.stderr.rstrip().endswith("toolbridge: the run finished, but 2 tool calls failed")
    as_json = _run("run", str(manifest), "--input", "go", "--json")
    assert as_json.returncode == 3
    results = [r for s in json.loads(as_json.stdout)["steps"] for r in s["toolResults"]]
    assert [(r["error"], r.get("errorCode")) for r in results] == [
        (True, "ERR_MCP_JSON_RPC_ERROR"),
        (True, "ERR_AGENT_UNKNOWN_TOOL"),
    ]
