"""Manifests with `AiAnthropic.AnthropicModel` and `AiGoogle.GeminiModel`: checked, then run on loopback."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fake_http import FakeApi, Reply

from toolbridge.cli import main
from toolbridge.manifest import check_manifest

SECRET_A = "sk-ant-MANIFEST-SECRET-1"
SECRET_G = "AIza-MANIFEST-SECRET-2"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every secret of the manifest must resolve (unresolved ones are errors), so both are set."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_A)
    monkeypatch.setenv("GEMINI_API_KEY", SECRET_G)


ENV = {"ANTHROPIC_API_KEY": SECRET_A, "GEMINI_API_KEY": SECRET_G}


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with FakeApi() as fake:
        yield fake


def manifest(tmp_path: Path, url: str, node: str, everything_js: str) -> Path:
    text = f"""
kind: AiAnthropic.AnthropicModel
metadata: {{ name: Claude }}
model: claude-test
apiKey: "${{{{ secrets.anthropicApiKey }}}}"
baseUrl: {url}
maxRetries: 1
promptCaching: false
options: {{ maxTokens: 256 }}
prices:
  inputPerMillionMicros: 3000000
  outputPerMillionMicros: 15000000
  cacheReadPerMillionMicros: 300000
---
kind: AiGoogle.GeminiModel
metadata: {{ name: Gemini }}
model: gemini-test
apiKey: "${{{{ secrets.geminiApiKey }}}}"
baseUrl: {url}
options: {{ temperature: 0 }}
---
kind: Mcp.StdioClient
metadata: {{ name: Everything }}
command: {node}
args: ["{everything_js}", "stdio"]
shutdownGraceMs: 500
---
kind: AiMcp.ToolProvider
metadata: {{ name: Tools }}
client: !ref Everything
---
kind: Ai.Agent
metadata: {{ name: ClaudeAgent }}
model: !ref Claude
toolProviders: [ {{ provider: !ref Tools, include: [get-tiny-image] }} ]
---
kind: Ai.Agent
metadata: {{ name: GeminiAgent }}
model: !ref Gemini
toolProviders: [ {{ provider: !ref Tools, include: [get-tiny-image] }} ]
"""
    path = tmp_path / "providers.yaml"
    path.write_text(text)
    return path


def claude(content: list[dict[str, object]], stop: str) -> Reply:
    return Reply(
        body={
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }
    )


def gemini(parts: list[dict[str, object]]) -> Reply:
    return Reply(
        body={"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    )


def test_check_accepts_both_kinds(tmp_path: Path, node: str, everything_js: str) -> None:
    path = manifest(tmp_path, "http://127.0.0.1:9", node, everything_js)
    report = check_manifest(path, env=ENV)
    assert report.ok, [d.message for d in report.diagnostics]
    assert main(["check", str(path)]) == 0


def test_check_refuses_bad_fields(tmp_path: Path, node: str, everything_js: str) -> None:
    path = manifest(tmp_path, "http://127.0.0.1:9", node, everything_js)
    path.write_text(path.read_text().replace("promptCaching: false", "promptCache: false"))
    report = check_manifest(path, env=ENV)
    assert not report.ok and any("promptCache" in d.message for d in report.diagnostics)


def test_claude_agent_runs_from_a_manifest(
    tmp_path: Path,
    api: FakeApi,
    node: str,
    everything_js: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = manifest(tmp_path, api.url, node, everything_js)
    api.replies.append(
        claude([{"type": "tool_use", "id": "tu1", "name": "get-tiny-image", "input": {}}], "tool_use")
    )
    api.replies.append(claude([{"type": "text", "text": "I see a tiny image."}], "end_turn"))
    assert main(["run", str(path), "--agent", "ClaudeAgent", "--input", "show me", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["text"] == "I see a tiny image."
    body = api.seen[1].body
    assert body["max_tokens"] == 256 and "cache_control" not in json.dumps(body)
    (tool_result,) = body["messages"][-1]["content"]
    image = next(b for b in tool_result["content"] if b["type"] == "image")
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    assert SECRET_A not in out + err


def test_gemini_agent_runs_from_a_manifest(
    tmp_path: Path,
    api: FakeApi,
    node: str,
    everything_js: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = manifest(tmp_path, api.url, node, everything_js)
    api.replies.append(gemini([{"functionCall": {"name": "get-tiny-image", "args": {}}}]))
    api.replies.append(gemini([{"text": "A tiny picture."}]))
    assert main(["run", str(path), "--agent", "GeminiAgent", "--input", "show me"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "A tiny picture."
    assert api.seen[0].headers["x-goog-api-key"] == SECRET_G
    assert api.seen[0].body["generationConfig"] == {"temperature": 0}
    response = api.seen[1].body["contents"][-1]["parts"][0]["functionResponse"]
    assert response["name"] == "get-tiny-image" and len(response["parts"]) == 1
    assert SECRET_G not in out + err


def test_unreachable_provider_fails_the_run_with_a_model_code(
    tmp_path: Path, node: str, everything_js: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeApi() as gone:
        url = gone.url
    path = manifest(tmp_path, url, node, everything_js)
    assert main(["run", str(path), "--agent", "ClaudeAgent", "--input", "hi"]) == 1
    out, err = capsys.readouterr()
    assert "ERR_MODEL_UNAVAILABLE" in out + err and SECRET_A not in out + err
    assert "Traceback" not in out + err
