"""A Telo application's targets run in order, each seeing the earlier ones' results as
`steps.NAME.result` (as Telo's boot runner does); Telo's bare-name targets; the mcp-server
module's kinds named precisely. Manifests are written the way Telo's docs and examples write
them, with offline models (a local OpenAI-compatible server) and a real MCP server."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telo_stanzas import everything_client

from subprocess_helpers import stderr_until
from toolbridge.cli import main
from toolbridge.manifest import check_manifest, load_manifest
from toolbridge.manifest._kinds_run import telo_truthy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from agent_fake_openai import FakeOpenAI, Reply, chunk, completion

UNSUPPORTED = "ERR_MANIFEST_UNSUPPORTED"

APP = """\
kind: Telo.Application
metadata: {{ name: relay, version: 1.0.0 }}
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  AiOpenai: oci://ghcr.io/telorun/ai-openai@0.15.3
  McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3
secrets:
  openaiApiKey: {{ env: TB_SEQ_KEY, type: string }}
variables:
  endpoint: {{ env: TB_SEQ_ENDPOINT, type: string }}
  greeting: {{ env: TB_SEQ_GREETING, type: string, default: hello }}
targets:
  - name: ask
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: !cel "variables.greeting" }} }}
  - name: summary
    invoke: !ref Summarizer
    inputs:
      prompt: !cel "steps.ask.result.content[0].text"
  - name: never
    when: !cel "size(steps.summary.result.text) == 0"
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: never }} }}
  - name: chat
    when: "${{{{ steps.summary.result.finishReason == 'stop' }}}}"
    invoke: !ref ChatStream
    inputs: {{ prompt: !cel "'again: ' + steps.summary.result.text" }}
  - name: relay
    invoke: !ref Call
    inputs:
      name: {tool}
      arguments: {{ message: !cel "steps.chat.result.text + ' / ' + variables.greeting" }}
  - {last}
---
kind: AiOpenai.OpenaiModel
metadata: {{ name: Gpt4o }}
model: gpt-4o-mini
apiKey: !cel "secrets.openaiApiKey"
baseUrl: !cel "variables.endpoint"
maxRetries: 0
---
kind: Ai.Text
metadata: {{ name: Summarizer }}
model: !ref Gpt4o
system: "Summarize in one sentence."
---
kind: Ai.TextStream
metadata: {{ name: ChatStream }}
model: !ref Gpt4o
---
{everything}"""


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _app(tmp_path: Path, js: str, tool: str = "echo", last: str = "List") -> Path:
    path = tmp_path / "relay.yaml"
    path.write_text(APP.format(everything=everything_client(js, listing=True), tool=tool, last=last))
    return path


def _replies(openai: FakeOpenAI) -> None:
    openai.replies.append(Reply(body=completion("Short.", usage=(9, 2))))
    openai.replies.append(
        Reply(
            chunks=[chunk({"content": "once"}), chunk({"content": " more"}), chunk({}, finish_reason="stop")]
        )
    )


def test_targets_run_in_order_with_earlier_results(
    tmp_path: Path,
    everything_js: str,
    openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TB_SEQ_KEY", "sk-seq-secret-1")
    monkeypatch.setenv("TB_SEQ_ENDPOINT", openai.base_url)
    path = _app(tmp_path, everything_js)
    assert [d.format() for d in check_manifest(path).diagnostics] == []
    _replies(openai)
    assert main(["run", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    steps = out["steps"]
    assert list(steps) == ["ask", "summary", "chat", "relay", "List"]  # in order; `never` was gated off
    assert out["skipped"] == ["never"]
    assert steps["ask"]["result"]["content"] == [{"type": "text", "text": "Echo: hello"}]
    assert steps["summary"]["result"]["text"] == "Short."
    assert steps["chat"]["result"]["text"] == "once more"  # a stream's result is its finish part
    assert steps["relay"]["result"]["content"][0]["text"] == "Echo: once more / hello"
    assert "echo" in [t["name"] for t in steps["List"]["result"]["tools"]]
    # Each model call got the earlier target's result as its prompt.
    assert openai.requests[0]["messages"][-1] == {"role": "user", "content": "Echo: hello"}
    assert openai.requests[1]["messages"][-1] == {"role": "user", "content": "again: Short."}

    # Without --json: each target announced on stderr, its output on stdout.
    _replies(openai)
    monkeypatch.setenv("TB_SEQ_GREETING", "hi there")
    assert main(["run", str(path)]) == 0
    captured = capsys.readouterr()
    assert [line for line in captured.err.splitlines() if line.startswith("target ")] == [
        "target ask",
        "target summary",
        "target chat",
        "target relay",
        "target List",
    ]
    lines = captured.out.splitlines()
    assert lines[:4] == ["Echo: hi there", "Short.", "once more", "Echo: once more / hi there"]
    assert "sk-seq-secret-1" not in captured.out + captured.err


def test_a_failed_target_ends_the_sequence(
    tmp_path: Path,
    everything_js: str,
    openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TB_SEQ_KEY", "sk-seq-secret-1")
    monkeypatch.setenv("TB_SEQ_ENDPOINT", openai.base_url)
    path = _app(tmp_path, everything_js, tool="no_such_tool")
    _replies(openai)
    assert main(["run", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert list(out["steps"]) == ["ask", "summary", "chat"]  # `List` after the failure never ran
    assert out["failed"]["target"] == "relay"
    assert out["failed"]["errorCode"].startswith("ERR_MCP_")
    _replies(openai)
    assert main(["run", str(path)]) == 1
    assert "toolbridge: target relay failed: ERR_MCP_" in capsys.readouterr().err


def test_one_target_alone(
    tmp_path: Path,
    everything_js: str,
    openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TB_SEQ_KEY", "sk-seq-secret-1")
    monkeypatch.setenv("TB_SEQ_ENDPOINT", openai.base_url)
    path = _app(tmp_path, everything_js)
    assert main(["run", str(path), "--target", "ask", "--json"]) == 0  # reads no `steps`: runs alone
    assert json.loads(capsys.readouterr().out)["content"][0]["text"] == "Echo: hello"
    assert main(["run", str(path), "--target", "relay"]) == 1
    err = capsys.readouterr().err
    assert "ERR_MANIFEST_TARGET" in err and "reads `steps`" in err
    assert main(["run", str(path), "--input", "x"]) == 1  # a prompt for which of the 6 targets?
    assert "choose it with --target NAME" in capsys.readouterr().err
    # The Python API: the whole sequence from an open manifest.
    manifest = load_manifest(path)
    assert [t.name for t in manifest.target_sequence()] == [
        "ask",
        "summary",
        "never",
        "chat",
        "relay",
        "List",
    ]
    assert [t.reads_steps for t in manifest.target_sequence()] == [False, True, True, True, True, False]


def test_a_when_that_is_not_a_boolean_is_read_as_telo_reads_it(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Telo skips a target whose `when` is false-y and runs it when true-y (this once failed the
    target with "`when` must give true or false")."""
    path = tmp_path / "app.yaml"
    path.write_text(
        f"""\
kind: Telo.Application
metadata: {{ name: gate }}
targets:
  - name: a
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: x }} }}
  - name: b
    when: !cel "steps.a.result.content[0].text"
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: y }} }}
  - name: z
    when: !cel "size(steps.a.result.content) - 1"
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: never }} }}
  - name: c
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: !cel "steps.a.result.nothing" }} }}
---
{everything_client(everything_js)}"""
    )
    assert main(["run", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert list(out["steps"]) == ["a", "b"]  # a non-empty string: true-y
    assert out["skipped"] == ["z"]  # 0: false-y
    assert out["failed"]["target"] == "c" and out["failed"]["errorCode"] == "ERR_MANIFEST_EXPRESSION"


@pytest.mark.parametrize(
    ("value", "runs"),
    [
        *[(False, False), (None, False), (0, False), (0.0, False), (float("nan"), False), ("", False)],
        *[(True, True), (1, True), (-2.5, True), ("false", True), ([], True), ({}, True)],
    ],
)
def test_telo_truthiness(value: object, runs: bool) -> None:
    assert telo_truthy(value) is runs


def test_steps_are_checked_statically(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(
        """\
kind: Telo.Application
metadata: { name: order }
secrets:
  token: { env: TB_SEQ_TOKEN, type: string }
targets:
  - name: first
    invoke: !ref T
    inputs: { prompt: !cel "steps.second.result.text" }
  - name: second
    when: !cel "steps.second.result.text == ''"
    invoke: !ref T
    inputs: { prompt: hi }
  - name: third
    invoke: !ref T
    inputs: { prompt: !cel "steps.first.result.text + secrets.token" }
  - name: fourth
    invoke: !ref T
    inputs: { prompt: !cel "steps.first.result.text + variables.missing" }
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: hi } ]
---
kind: Ai.Text
metadata: { name: T }
model: !ref M
system: !cel "steps.first.result.text"
"""
    )
    env = {"TB_SEQ_TOKEN": "x" * 8}
    found = [(d.code, d.line, d.message) for d in check_manifest(path, env=env).diagnostics]
    assert [(c, line) for c, line, _ in found] == [
        ("ERR_MANIFEST_EXPRESSION", 8),  # `steps.second`: not an earlier target
        ("ERR_MANIFEST_EXPRESSION", 10),  # its own result: not earlier either
        ("ERR_MANIFEST_EXPRESSION", 15),  # `secrets` beside `steps`
        ("ERR_MANIFEST_EXPRESSION", 18),  # an undeclared variable
        (UNSUPPORTED, 27),  # `steps` outside a target: one of Telo's scopes toolbridge lacks
    ]
    messages = {line: message for _, line, message in found}
    assert (
        "`steps.second` names no earlier target of targets[0] (targets run in order; earlier: none)"
        in messages[8]
    )
    assert "earlier: first" in messages[10]
    assert "`secrets` is not available here" in messages[15] and "when its target runs" in messages[15]
    assert "variable missing has no value" in messages[18]
    assert "in a `Telo.Application` target's `inputs` and `when`" in messages[27]
    # A `when` that is not a boolean is read as Telo reads it (3 is true-y), not refused.
    path.write_text(path.read_text().replace("  - name: fourth\n", "  - when: 3\n    name: fourth\n"))
    assert not [d for d in check_manifest(path, env=env).diagnostics if d.line == 16]


def test_bare_name_targets_and_mcp_server_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Telo runs `targets: [Name]` as references; the MCP server module's kinds, written
    `Mcp.Kind` without an import, are that module's (not a misspelt client kind)."""
    path = tmp_path / "app.yaml"
    path.write_text(
        """\
kind: Telo.Application
metadata: { name: bare }
targets: [ Say, { ref: Say, when: true } ]
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: one }, { text: two } ]
---
kind: Ai.Text
metadata: { name: Say }
model: !ref M
"""
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [("ERR_MANIFEST_INVALID_VALUE", 3)]
    assert "target 'Say' is listed twice" in report.diagnostics[0].message
    path.write_text(
        path.read_text().replace("targets: [ Say, { ref: Say, when: true } ]", "targets: [ Nope ]")
    )
    [dangling] = check_manifest(path).diagnostics
    assert (dangling.code, dangling.line, dangling.column) == ("ERR_MANIFEST_DANGLING_REF", 3, 12)
    path.write_text(path.read_text().replace("targets: [ Nope ]", "targets: [ M ]"))
    [wrong] = check_manifest(path).diagnostics
    assert wrong.code == "ERR_MANIFEST_REF_KIND"
    path.write_text(path.read_text().replace("targets: [ M ]", "targets: [ Say ]"))
    assert main(["run", str(path), "--input", "hi"]) == 0
    assert capsys.readouterr().out == "one\n"

    server = tmp_path / "server.yaml"
    server.write_text(
        """\
kind: Mcp.StdioServer
metadata: { name: Server }
tools: [ WeatherTools ]
---
kind: Mcp.Tools
metadata: { name: WeatherTools }
entries: [ ]
---
kind: Mcp.HttpEndpoint
metadata: { name: Web }
---
kind: McpClient.Resources
metadata: { name: R }
---
kind: Mcp.Prompts
metadata: { name: P }
---
kind: Telo.Application
metadata: { name: srv }
targets: [ Server ]
"""
    )
    found = check_manifest(server).diagnostics
    # Mcp.StdioServer, Mcp.Tools, Mcp.HttpEndpoint, Mcp.Resources and Mcp.Prompts are served now
    # (they were refused): checked as such (a bundle without entries is valid)
    assert [(d.code, d.line) for d in found] == [
        ("ERR_MANIFEST_MISSING_FIELD", 1),  # serverInfo
        ("ERR_MANIFEST_REF_FORM", 3),  # a bare name, refused by Telo too
        ("ERR_MANIFEST_MISSING_FIELD", 9),  # the endpoint's serverInfo
    ]


_NAMES = st.sampled_from(["a", "b", "c", "Say", "Nope"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), _NAMES), st.booleans()),
        min_size=1,
        max_size=5,
    )
)
def test_steps_references_need_an_earlier_target(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, str | None, bool]]
) -> None:
    """Exact oracle: a target's `steps.N` is an error iff no target before it is named N; a
    target name listed twice is an error at the second; nothing else is reported."""
    lines = ["kind: Telo.Application", "metadata: { name: p }", "targets:"]
    expected: list[tuple[str, int]] = []
    seen: list[str] = []
    for name, step, in_when in entries:
        start = len(lines) + 1  # the entry's line: where a repeated name is reported
        lines.append(f"  - name: {name}")
        lines.append("    invoke: !ref Say")
        if step is None:
            lines.append("    inputs: { prompt: hi }")
        elif in_when:
            lines.append(f"    when: !cel \"steps.{step}.result.text == 'x'\"")
            cel_line = len(lines)
            lines.append("    inputs: { prompt: hi }")
        else:
            lines.append(f'    inputs: {{ prompt: !cel "steps.{step}.result.text" }}')
            cel_line = len(lines)
        if step is not None and step not in seen:
            expected.append(("ERR_MANIFEST_EXPRESSION", cel_line))
        if name in seen:
            expected.append(("ERR_MANIFEST_INVALID_VALUE", start))
        seen.append(name)
    lines += ["---", "kind: Ai.ScriptedModel", "metadata: { name: M }", "turns: [ { text: hi } ]"]
    lines += ["---", "kind: Ai.Text", "metadata: { name: Say }", "model: !ref M"]
    path = tmp_path_factory.mktemp("seq") / "app.yaml"
    path.write_text("\n".join(lines) + "\n")
    found = [(d.code, d.line) for d in check_manifest(path).diagnostics]
    assert sorted(found) == sorted(expected)


def test_an_agent_stream_in_the_sequence(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `Ai.AgentStream` target streams and calls tools; its finish is the next one's input."""
    path = tmp_path / "agent.yaml"
    path.write_text(
        f"""\
kind: Telo.Application
metadata: {{ name: agents }}
targets:
  - name: author
    invoke: !ref Author
    inputs: {{ prompt: "add 2 and 40" }}
  - name: report
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: !cel "steps.author.result.text" }} }}
---
kind: Ai.ScriptedModel
metadata: {{ name: M }}
turns:
  - toolCalls: [ {{ name: ev_get-sum, arguments: {{ a: 2, b: 40 }} }} ]
  - text: "It is 42."
---
kind: McpClient.StdioClient
metadata: {{ name: Everything }}
command: node
args: ["{everything_js}", "stdio"]
---
kind: AiMcp.ToolProvider
metadata: {{ name: Ev }}
client: !ref Everything
---
kind: Ai.AgentStream
metadata: {{ name: Author }}
model: !ref M
toolProviders: [ {{ provider: !ref Ev, prefix: ev_, include: [get-sum] }} ]
---
kind: McpClient.ToolsCall
metadata: {{ name: Call }}
client: !ref Everything
"""
    )
    assert main(["run", str(path), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps["author"]["result"]["text"] == "It is 42."
    assert steps["report"]["result"]["content"][0]["text"] == "Echo: It is 42."
    assert main(["run", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["It is 42.", "Echo: It is 42."]
    assert "ev_get-sum" in captured.err  # the agent's tool call, shown as it happened


def test_ctrl_c_cancels_the_sequence(
    tmp_path: Path, everything_js: str, node: str, request: pytest.FixtureRequest
) -> None:
    """SIGINT while the second target runs: exit 130, the third never starts, no server left."""
    import signal
    import subprocess
    import time

    path = tmp_path / "slow.yaml"
    path.write_text(
        f"""\
kind: Telo.Application
metadata: {{ name: slow }}
targets:
  - name: first
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: hi }} }}
  - name: second
    invoke: !ref Call
    inputs: {{ name: trigger-long-running-operation, arguments: {{ duration: 30, steps: 30 }} }}
  - name: third
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: !cel "steps.second.result.content[0].text" }} }}
---
kind: McpClient.StdioClient
metadata: {{ name: Everything }}
command: {node}
args: ["{everything_js}", "stdio"]
shutdownGraceMs: 2000
---
kind: McpClient.ToolsCall
metadata: {{ name: Call }}
client: !ref Everything
"""
    )
    command = [sys.executable, "-c", "import sys, toolbridge.cli as c; sys.exit(c.main())", "run", str(path)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = stderr_until(proc, "target second", "the second target's start")
        time.sleep(0.5)  # the call is in flight on the server now
        helpers = request.config.pluginmanager.get_plugin(
            str(Path(__file__).resolve().parents[1] / "conftest.py")
        )
        servers = [pid for pid, cmd in helpers.descendants_of_this_process() if "server-everything" in cmd]
        assert servers, f"the server should be running: {seen!r}"
        proc.send_signal(signal.SIGINT)
        raw_out, raw_err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = seen + raw_err.decode(errors="replace")
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert "target third" not in err
    assert raw_out.decode() == "Echo: hi\n"

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().decode(errors="replace").rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in servers), "a server process outlived the run"


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(_TEXT, st.sampled_from(["Say", "M", "Nope", "_x-1", "1a", "a.b", "<Name>"])))
def test_a_bare_target_is_a_name_or_one_finding(tmp_path_factory: pytest.TempPathFactory, value: str) -> None:
    """Exact oracle: a document's name runs (no finding; the model is not runnable: wrong kind),
    another name dangles, anything else is not a name — one finding each, at the entry."""
    import re

    from hypothesis import assume

    assume("${{" not in value)
    path = tmp_path_factory.mktemp("bare") / "app.yaml"
    path.write_text(
        "kind: Telo.Application\nmetadata: { name: p }\n"
        f"targets: [ {json.dumps(value)} ]\n"
        "---\nkind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: hi } ]\n"
        "---\nkind: Ai.Text\nmetadata: { name: Say }\nmodel: !ref M\n"
    )
    found = [(d.code, d.line, d.column) for d in check_manifest(path).diagnostics]
    if value == "Say":
        expected = []
    elif value == "M":
        expected = [("ERR_MANIFEST_REF_KIND", 3, 12)]
    elif value == "p":  # the application itself: not runnable, and a cycle
        expected = [("ERR_MANIFEST_REF_KIND", 3, 12), ("ERR_MANIFEST_REF_CYCLE", 3, 12)]
    elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", value):
        expected = [("ERR_MANIFEST_DANGLING_REF", 3, 12)]
    else:
        expected = [("ERR_MANIFEST_INVALID_VALUE", 3, 12)]
    assert found == expected
