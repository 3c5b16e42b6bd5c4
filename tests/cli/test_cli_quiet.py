"""A quiet command line (issue 17 section 3): what reaches the terminal's stderr at each verbosity.

The console script runs in a subprocess (its logging set-up is its own), against the hostile
server (stderr lines that name levels, a banner on stdout) and against a server on the SDK's 1.x
line, which logs a validation error for the `server/discover` probe. That server runs from
`.venv-mcp1` (created by `.ci/run`: mcp 1.x cannot share a venv with toolbridge's mcp 2.x); the
tests fail, never skip, when it is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
HOSTILE = [sys.executable, str(ROOT / "tests" / "faults" / "hostile_server.py")]
MCP1_PYTHON = ROOT / ".venv-mcp1" / "bin" / "python"
MCP1_SERVER = ROOT / "tests" / "servers" / "mcp1" / "server.py"
MCP1_PIN = "1.30.0"


def run(*argv: str, cwd: Path = ROOT) -> tuple[int, str, str]:
    done = subprocess.run(
        [TOOLBRIDGE, *argv], capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr


def levels(err: str) -> set[str]:
    """The level names that start the log lines on stderr."""
    return {line.split(" ", 1)[0] for line in err.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def mcp1_cmd() -> list[str]:
    if not MCP1_PYTHON.exists():
        pytest.fail(
            f"{MCP1_PYTHON} is missing: create it with `python3 -m venv .venv-mcp1 && "
            f".venv-mcp1/bin/pip install mcp=={MCP1_PIN}` (as .ci/run does)"
        )
    probe = [str(MCP1_PYTHON), "-c", "import importlib.metadata as m; print(m.version('mcp'))"]
    version = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert version == MCP1_PIN, f".venv-mcp1 has mcp {version}, the tests pin {MCP1_PIN}"
    return [str(MCP1_PYTHON), str(MCP1_SERVER)]


# -- server stderr and stdout noise at each verbosity ---------------------------------------------


def test_without_v_server_stderr_and_banners_never_reach_the_terminal() -> None:
    code, out, err = run("tools", "--", *HOSTILE, "--stderr-levels", "--banner")
    assert code == 0 and "echo" in out
    assert err == ""  # not the server's "WARNING: disk almost full", not its banner


def test_with_v_server_stderr_is_shown_at_info_whatever_it_says() -> None:
    code, out, err = run("-v", "tools", "--", *HOSTILE, "--stderr-levels", "--banner")
    assert code == 0 and "echo" in out
    assert "INFO toolbridge.server.python: server stderr: WARNING: disk almost full" in err
    assert "INFO toolbridge.server.python: server stderr: 2026-01-01 ERROR cache unavailable" in err
    banner = [line for line in err.splitlines() if "on stdout" in line]
    assert len(banner) == 1 and banner[0].startswith("INFO ") and "Hostile MCP server v1.0" in banner[0]
    assert levels(err) == {"INFO"}, err


def test_with_vv_debug_records_appear_too() -> None:
    code, _, err = run("-vv", "tools", "--", *HOSTILE, "--stderr-levels", "--banner")
    assert code == 0
    assert "INFO toolbridge.server.python: server stderr: WARNING: disk almost full" in err
    assert "DEBUG" in levels(err)
    assert sum("on stdout" in line for line in err.splitlines()) == 3  # one INFO, then DEBUG


def test_call_is_quiet_without_v() -> None:
    code, out, err = run("call", "echo", '{"text": "quiet"}', "--", *HOSTILE, "--stderr-levels")
    assert (code, out.strip(), err) == (0, "quiet", "")


# -- an mcp 1.x server and the server/discover probe ----------------------------------------------


def test_an_mcp1_server_is_quiet_without_v(mcp1_cmd: list[str]) -> None:
    code, out, err = run("tools", "--", *mcp1_cmd)
    assert code == 0 and out.split()[2:4] == ["echo", "Echo"], out
    assert err == ""
    code, out, err = run("call", "echo", '{"text": "one"}', "--", *mcp1_cmd)
    assert (code, err) == (0, "") and '"result": "one"' in out  # FastMCP 1.x wraps a str result


def test_the_probe_fallback_is_never_a_warning(mcp1_cmd: list[str]) -> None:
    code, _, err = run("-v", "tools", "--", *mcp1_cmd)
    assert code == 0
    assert "Failed to validate request" in err  # the 1.x server's reaction to the probe, at INFO
    assert "does not offer server/discover; using the initialize handshake" in err  # and the way out
    assert not [line for line in err.splitlines() if line.startswith(("WARNING", "ERROR", "CRITICAL"))], err


@pytest.mark.parametrize(
    "argv",
    [
        ["tools", "--mode", "legacy"],
        ["call", "echo", '{"text": "x"}', "--mode", "legacy"],  # also after the tool name
        ["call", "--mode", "legacy", "echo", '{"text": "x"}'],
        ["lock", "--mode", "legacy", "--out", "{tmp}/tools.lock"],
    ],
    ids=["tools", "call-late", "call", "lock"],
)
def test_mode_legacy_skips_the_probe(mcp1_cmd: list[str], argv: list[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run("-v", *argv, "--", *mcp1_cmd)
    assert code == 0, err
    assert "Failed to validate request" not in err and "does not offer server/discover" not in err
    assert "server stderr: Processing request of type ListToolsRequest" in err or argv[0] == "call"


def test_mode_modern_against_a_1x_server_fails_with_one_line(mcp1_cmd: list[str]) -> None:
    code, _, err = run("tools", "--mode", "modern", "--", *mcp1_cmd)
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolbridge: ERR_"), err


def test_a_manifest_client_with_mode_legacy_skips_the_probe(mcp1_cmd: list[str], tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Mcp.StdioClient\n"
        "metadata: { name: old }\n"
        f"command: {mcp1_cmd[0]}\n"
        f"args: [{mcp1_cmd[1]}]\n"
        "mode: legacy\n"
    )
    code, out, err = run("-v", "lock", "--out", str(tmp_path / "tools.lock"), str(manifest))
    assert code == 0, err
    assert "locked 1 tools of old" in out
    assert "Failed to validate request" not in err
    manifest.write_text(manifest.read_text().replace("mode: legacy", "mode: auto"))
    code, _, err = run("-v", "lock", "--out", str(tmp_path / "tools.lock"), str(manifest))
    assert code == 0 and "Failed to validate request" in err  # the control: auto does probe


def test_a_manifest_mode_must_be_one_of_three(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: Mcp.StdioClient\nmetadata: { name: old }\ncommand: x\nmode: sometimes\n")
    code, out, err = run("check", str(manifest))
    assert code != 0 and "mode" in out + err and "Traceback" not in out + err


# -- output is always valid JSON ------------------------------------------------------------------


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"invalid JSON constant {constant} in the output")

    return json.loads(text, parse_constant=refuse)


def test_call_prints_valid_json_when_the_server_returns_nan() -> None:
    code, out, err = run("call", "nan", "--", *HOSTILE)
    assert code == 0, err
    assert _strict(out) == {"v": None, "w": [None, None], "ok": 1}


def test_call_refuses_nan_in_the_arguments_with_one_line() -> None:
    for arguments in ('{"text": NaN}', '{"text": [Infinity]}', '{"text": "\\ud800"}'):
        code, out, err = run("call", "echo", arguments, "--", *HOSTILE)
        lines = err.strip().splitlines()
        assert code == 1 and out == "" and len(lines) == 1, (arguments, err)
        assert lines[0].startswith("toolbridge: ERR_INVALID_INPUT: "), err


# -- the MCP SDK's own log records ----------------------------------------------------------------

UNLISTED = [sys.executable, str(ROOT / "tests" / "cli" / "upstreams" / "unlisted_server.py")]


def test_the_sdks_own_warnings_need_v() -> None:
    # the SDK's client logs "Tool hidden not listed by server" (logger `client`) at WARNING
    code, out, err = run("call", "hidden", "--", *UNLISTED)
    assert (code, out, err) == (0, "ran hidden\n", "")
    code, out, err = run("-v", "call", "hidden", "--", *UNLISTED)
    assert code == 0 and out == "ran hidden\n"
    assert "WARNING client: Tool hidden not listed by server" in err  # the control: it was logged


def test_toolbridges_own_warnings_still_show_without_v() -> None:
    code, out, err = run("tools", "--", *HOSTILE, "--odd-schemas")
    assert code == 0 and "echo" in out
    assert "WARNING toolbridge.server.python: stdio server 'python': tool 'bad_schema' left out" in err
