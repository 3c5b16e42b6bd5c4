"""Telo applications: aliases, targets, Ai.Text / TextStream / AgentStream, ToolsCall / ToolsList,
Ai.Tools entries, `!cel`, the HTTP client's protocolVersion and sessionProvider, and the precise
refusal of Telo's other modules. Manifests are written the way Telo's docs write them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolbridge.cli import main
from toolbridge.manifest import check_manifest, load_manifest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from agent_fake_openai import FakeOpenAI, Reply, chunk, completion

ROOT = Path(__file__).resolve().parents[2]
USAGE0 = {
    "inputTokens": 0,
    "outputTokens": 0,
    "totalTokens": 0,
    "requests": 0,
    "cacheReadTokens": 0,
    "cacheWriteTokens": 0,
}


def write(tmp_path: Path, text: str, name: str = "telo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def findings(path: Path, **kwargs: object) -> list[tuple[str, int, int]]:
    return [(d.code, d.line, d.column) for d in check_manifest(path, **kwargs).diagnostics]  # type: ignore[arg-type]


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


APP = """\
kind: Telo.Application
metadata: { name: summarizer, version: 1.0.0 }
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  AiOpenai: oci://ghcr.io/telorun/ai-openai@0.15.3
secrets:
  openaiApiKey: { env: TB_TEST_OPENAI_KEY, type: string }
variables:
  modelId: { env: TB_TEST_MODEL, type: string, default: gpt-4o-mini }
  endpoint: { env: TB_TEST_ENDPOINT, type: string }
---
kind: AiOpenai.OpenaiModel
metadata: { name: Gpt4o }
model: !cel "variables.modelId"
apiKey: !cel "secrets.openaiApiKey"
baseUrl: !cel "variables.endpoint"
maxRetries: 0
---
kind: Ai.Text
metadata: { name: Summarizer }
model: !ref Gpt4o
system: "Summarize in one sentence."
options:
  temperature: 0.2
---
kind: Ai.TextStream
metadata: { name: ChatStream }
model: !ref Gpt4o
system: "You are a helpful assistant."
"""


def test_text_target_over_openai(
    tmp_path: Path, openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TB_TEST_OPENAI_KEY", "sk-telo-secret-123")
    monkeypatch.setenv("TB_TEST_ENDPOINT", openai.base_url)
    path = write(tmp_path, APP)
    assert findings(path) == []
    openai.replies.append(Reply(body=completion("Short.", usage=(12, 3))))
    assert main(["run", str(path), "--target", "Summarizer", "--input", "A long text", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == {
        "text": "Short.",
        "usage": {**USAGE0, "inputTokens": 12, "outputTokens": 3, "totalTokens": 15, "requests": 1},
        "finishReason": "stop",
    }
    [request] = openai.requests
    assert request["model"] == "gpt-4o-mini"  # the variable's default
    assert request["temperature"] == 0.2
    assert request["messages"][0] == {"role": "system", "content": "Summarize in one sentence."}
    assert openai.auth_headers == ["Bearer sk-telo-secret-123"]  # the secret reached only the model
    from toolbridge.redact import redact

    assert "sk-telo-secret-123" not in redact("key sk-telo-secret-123 leaked")  # registered for redaction


def test_text_stream_target_prints_parts(
    tmp_path: Path, openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TB_TEST_OPENAI_KEY", "sk-x")
    monkeypatch.setenv("TB_TEST_ENDPOINT", openai.base_url)
    path = write(tmp_path, APP)
    stream = [
        chunk({"content": "h"}),
        chunk({"content": "i"}),
        chunk({}, finish_reason="stop"),
        chunk({}, usage=(5, 2)),
    ]
    openai.replies.append(Reply(chunks=stream))
    assert main(["run", str(path), "--target", "ChatStream", "--input", "hi", "--json"]) == 0
    parts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert parts == [
        {"type": "text-delta", "delta": "h"},
        {"type": "text-delta", "delta": "i"},
        {
            "type": "finish",
            "text": "hi",
            "usage": {**USAGE0, "inputTokens": 5, "outputTokens": 2, "totalTokens": 7, "requests": 1},
            "finishReason": "stop",
        },
    ]
    openai.replies.append(Reply(chunks=stream))
    assert main(["run", str(path), "--target", "ChatStream", "--input", "hi"]) == 0
    assert capsys.readouterr().out == "hi\n"


def test_stream_failure_is_one_error_part(
    tmp_path: Path, openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TB_TEST_OPENAI_KEY", "sk-x")
    monkeypatch.setenv("TB_TEST_ENDPOINT", openai.base_url)
    path = write(tmp_path, APP)
    openai.replies.append(Reply(400, {"error": {"message": "bad request"}}))
    assert main(["run", str(path), "--target", "ChatStream", "--input", "hi", "--json"]) == 1
    [part] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert part["type"] == "error" and part["code"].startswith("ERR_MODEL")


def test_missing_declared_values_are_found_statically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TB_TEST_OPENAI_KEY", "OPENAI_API_KEY", "TB_TEST_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    path = write(tmp_path, APP)
    assert findings(path) == [
        ("ERR_MANIFEST_SECRET_UNRESOLVED", 15, 9),
        ("ERR_MANIFEST_EXPRESSION", 16, 10),
    ]
    [_, variable] = check_manifest(path).diagnostics
    assert "variable endpoint has no value (set $TB_TEST_ENDPOINT)" in variable.message


def test_several_targets_need_a_choice_and_inputs_come_from_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """\
kind: Telo.Application
metadata: { name: two }
targets:
  - !ref Summarize
  - name: greet
    invoke: !ref Summarize
    inputs: { prompt: "hello", system: "be brief" }
---
kind: Ai.ScriptedModel
metadata: { name: Echo }
turns: [ { text: one }, { text: two } ]
---
kind: Ai.Text
metadata: { name: Summarize }
model: !ref Echo
""",
    )
    # Without --target the targets run in order, as Telo boots the application.
    assert main(["run", str(path)]) == 1
    assert "target Summarize failed: ERR_INVALID_INPUT" in capsys.readouterr().err  # no prompt
    assert main(["run", str(path), "--input", "x"]) == 1
    assert "choose it with --target NAME" in capsys.readouterr().err
    assert main(["run", str(path), "--target", "greet"]) == 0
    assert capsys.readouterr().out == "one\n"
    assert main(["run", str(path), "--target", "Summarize"]) == 1
    assert "ERR_INVALID_INPUT" in capsys.readouterr().err  # no prompt anywhere
    assert main(["run", str(path), "--target", "Nope", "--input", "x"]) == 1
    assert "ERR_MANIFEST_TARGET" in capsys.readouterr().err


MCP = """\
kind: Telo.Application
metadata: {{ name: my-mcp-app, version: 1.0.0 }}
imports:
  McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3
targets:
  - name: add
    invoke: !ref CallTool
    inputs: {{ name: get-sum, arguments: {{ a: 2, b: 40 }} }}
  - !ref ListTools
---
kind: McpClient.StdioClient
metadata: {{ name: Everything }}
command: node
args: ["{js}", "stdio"]
clientInfo: {{ name: my-mcp-app, version: 1.0.0 }}
---
kind: McpClient.ToolsCall
metadata: {{ name: CallTool }}
client: !ref Everything
---
kind: McpClient.ToolsList
metadata: {{ name: ListTools }}
client: !ref Everything
"""


def test_tools_call_and_tools_list_targets(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, MCP.format(js=everything_js))
    assert findings(path) == []
    assert main(["run", str(path), "--target", "add", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "content": [{"type": "text", "text": "The sum of 2 and 40 is 42."}],
        "isError": False,
    }
    assert main(["run", str(path), "--target", "ListTools", "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)["tools"]}
    assert tools["echo"]["inputSchema"]["properties"]["message"]["type"] == "string"
    assert main(["run", str(path), "--target", "ListTools"]) == 0
    assert "echo: Echoes back the input string" in capsys.readouterr().out.splitlines()
    # --inputs replaces the target's inputs key by key; an image part prints camelCase keys.
    args = ["run", str(path), "--target", "CallTool", "--inputs", '{"name": "get-tiny-image"}', "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert '"mimeType": "image/png"' in out
    bad = ["run", str(path), "--target", "CallTool", "--inputs", '["x"]']
    assert main(bad) == 1
    assert "--inputs must be a JSON object" in capsys.readouterr().err


TOOLS = """\
kind: Telo.Application
metadata: {{ name: assistant }}
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  AiMcp: oci://ghcr.io/telorun/ai-mcp@0.3.0
  McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3
targets:
  - name: ask
    invoke: !ref Assistant
    inputs: {{ prompt: "What is 2 + 40? Then summarize." }}
---
kind: Ai.ScriptedModel
metadata: {{ name: Script }}
turns:
  - toolCalls:
      - {{ name: add, arguments: {{ a: 2, b: 40 }} }}
      - {{ name: summarize, arguments: {{ text: forty-two }} }}
      - {{ name: add, arguments: {{ a: "two", b: 40 }} }}
      - {{ name: ev_get-tiny-image }}
  - text: "It is 42."
---
kind: Ai.ScriptedModel
metadata: {{ name: Inner }}
turns: [ {{ text: "a short summary" }} ]
---
kind: Ai.Text
metadata: {{ name: Summarizer }}
model: !ref Inner
---
kind: McpClient.StdioClient
metadata: {{ name: Everything }}
command: node
args: ["{js}", "stdio"]
---
kind: McpClient.ToolsCall
metadata: {{ name: CallTool }}
client: !ref Everything
---
kind: AiMcp.ToolProvider
metadata: {{ name: EverythingTools }}
client: !ref Everything
---
kind: Ai.Tools
metadata: {{ name: LocalTools }}
functions: ["manifest_native_tools:add"]
tools:
  - name: add_numbers
    description: Add two numbers.
    tool: !ref CallTool
    parameters:
      type: object
      additionalProperties: false
      required: [a, b]
      properties: {{ a: {{ type: number }}, b: {{ type: number }} }}
    inputs:
      name: get-sum
      arguments: !cel "{{'a': arguments.a, 'b': arguments.b}}"
    result: !cel "'sum says: ' + result.content[0].text"
  - name: summarize
    description: Summarize a text.
    tool: !ref Summarizer
    parameters:
      type: object
      properties: {{ text: {{ type: string }} }}
    inputs:
      prompt: !cel "'Summarize: ' + arguments.text"
---
kind: Ai.AgentStream
metadata: {{ name: Assistant }}
model: !ref Script
toolProviders:
  - provider: !ref LocalTools
    include: [add_numbers, summarize]
  - provider: !ref EverythingTools
    prefix: ev_
    include: [get-tiny-image]
"""


def test_agent_stream_with_telo_tools(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = TOOLS.format(js=everything_js).replace("name: add, arguments", "name: add_numbers, arguments")
    path = write(tmp_path, text)
    assert findings(path) == []
    assert main(["run", str(path), "--json"]) == 3  # finished, but one tool call failed
    parts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["type"] for p in parts[:4]] == ["tool-call"] * 4
    results = {p["toolCallId"]: p for p in parts if p["type"] == "tool-result"}
    assert results["call_0_0"]["content"] == [
        {"type": "text", "text": "sum says: The sum of 2 and 40 is 42."}
    ]
    assert results["call_0_1"]["content"] == [{"type": "text", "text": "a short summary"}]
    assert results["call_0_2"]["error"] is True and "invalid arguments at a" in json.dumps(
        results["call_0_2"]
    )
    [image] = [p for p in results["call_0_3"]["content"] if p["type"] == "image"]
    assert image["mediaType"] == "image/png" and "media_type" not in image
    assert parts[-2] == {"type": "text-delta", "delta": "It is 42."}
    finish = parts[-1]
    assert finish["type"] == "finish" and finish["text"] == "It is 42."
    assert finish["usage"] == {**USAGE0, "requests": 2}
    assert "image/png" in [p.get("mediaType") for p in finish["steps"][0]["toolResults"][3]["content"]]
    # --telo: as Telo runs it, the one target is a sequence of one ({steps: ...}), and the agent's
    # answer is the run's outcome though one of its tool calls failed (exit 0, not 3).
    assert main(["run", str(path), "--json", "--telo"]) == 0
    telo = json.loads(capsys.readouterr().out)
    assert list(telo) == ["steps"] and list(telo["steps"]) == ["ask"]
    assert telo["steps"]["ask"]["result"]["text"] == "It is 42."
    assert main(["run", str(path), "--telo"]) == 0
    captured = capsys.readouterr()
    assert "It is 42." in captured.out and "target ask" in captured.err


def test_run_json_is_camel_case_everywhere(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plain `Ai.Agent` path: image parts print `mediaType`, usage `inputTokens`."""
    path = write(
        tmp_path,
        f"""\
kind: Ai.ScriptedModel
metadata: {{ name: Script }}
turns:
  - toolCalls: [ {{ name: ev_get-tiny-image }} ]
  - text: done
---
kind: Mcp.StdioClient
metadata: {{ name: Everything }}
command: node
args: ["{everything_js}", "stdio"]
---
kind: AiMcp.ToolProvider
metadata: {{ name: Tools }}
client: !ref Everything
---
kind: Ai.Agent
metadata: {{ name: Agent }}
model: !ref Script
toolProviders: [ {{ provider: !ref Tools, prefix: ev_ }} ]
""",
    )
    assert main(["run", str(path), "--input", "show me", "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    assert "_" not in "".join(_keys(result)), sorted(k for k in _keys(result) if "_" in k)
    assert result["usage"]["inputTokens"] == 0 and result["usage"]["requests"] == 2
    assert "image/png" in [p.get("mediaType") for p in result["steps"][0]["toolResults"][0]["content"]]


def _keys(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def test_unsupported_modules_and_tags_are_one_precise_finding(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
kind: Telo.Application
metadata: { name: app }
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  Http: oci://ghcr.io/telorun/http-server@0.26.0
  Mcp: ../../mcp-server
  AiEcho: ./__fixtures__/ai-echo.yaml
targets: [ !ref Flow ]
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: x } ]
---
kind: Http.Api
metadata: { name: Api }
routes: [ { handler: !ref Flow, inputs: { prompt: !cel "request.body.prompt" }, q: !sql "select 1" } ]
---
kind: Run.Sequence
metadata: { name: Flow }
steps: [ { invoke: !ref Missing, inputs: { x: "${{ steps.a.result }}" } } ]
---
kind: Mcp.Resources
metadata: { name: Served }
---
kind: AiEcho.EchoModel
metadata: { name: Echo }
---
kind: Ai.Model
metadata: { name: Draw }
model: !ref M
---
kind: Ai.Text
metadata: { name: T }
model: !ref Echo
system: !include-text ./system.txt
""",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_UNSUPPORTED", 14),
        ("ERR_MANIFEST_UNDEFINED_KIND", 18),
        # line 22's Mcp.Resources (of the server module here) is served now: no finding
        ("ERR_MANIFEST_UNSUPPORTED", 25),
        ("ERR_MANIFEST_UNSUPPORTED", 28),
        ("ERR_MANIFEST_UNSUPPORTED", 35),
    ]
    messages = [d.message for d in report.diagnostics]
    # toolbridge implements http-server's Http.Server (to mount an Mcp.HttpEndpoint), not Http.Api
    assert "kind Http.Api of Telo's module http-server" in messages[0]
    assert "is a Telo kind toolbridge does not implement" in messages[0]
    # Run is not imported: Telo refuses the kind as UNDEFINED_KIND (this once passed as "module Run")
    assert "Run.Sequence: the application imports no module as Run" in messages[1]
    assert "add `Run: oci://ghcr.io/telorun/run@VERSION`" in messages[1]
    assert "the library ./__fixtures__/ai-echo.yaml (imported as AiEcho)" in messages[2]
    assert "Ai.Model (the abstract model contract" in messages[3]
    assert "is a Telo kind toolbridge does not implement" in messages[3]
    assert "tag '!include-text' is not supported" in messages[4]
    assert not any("names no document" in m for m in messages)
    assert not any(d.code == "ERR_MANIFEST_REF_KIND" for d in report.diagnostics)


def test_mcp_client_alias_and_misspelt_kinds(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
kind: McpClient.StdioClient
metadata: { name: Local }
command: node
shutdownGraceMs: 100
---
kind: Ai.Agentt
metadata: { name: A }
""",
    )
    [d] = check_manifest(path).diagnostics
    assert (d.code, d.line) == ("ERR_MANIFEST_UNKNOWN_KIND", 6) and "did you mean Ai.Agent?" in d.message
    assert (
        load_manifest(write(tmp_path, path.read_text().split("---")[0], "one.yaml"))
        .analysis.docs["Local"]
        .kind
        == "Mcp.StdioClient"
    )


CEL_BAD = """\
kind: Telo.Application
metadata: { name: app }
secrets:
  key: { env: TB_TEST_CEL_KEY }
targets: [ { name: t, invoke: !ref T, inputs: { prompt: !cel "variables.p" } } ]
---
kind: AiOpenai.OpenaiModel
metadata: { name: M }
model: !cel "1 +"
apiKey: !cel "request.body.key"
baseUrl: !cel "secrets.key"
---
kind: Ai.Text
metadata: { name: T }
model: !ref M
system: !cel "secrets.key + '!'"
options: { temperature: !cel "0.25 * 2.0" }
---
kind: Ai.Tools
metadata: { name: Tl }
tools:
  - tool: !ref T
    parameters: { type: object, additionalProperties: false, properties: { a: { type: string } } }
    inputs: { prompt: !cel "arguments.b", system: !cel "secrets.key" }
    result: !cel "result.text +"
  - tool: !ref T
    name: T
    parameters: { type: objectt }
  - tool: !ref T
    name: Loop
    parameters: { type: object, properties: { a: { $ref: "#/properties/a" } } }
"""


def test_cel_static_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_TEST_CEL_KEY", "sk-cel-SECRET-9")
    path = write(tmp_path, CEL_BAD)
    report = check_manifest(path)
    assert [(d.code, d.line, d.column) for d in report.diagnostics] == [
        ("ERR_MANIFEST_EXPRESSION", 5, 57),  # a target's input reads an undeclared variable
        ("ERR_MANIFEST_EXPRESSION", 9, 8),  # syntax
        ("ERR_MANIFEST_UNSUPPORTED", 10, 9),  # Telo's `request` (an HTTP handler's) at load time
        ("ERR_MANIFEST_SECRET_PLACEMENT", 16, 9),  # a secret through CEL into a prompt
        ("ERR_MANIFEST_EXPRESSION", 24, 23),  # arguments.b is no parameter
        ("ERR_MANIFEST_EXPRESSION", 24, 51),  # secrets at run time
        ("ERR_MANIFEST_EXPRESSION", 25, 13),  # syntax
        ("ERR_MANIFEST_INVALID_VALUE", 26, 5),  # two tools named T
        ("ERR_MANIFEST_INVALID_VALUE", 28, 25),  # not a JSON Schema
        ("ERR_MANIFEST_INVALID_VALUE", 31, 17),  # a $ref loop
    ]
    assert "sk-cel-SECRET-9" not in json.dumps(report.to_dict())
    assert "variable p has no value" in report.diagnostics[0].message
    assert "Telo's `request`" in report.diagnostics[2].message
    fixed = (
        CEL_BAD.split("---\nkind: Ai.Tools")[0]
        .replace('!cel "1 +"', "gpt-4o")
        .replace('"request.body.key"', '"secrets.key"')
    )
    fixed = fixed.replace(" + '!'", "").replace("system: !cel", "# system: !cel")
    fixed = fixed.replace(
        'targets: [ { name: t, invoke: !ref T, inputs: { prompt: !cel "variables.p" } } ]\n', ""
    )
    manifest = load_manifest(write(tmp_path, fixed, "fixed.yaml"))
    assert manifest.analysis.docs["T"].model.options == {"temperature": 0.5}  # type: ignore[attr-defined]


async def test_cel_runtime_failure_is_a_tool_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
kind: Ai.ScriptedModel
metadata: { name: Script }
turns:
  - toolCalls: [ { name: shout, arguments: { n: 3 } } ]
  - text: done
---
kind: Ai.ScriptedModel
metadata: { name: Inner }
turns: [ { text: x } ]
---
kind: Ai.Text
metadata: { name: T }
model: !ref Inner
---
kind: Ai.Tools
metadata: { name: Tl }
tools:
  - name: shout
    tool: !ref T
    parameters: { type: object }
    inputs: { prompt: !cel "arguments.n + '!'" }
---
kind: Ai.Agent
metadata: { name: A }
model: !ref Script
toolProviders: [ { provider: !ref Tl } ]
""",
    )
    async with load_manifest(path).open() as live:
        result = await (await live.agent()).run("go")
    [record] = result.steps[0].tool_results
    assert record.error and record.error_code == "ERR_MANIFEST_EXPRESSION"
    assert "cannot evaluate" in record.content


async def test_http_client_protocol_version(tmp_path: Path, everything_http: str) -> None:
    path = write(
        tmp_path,
        f"""\
kind: McpClient.HttpClient
metadata: {{ name: Legacy }}
url: "{everything_http}"
protocolVersion: "2024-11-05"
---
kind: McpClient.ToolsCall
metadata: {{ name: Echo }}
client: !ref Legacy
""",
    )
    async with load_manifest(path).open() as live:
        client = await live.build("Legacy")
        result = await (await live.runnable("Echo")).invoke({"name": "echo", "arguments": {"message": "hi"}})
        assert client.protocol_version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
    assert result["content"] == [{"type": "text", "text": "Echo: hi"}]
    bad = write(tmp_path, path.read_text().replace('"2024-11-05"', '"1999-01-01"'), "bad.yaml")
    assert findings(bad) == [("ERR_MANIFEST_INVALID_VALUE", 4, 18)]


async def test_http_client_session_provider(
    tmp_path: Path, everything_http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import manifest_session

    from toolbridge.errors import SessionInvalidError

    monkeypatch.setenv("TB_TEST_MCP_URL", everything_http)
    manifest_session.CALLS.clear()
    path = write(
        tmp_path,
        f"""\
kind: Mcp.SessionProvider
metadata: {{ name: VaultSession }}
function: manifest_session:provide
---
kind: McpClient.HttpClient
metadata: {{ name: RegistryMcp }}
url: "{everything_http}"
sessionProvider: !ref VaultSession
protocolVersion: "2025-06-18"
---
kind: McpClient.ToolsCall
metadata: {{ name: Call }}
client: !ref RegistryMcp
---
kind: McpClient.ToolsList
metadata: {{ name: List }}
client: !ref RegistryMcp
""",
    )
    async with load_manifest(path).open() as live:
        listed = await (await live.runnable("List")).invoke({})
        called = await (await live.runnable("Call")).invoke(
            {"name": "get-sum", "arguments": {"a": 1, "b": 2}}
        )
    assert "echo" in {t["name"] for t in listed["tools"]}
    assert called["content"][0]["text"] == "The sum of 1 and 2 is 3."
    assert len(manifest_session.CALLS) >= 2 and len(set(manifest_session.CALLS)) == 1  # asked every time

    stale = write(
        tmp_path, path.read_text().replace("manifest_session:provide", "manifest_session:stale"), "s.yaml"
    )
    async with load_manifest(stale).open() as live:
        with pytest.raises(SessionInvalidError):
            await (await live.runnable("List")).invoke({})


def test_session_provider_must_be_a_ref(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "kind: McpClient.HttpClient\nmetadata: { name: R }\nurl: http://127.0.0.1:9/mcp\n"
        "sessionProvider: RegistryVaultSession\n",
    )
    assert findings(path) == [("ERR_MANIFEST_REF_FORM", 4, 18)]


def test_the_docs_telo_example_checks_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/manifests.md's Telo application, as written (its server path made absolute)."""
    import re

    text = (ROOT / "docs" / "manifests.md").read_text()
    block = re.search(r"```yaml\n(kind: Telo\.Application\n.*?)```", text, re.S)
    assert block is not None
    relative = "../tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    assert relative in block.group(1)
    path = write(tmp_path, block.group(1).replace(relative, everything_js), "weather.yaml")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert findings(path) == [("ERR_MANIFEST_SECRET_UNRESOLVED", 20, 9)]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doc")
    assert findings(path) == []
    assert main(["run", str(path), "--target", "add"]) == 0
    assert capsys.readouterr().out == "The sum of 2 and 40 is 42.\n"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
@example("A\n")  # found in CI: a dotted path with a trailing newline was taken as a path
def test_cel_checker_never_crashes(expr: str) -> None:
    """Any text as a `!cel` expression: a set of variables or one `CelError`, nothing else."""
    from toolbridge.manifest._cel import CelError, evaluate, variables_of

    try:
        variables_of(expr)
    except CelError as exc:
        assert exc.message and "\n" not in exc.message
    try:
        evaluate(expr, {"arguments": {"a": 1, "s": "x"}, "result": [1, 2]})
    except CelError as exc:
        assert exc.message and "\n" not in exc.message


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Z][A-Za-z0-9]{0,8}", fullmatch=True), st.text(max_size=60), max_size=4
    ),
    st.text(max_size=40),
)
def test_kind_resolution_never_crashes(imports: dict[str, str], kind: str) -> None:
    from toolbridge.manifest._kinds_run import ALL_KINDS
    from toolbridge.manifest._telo import KindResolver

    resolution = KindResolver(ALL_KINDS, imports).resolve(kind)
    if resolution.kind is None:
        assert resolution.code in ("ERR_MANIFEST_UNSUPPORTED", "ERR_MANIFEST_UNKNOWN_KIND")
        assert "\n" not in resolution.message or "\n" in kind
    else:
        assert resolution.kind in ALL_KINDS


def test_long_and_nested_expressions_are_refused() -> None:
    from toolbridge.manifest._cel import CelError, variables_of

    with pytest.raises(CelError, match="at most 2048"):
        variables_of("a" * 3000)
    with pytest.raises(CelError, match="comprehension"):
        variables_of("x.map(a, x.map(b, x.map(c, a * b * c)))")


def test_only_agents_run_under_a_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        """\
kind: Runtime
metadata: { name: Policy }
permissions: { allow: ["model:scripted"] }
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: hi } ]
---
kind: Ai.AgentStream
metadata: { name: Streamer }
model: !ref M
""",
    )
    assert main(["run", str(path), "--input", "go"]) == 1
    err = capsys.readouterr().err
    assert "ERR_MANIFEST_TARGET" in err and "outside the manifest's Runtime Policy" in err


def test_inline_expression_form_is_cel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Telo's `"${{ expr }}"` (the whole string) is the same CEL as `!cel "expr"`."""
    monkeypatch.setenv("TB_TEST_INLINE", "sk-inline-4242")
    path = write(
        tmp_path,
        """\
kind: Telo.Application
metadata: { name: a }
secrets:
  key: { env: TB_TEST_INLINE }
variables:
  modelId: { type: string, default: gpt-4o-mini }
---
kind: AiOpenai.OpenaiModel
metadata: { name: M }
model: "${{ variables.modelId }}"
apiKey: "${{ 'Bearer ' + secrets.key }}"
baseUrl: "${{ resources.Env.url }}"
""",
    )
    assert findings(path) == [("ERR_MANIFEST_UNSUPPORTED", 12, 10)]  # Telo's `resources`
    fixed = write(tmp_path, path.read_text().replace('baseUrl: "${{ resources.Env.url }}"\n', ""), "ok.yaml")
    model = load_manifest(fixed).analysis.docs["M"].model
    assert model.model == "gpt-4o-mini"  # type: ignore[attr-defined]
    assert str(model.api_key) == "***" and model.api_key.reveal() == "Bearer sk-inline-4242"  # type: ignore[attr-defined]


def test_untrusted_text_is_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model's text with a terminal escape sequence prints escaped; `--json` keeps it exact."""
    path = write(
        tmp_path,
        'kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: "red \\u001b[31mtext" } ]\n---\n'
        "kind: Ai.TextStream\nmetadata: { name: S }\nmodel: !ref M\n",
    )
    assert main(["run", str(path), "--input", "x"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mtext" in out
    assert main(["run", str(path), "--input", "x", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["delta"] == "red \x1b[31mtext"
