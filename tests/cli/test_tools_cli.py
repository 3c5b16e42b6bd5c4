"""`toolbridge tools` and `toolbridge call` against real servers, and their one-line failures."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subprocess_helpers import listening
from toolbridge.cli import main

TOOLBRIDGE = [str(Path(sys.executable).parent / "toolbridge")]  # the installed console script


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("toolbridge: ")
    return lines[0]


def test_tools_prints_a_table(everything_cmd: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["tools", "--", *everything_cmd], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION"]
    names = {line.split()[0] for line in lines[1:]}
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= names
    assert "Starting default" not in out  # server stderr never reaches stdout


def test_tools_json(time_server_cmd: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["tools", "--json", "--", *time_server_cmd], capsys)
    assert code == 0
    tools = {t["name"]: t for t in json.loads(out)}
    assert tools["get_current_time"]["inputSchema"]["required"] == ["timezone"]
    assert "outputSchema" in tools["get_current_time"]
    assert tools["get_current_time"]["annotations"]["readOnlyHint"] is True


def test_call_prints_text(everything_cmd: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["call", "echo", '{"message": "hello there"}', "--", *everything_cmd], capsys)
    assert (code, out) == (0, "Echo: hello there\n")


def test_call_prints_an_image_as_one_line(
    everything_cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["call", "--timeout", "30", "get-tiny-image", "--", *everything_cmd], capsys)
    assert code == 0
    image_lines = [line for line in out.splitlines() if line.startswith("[image:")]
    assert len(image_lines) == 1
    assert image_lines[0].startswith("[image: image/png, ") and image_lines[0].endswith(" bytes]")
    assert len(out) < 500  # no base64 payload


def test_call_prints_structured_content_as_json(
    everything_cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        ["call", "get-structured-content", '{"location": "Chicago"}', "--", *everything_cmd], capsys
    )
    assert code == 0
    assert set(json.loads(out)) == {"temperature", "conditions", "humidity"}


def test_call_prints_passed_through_content_as_json(
    everything_cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["call", "get-resource-links", '{"count": 2}', "--", *everything_cmd], capsys)
    assert code == 0
    assert [b["type"] for b in json.loads(out)] == ["text", "resource_link", "resource_link"]


def test_tool_error_exits_1_with_the_server_message(
    everything_cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["call", "get-sum", '{"a": "x", "b": 2}', "--", *everything_cmd], capsys)
    assert code == 1
    assert out == ""
    assert "Input validation error" in err and "expected number" in err


def test_server_command_keeps_its_own_options(
    time_server_cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # `--local-timezone UTC` belongs to the server, not to toolbridge.
    assert time_server_cmd[1:] == ["--local-timezone", "UTC"]
    code, out, _ = _run(["call", "get_current_time", '{"timezone": "UTC"}', "--", *time_server_cmd], capsys)
    assert code == 0
    assert json.loads(out)["timezone"] == "UTC"


@pytest.fixture(scope="module")
def everything_url(node: str, everything_js: str) -> Iterator[str]:
    argv = [node, everything_js, "streamableHttp"]
    with listening(argv, "server-everything", {"PORT": "{port}"}, seconds=15, keep_stderr=False) as url:
        yield url


def test_url_server(everything_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["tools", "--url", everything_url], capsys)
    assert code == 0 and "get-sum" in out
    code, out, _ = _run(["call", "--url", everything_url, "get-sum", '{"a": 2, "b": 3}'], capsys)
    assert code == 0 and "5" in out
    code, out, _ = _run(
        ["call", "--url", everything_url, "--header", "X-Trace: 1", "echo", '{"message": "m"}'], capsys
    )
    assert (code, out) == (0, "Echo: m\n")


def test_options_may_follow_the_tool_name(
    everything_cmd: list[str], everything_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        ["call", "echo", '{"message": "late"}', "--timeout", "30", "--", *everything_cmd], capsys
    )
    assert (code, out) == (0, "Echo: late\n")
    code, out, _ = _run(["call", "echo", '{"message": "url last"}', "--url", everything_url], capsys)
    assert (code, out) == (0, "Echo: url last\n")


def test_bad_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["tools", "--", "toolbridge-no-such-server-xyz"], capsys)
    assert code == 1
    assert "ERR_MCP_TRANSPORT" in _one_line_error(err)


def test_server_crashing_at_start_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    script = (
        "import sys; print('first', file=sys.stderr); print('no config found', file=sys.stderr); sys.exit(2)"
    )
    code, _, err = _run(["tools", "--", sys.executable, "-c", script], capsys)
    assert code == 1
    line = _one_line_error(err)
    assert "no config found" in line


def test_unreachable_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["call", "--url", "http://127.0.0.1:9/mcp", "echo", "{}"], capsys)
    assert code == 1
    assert "ERR_MCP_TRANSPORT" in _one_line_error(err)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["call", "echo", "{not json", "--", "true"], "not valid JSON"),
        (["call", "echo", "[1, 2]", "--", "true"], "must be a JSON object"),
        (["call", "echo", "{}"], "no server"),
        (["call", "--url", "http://127.0.0.1:9/mcp", "echo", "{}", "--", "true"], "not both"),
        (["call", "--", "true"], "no tool named"),
        (["call", "echo", "{}", "extra", "--", "true"], "too many arguments"),
        (["call", "--url", "not-a-url", "echo"], "not an http(s) URL"),
        (["call", "--header", "nocolon", "--url", "http://127.0.0.1:9/mcp", "echo"], "NAME:VALUE"),
        (["call", "--timeout", "0", "echo", "{}", "--", "true"], "--timeout"),
        (["tools", "stray", "--", "true"], "after `--`"),
        (["tools"], "no server"),
        (["call", "echo", "{}", "--timeout", "soon", "--", "true"], "not a number of seconds"),
        (["call", "--timeout", "nan", "echo", "{}", "--", "true"], "finite number of seconds"),
        (["call", "echo", "{}", "--timeout", "inf", "--", "true"], "finite number of seconds"),
        (["call", "echo", '{"text": NaN}', "--", "true"], "ERR_INVALID_INPUT"),
        (["call", "echo", '{"n": 1e999}', "--", "true"], "overflows to infinity"),
        (["call", "echo", "[" * 5000, "--", "true"], "deeper than 100"),
        (["call", "--url", "http://a/mcp", "echo", "--url", "http://b/mcp"], "--url given twice"),
    ],
)
def test_bad_invocations_are_one_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(argv, capsys)
    assert code != 0
    assert out == ""
    assert fragment in _one_line_error(err)


def test_console_script_exit_codes_and_no_traceback(everything_cmd: list[str], tmp_path: Path) -> None:
    bad = subprocess.run(
        [*TOOLBRIDGE, "call", "echo", "{oops", "--", *everything_cmd],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0
    assert bad.stdout == ""
    _one_line_error(bad.stderr)
    good = subprocess.run(
        [*TOOLBRIDGE, "call", "echo", '{"message": "from a shell"}', "--", *everything_cmd],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout == "Echo: from a shell\n"
    assert "Starting default" not in good.stdout + good.stderr
