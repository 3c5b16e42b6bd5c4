"""Running manifests end to end: real servers, scripted models, the governed runtime."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
RELATIVE_FS = "../../tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
SECRET = "sk-RUN-SECRET-77c0e1"


@pytest.fixture
def copy_example(tmp_path: Path, filesystem_js: str) -> Callable[..., Path]:
    """Copy an example with its data dir into tmp_path, the server path made absolute."""

    def copy(name: str, *, grant_write: bool = False) -> Path:
        return _copy_example(name, tmp_path, filesystem_js, grant_write=grant_write)

    return copy


def _copy_example(name: str, tmp_path: Path, filesystem_js: str, *, grant_write: bool = False) -> Path:
    (tmp_path / "data").mkdir()
    shutil.copy(EXAMPLES / "data" / "notes.txt", tmp_path / "data" / "notes.txt")
    text = (EXAMPLES / name).read_text().replace(RELATIVE_FS, filesystem_js)
    if grant_write:
        text = text.replace("    # - ", "    - ")
    path = tmp_path / name
    path.write_text(text)
    return path


def test_offline_example_reads_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped example as written: relative paths resolve from the manifest's directory."""
    path = EXAMPLES / "offline-assistant.yaml"
    assert main(["run", str(path), "--input", "What do my notes say?"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "Your notes are about shipping the manifest checker and the offline demo."
    assert "step 1" in err and "✓ fs_list_directory" in err and "✓ fs_read_file" in err


def test_offline_example_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "offline-assistant.yaml"
    assert main(["run", str(path), "--input", "What do my notes say?", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    result = json.loads(out)
    assert result["finishReason"] == "stop"
    assert result["usage"]["requests"] == 3
    [listing], [reading] = (s["toolResults"] for s in result["steps"][:2])
    assert listing["name"] == "fs_list_directory" and "notes.txt" in json.dumps(listing["content"])
    assert reading["error"] is False
    assert "ship the manifest checker" in json.dumps(reading["content"])
    assert result["steps"][1]["toolCalls"] == [
        {"id": "call_1_0", "name": "fs_read_file", "arguments": {"path": "notes.txt"}}
    ]


def test_governed_run_blocks_the_ungranted_write(
    tmp_path: Path, copy_example: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_example("governed-assistant.yaml")
    assert main(["run", str(path), "--input", "Summarise my notes", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert (result["outcome"], result["errorCode"]) == ("blocked", "PERMISSION_DENIED")
    assert result["runId"].startswith("run_")
    assert not (tmp_path / "data" / "summary.txt").exists()  # the server never heard of it


def test_governed_run_with_the_grants(
    tmp_path: Path, copy_example: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_example("governed-assistant.yaml", grant_write=True)
    assert main(["run", str(path), "--input", "Summarise my notes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["outcome"] == "succeeded", result
    assert result["text"] == "Summary written to summary.txt."
    assert result["finishReason"] == "stop"
    first = {r["name"]: r for r in result["steps"][0]["toolResults"]}
    assert "ship the manifest checker" in json.dumps(first["fs_read_file"]["content"])
    assert first["greet"]["content"]["result"] == "Hello, Ada!"  # the Tasks.ToolSet tool ran
    assert (tmp_path / "data" / "summary.txt").read_text() == "Ship the manifest checker."


def test_governed_live_view(
    tmp_path: Path, copy_example: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_example("governed-assistant.yaml")
    assert main(["run", str(path), "--input", "Summarise my notes"]) == 1
    err = capsys.readouterr().err
    assert "✓ fs_read_file" in err and "✓ greet" in err
    assert "run blocked: PERMISSION_DENIED" in err


async def test_load_and_open_from_python(copy_example: Callable[..., Path]) -> None:
    path = copy_example("offline-assistant.yaml")
    manifest = load_manifest(path)
    assert manifest.agent_names == ["Assistant"]
    async with manifest.open() as live:
        agent = await live.agent()
        assert await live.runtime() is None
        assert await live.build("FileTools") is await live.build("FileTools")  # built once, shared
        result = await agent.run("What do my notes say?")
    assert result.text.startswith("Your notes are about")


def test_agent_selection(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: a } ]\n---\n"
        "kind: Ai.Agent\nmetadata: { name: One }\nmodel: !ref M\n---\n"
        "kind: Ai.Agent\nmetadata: { name: Two }\nmodel: !ref M\n"
    )
    manifest = load_manifest(path)
    with pytest.raises(ConfigError) as info:
        manifest.pick_agent()
    assert info.value.code == "ERR_MANIFEST_AGENT" and "--agent" in info.value.message
    with pytest.raises(ConfigError):
        manifest.pick_agent("Three")
    assert manifest.pick_agent("Two") == "Two"


def test_run_with_agent_and_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: from-two } ]\n---\n"
        "kind: Ai.Agent\nmetadata: { name: One }\nmodel: !ref M\n---\n"
        "kind: Ai.Agent\nmetadata: { name: Two }\nmodel: !ref M\n"
    )
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("hello")
    assert main(["run", str(path), "--input-file", str(prompt)]) == 1
    assert "choose one with --agent" in capsys.readouterr().err
    assert main(["run", str(path), "--agent", "Two", "--input-file", str(prompt)]) == 0
    assert capsys.readouterr().out.strip() == "from-two"


def test_secret_values_never_printed_by_run(
    copy_example: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A secret given to a server's environment and to a model's key is in no output channel."""
    monkeypatch.setenv("SERVER_TOKEN", SECRET)
    path = copy_example("offline-assistant.yaml")
    text = path.read_text().replace(
        "clientInfo: { name: my-app, version: 1.0.0 }",
        'clientInfo: { name: my-app, version: 1.0.0 }\nenv: { API_TOKEN: "${{ secrets.serverToken }}" }',
    )
    text += (
        "---\nkind: AiOpenai.OpenaiModel\nmetadata: { name: Remote }\nmodel: gpt-4o-mini\n"
        'apiKey: "${{ secrets.serverToken }}"\nbaseUrl: http://127.0.0.1:9/v1\nmaxRetries: 0\n'
        "---\nkind: Ai.Agent\nmetadata: { name: Failing }\nmodel: !ref Remote\n"
    )
    path.write_text(text)
    caplog.set_level(logging.DEBUG)
    assert main(["-vv", "run", str(path), "--agent", "Assistant", "--input", "notes?"]) == 0
    assert main(["run", str(path), "--agent", "Assistant", "--input", "notes?", "--json"]) == 0
    # a model that cannot be reached: the error path must not show the key either
    assert main(["-vv", "run", str(path), "--agent", "Failing", "--input", "hi", "--json"]) == 1
    assert main(["check", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "ERR_MODEL" in out + err
    everything = out + err + caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert SECRET not in everything


async def test_http_server_and_python_functions_from_yaml(tmp_path: Path, everything_http: str) -> None:
    """References across kinds at run time: an HTTP client, a discovered provider, native tools."""
    path = tmp_path / "m.yaml"
    path.write_text(
        f"""\
kind: Ai.Agent
metadata: {{ name: Mixed }}
model: !ref Script
toolProviders:
  - {{ provider: !ref Everything, prefix: ev_, include: [echo] }}
  - {{ provider: !ref Native, include: [add] }}
---
kind: Ai.ScriptedModel
metadata: {{ name: Script }}
turns:
  - toolCalls:
      - {{ name: ev_echo, arguments: {{ message: hi there }} }}
      - {{ name: add, arguments: {{ a: 2, b: 40 }} }}
  - text: done
---
kind: Ai.Tools
metadata: {{ name: Native }}
functions: ["manifest_native_tools:add"]
---
kind: AiMcp.ToolProvider
metadata: {{ name: Everything }}
client: !ref Web
---
kind: Mcp.HttpClient
metadata: {{ name: Web }}
url: "{everything_http}"
headers: {{ X-Trace: manifest-test }}
"""
    )
    manifest = load_manifest(path)
    async with manifest.open() as live:
        result = await (await live.agent()).run("go")
    [echo, added] = result.steps[0].tool_results
    assert not echo.error and "hi there" in json.dumps(echo.content, default=str)
    assert not added.error and "42" in json.dumps(added.content, default=str)


def test_ai_tools_names_are_checked(tmp_path: Path) -> None:
    from toolbridge.manifest import check_manifest

    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: Ai.Tools\nmetadata: { name: N }\n"
        'functions: ["manifest_native_tools:add", "manifest_native_tools:not_a_function"]\n'
        "---\nkind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: x } ]\n"
        "---\nkind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref M\n"
        "toolProviders: [ { provider: !ref N, include: [sub] } ]\n"
    )
    assert [(d.code, d.line, d.column) for d in check_manifest(path).diagnostics] == [
        ("ERR_MANIFEST_IMPORT", 3, 42)
    ]


async def test_build_errors_and_runtime_by_name(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: Secrets\nmetadata: { name: S }\nenv: { a: B }\n---\n"
        "kind: Runtime\nmetadata: { name: R }\npermissions: { allow: [model:scripted] }\n"
    )
    async with load_manifest(path).open() as live:
        for name in ("Nope", "S"):
            with pytest.raises(ConfigError) as info:
                await live.build(name)
            assert info.value.code == "ERR_MANIFEST_BUILD"
        runtime = await live.build("R")
        assert runtime is await live.runtime()
        assert "_built" not in repr(live)  # live objects (their args may hold secrets) stay out of repr


def test_pinned_provider_from_a_lock(
    tmp_path: Path, copy_example: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`toolbridge lock MANIFEST`, then `lock:` on the provider: a changed pin hides the tool."""
    from toolbridge.manifest import check_manifest

    path = copy_example("offline-assistant.yaml")
    assert main(["lock", "--out", str(tmp_path / "tools.lock"), str(path)]) == 0
    text = path.read_text().replace("client: !ref FilesMcp\n", "client: !ref FilesMcp\nlock: tools.lock\n")
    path.write_text(text)
    assert check_manifest(path).ok
    capsys.readouterr()
    assert main(["run", str(path), "--input", "notes?", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"][1]["toolResults"][0]["error"] is False

    lock = json.loads((tmp_path / "tools.lock").read_text())
    lock["servers"]["FilesMcp"]["tools"]["read_file"] = "sha256:" + "0" * 64  # the server "changed" it
    (tmp_path / "tools.lock").write_text(json.dumps(lock))
    assert main(["run", str(path), "--input", "notes?", "--json"]) == 3  # finished, but a tool call failed
    result = json.loads(capsys.readouterr().out)
    [reading] = result["steps"][1]["toolResults"]
    assert reading["error"] is True  # not offered: the model's call finds no such tool
    assert "Meeting notes" not in json.dumps(reading)
    # Telo's reading of the same run: the agent answered, so the run succeeded.
    assert main(["run", str(path), "--input", "notes?", "--json", "--telo"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"][1]["toolResults"][0]["error"] is True


def test_lock_problems_are_found_statically(tmp_path: Path) -> None:
    from toolbridge.manifest import check_manifest

    text = (
        "kind: Mcp.StdioClient\nmetadata: { name: C }\ncommand: node\n---\n"
        "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: !ref C\nlock: missing.lock\n"
    )
    path = tmp_path / "m.yaml"
    path.write_text(text)
    [d] = check_manifest(path).diagnostics
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_LOCK", 8, 7)
    (tmp_path / "missing.lock").write_text(
        '{"version": 1, "servers": {"Other": {"instructions": null, "tools": {}}}}'
    )
    [d] = check_manifest(path).diagnostics
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_LOCK", 8, 7)
    assert "C" in d.message
