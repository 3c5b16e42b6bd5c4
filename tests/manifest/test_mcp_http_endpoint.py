"""Telo's `Mcp.HttpEndpoint`: `toolbridge run APP --port N` serves an application's `Mcp.Tools`
over Streamable HTTP (the official SDK's server, both protocol eras), each call governed and
journaled as the gateway's are. Clients: the official SDK client (both eras), raw HTTP for
Telo's stateful-session contract, and the MCP Inspector CLI. One server process per module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from telo_stanzas import everything_client
from test_mcp_server import APP as STDIO_APP

from toolbridge.manifest import check_manifest

TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "tests" / "conformance" / "node_modules" / ".bin"
LAUNCHER = (
    ROOT
    / "tests"
    / "conformance"
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)

MORE = """---
kind: Mcp.Tools
metadata: { name: More }
entries:
  - name: secret
    description: Not granted by the Runtime.
    effects: read
    handler: !ref Assistant
    inputs: { prompt: tell me }
---
kind: Mcp.Resources
metadata: { name: Notes }
entries:
  - uri: notes://readme
    name: readme
    mimeType: text/markdown
    handler: !ref Call
    inputs: { name: echo, arguments: { message: read me } }
    result:
      contents:
        - { uri: !cel "request.uri", mimeType: text/markdown, text: !cel "result.content[0].text" }
  - uriTemplate: "notes://by-name/{name}"
    name: by-name
    handler: !ref Assistant
    inputs: { prompt: !cel "'note ' + request.params.name" }
  - uri: notes://broken
    name: broken
    handler: !ref Call
    inputs: { name: no_such_tool }
    catches:
      - error: { code: -32050, message: !cel "'no note: ' + error.code" }
  - uri: notes://private
    name: private
    description: Not granted by the Runtime.
    handler: !ref Call
    inputs: { name: echo, arguments: { message: private } }
---
kind: Mcp.Prompts
metadata: { name: Prompts }
entries:
  - name: greet
    description: Greet someone.
    arguments: [ { name: who, required: true } ]
    handler: !ref Call
    inputs: { name: echo, arguments: { message: !cel "'hello ' + request.arguments.who" } }
    result:
      messages:
        - role: user
          content: { type: text, text: !cel "result.content[0].text" }
  - name: hidden
    description: Not granted by the Runtime.
    handler: !ref Call
    inputs: { name: echo, arguments: { message: hidden } }
"""

RUNTIME = """---
kind: Runtime
metadata: { name: Governed }
profile: durable
journal: journal.db
permissions:
  allow: [ tool:shout, tool:broken, tool:ask, tool:failing, effect:write,
           "resources:readme", "resources:by-name", "resources:broken", "prompts:greet" ]
"""

TOOLS = ["shout", "ask", "broken", "failing", "secret"]


WEB = """---
kind: Http.Server
metadata: { name: Web }
host: 127.0.0.1
port: 1
baseUrl: http://127.0.0.1:1
mounts:
  - { path: /mcp, mount: !ref McpHttp }
"""


def _app(everything_js: str, *, stateful: bool, runtime: str, web: bool = False) -> str:
    """test_mcp_server's application, served over HTTP: its `Mcp.StdioServer` becomes an
    `Mcp.HttpEndpoint` offering more bundles (with `web`, mounted on Telo's `Http.Server`,
    the target)."""
    text = STDIO_APP.format(everything=everything_client(everything_js))
    target = "Web" if web else "McpHttp"
    for old, new in (
        ("targets: [ !ref Server ]", f"targets: [ !ref {target} ]"),
        ("  McpClient: oci:", "  Http: oci://ghcr.io/telorun/http-server@0.26.0\n  McpClient: oci:"),
        (
            "kind: Mcp.StdioServer\nmetadata: { name: Server }",
            f"kind: Mcp.HttpEndpoint\nmetadata: {{ name: McpHttp }}\nstateful: {str(stateful).lower()}",
        ),
        (
            "tools: [ !ref Toolbox ]",
            "tools: [ !ref Toolbox, !ref More ]\nresources: [ !ref Notes ]\nprompts: [ !ref Prompts ]",
        ),
        (
            '{ text: "and again" } ]',
            '{ text: "and again" }, { text: "more" }, { text: "still more" }, { text: "a note" }, '
            '{ text: "spare" } ]',
        ),
    ):
        assert old in text, old
        text = text.replace(old, new)
    return text + MORE + runtime + (WEB if web else "")


def _serve(listening_process: Any, path: Path) -> Iterator[str]:
    with listening_process([TOOLBRIDGE, "run", str(path), "--port", "{port}"], "toolbridge run") as url:
        yield url


@pytest.fixture(scope="module")
def governed(
    tmp_path_factory: pytest.TempPathFactory, everything_js: str, listening_process: Any
) -> Iterator[tuple[str, Path]]:
    """The stateless endpoint under a durable Runtime: (URL, its journal)."""
    base = tmp_path_factory.mktemp("endpoint")
    path = base / "app.yaml"
    path.write_text(_app(everything_js, stateful=False, runtime=RUNTIME), encoding="utf-8")
    report = check_manifest(path)
    assert report.ok and not report.diagnostics, report.diagnostics
    for url in _serve(listening_process, path):
        yield url, base / "journal.db"


def _journal_calls(journal: Path) -> list[tuple[str, str, str, str | None]]:
    from toolbridge.runtime import Journal

    opened = Journal.open_existing(str(journal))
    try:
        runs = [opened.get_run(r.run_id) for r in reversed(opened.list_runs(100))]
    finally:
        opened.close()
    return [
        (run.principal or "", c.tool_id, c.outcome, c.error_code)
        for run in runs
        if run is not None
        for c in run.calls
    ]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_calls_a_tools_call_and_an_agent_over_http(
    governed: tuple[str, Path], mode: str
) -> None:
    url, journal = governed
    before = len(_journal_calls(journal)) if journal.exists() else 0
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == TOOLS  # both bundles merged, in order
        shout = await client.call_tool("shout", {"text": "hello"})
        assert shout.is_error is not True and "hello!" in shout.content[0].text  # type: ignore[union-attr]
        ask = await client.call_tool("ask", {"question": "what is 6 x 7?"})
        assert ask.content[0].text.startswith("assistant: ")  # type: ignore[union-attr]
        with pytest.raises(MCPError) as caught:
            await client.call_tool("broken", {})
        assert caught.value.error.code == -32001 and caught.value.error.message.startswith("caught ERR_")
        refused = await client.call_tool("secret", {})
        assert refused.is_error is True
        assert refused.content[0].text.startswith("PERMISSION_DENIED")  # type: ignore[union-attr]
        invalid = await client.call_tool("shout", {"text": 3})
        assert invalid.is_error is True and "ERR_INVALID_INPUT" in invalid.content[0].text  # type: ignore[union-attr]
    rows = _journal_calls(journal)[before:]
    # every governed call has its row, under who called, with its outcome
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("anonymous", "shout", None),
        ("anonymous", "ask", None),
        # the handler failed after it started: with effects write, what it did is not known
        ("anonymous", "broken", "OUTCOME_UNKNOWN"),
        ("anonymous", "secret", "PERMISSION_DENIED"),
    ]
    assert [r[2] for r in rows] == ["succeeded", "succeeded", "outcome_unknown", "not_started"]


def test_the_inspector_cli_lists_and_calls_over_http(governed: tuple[str, Path], tmp_path: Path) -> None:
    if not (NODE_BIN / "node").exists() or not LAUNCHER.exists():
        pytest.fail(
            "the MCP Inspector is not installed under tests/conformance; "
            "run `bash .ci/install-conformance.sh`"
        )
    url, journal = governed
    env = {"PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path)}

    def inspector(*args: str) -> dict[str, object]:
        proc = subprocess.run(
            [str(NODE_BIN / "node"), str(LAUNCHER), "--cli", url, "--transport", "http", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        data: dict[str, object] = json.loads(proc.stdout)
        return data

    listed = inspector("--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == TOOLS  # type: ignore[attr-defined,index]
    shout = inspector("--method", "tools/call", "--tool-name", "shout", "--tool-arg", "text=inspected")
    assert "inspected!" in json.dumps(shout["content"])
    ask = inspector("--method", "tools/call", "--tool-name", "ask", "--tool-arg", "question=why")
    assert ask["content"][0]["text"].startswith("assistant: ")  # type: ignore[index]
    assert [r[1] for r in _journal_calls(journal)][-2:] == ["shout", "ask"]


@pytest.fixture(scope="module")
def stateful(
    tmp_path_factory: pytest.TempPathFactory, everything_js: str, listening_process: Any
) -> Iterator[str]:
    """The stateful endpoint, without a Runtime, mounted at /mcp on Telo's Http.Server (the
    target; `--port` overrides the document's port)."""
    path = tmp_path_factory.mktemp("stateful") / "app.yaml"
    path.write_text(_app(everything_js, stateful=True, runtime="", web=True), encoding="utf-8")
    report = check_manifest(path)
    assert report.ok and not report.diagnostics, report.diagnostics
    yield from _serve(listening_process, path)


def test_a_stateful_endpoint_keeps_telos_session_contract(stateful: str) -> None:
    """As Telo's http-stateful-session test: initialize mints Mcp-Session-Id, the id works on a
    follow-up request, a bogus id is 404 (JSON-RPC -32001 when the body says); the instructions
    reach the InitializeResult."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "telo-test", "version": "1.0.0"},
        },
    }

    def payload(response: httpx2.Response) -> dict[str, object]:
        if response.headers.get("content-type", "").startswith("application/json"):
            data: dict[str, object] = response.json()
            return data
        lines = [ln[5:].strip() for ln in response.text.splitlines() if ln.startswith("data:")]
        lines = [ln for ln in lines if ln]
        return json.loads(lines[0]) if lines else {}

    with httpx2.Client(timeout=30) as http:
        first = http.post(stateful, json=init, headers=headers)
        session = first.headers.get("mcp-session-id")
        assert first.status_code == 200 and session
        assert "Telo application" in payload(first)["result"]["instructions"]  # type: ignore[index]
        http.post(
            stateful,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2024-11-05"},
        )
        listed = http.post(
            stateful,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2024-11-05"},
        )
        assert listed.status_code == 200 and len(payload(listed)["result"]["tools"]) == 5  # type: ignore[index]
        bogus = http.post(
            stateful,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            headers={**headers, "Mcp-Session-Id": "not-a-real-session"},
        )
        assert bogus.status_code == 404
        error = payload(bogus).get("error")
        assert isinstance(error, dict) and isinstance(error.get("code"), int)


async def test_an_endpoint_without_a_runtime_serves_every_tool(stateful: str) -> None:
    """Without a Runtime, every served tool is granted (the journal is in memory)."""
    async with Client(streamable_http_client(stateful), mode="legacy") as client:  # type: ignore[arg-type]
        result = await client.call_tool("secret", {})
    assert result.is_error is not True
    assert result.content[0].text == "forty-two"  # type: ignore[union-attr]


async def test_resources_and_prompts_are_served(governed: tuple[str, Path]) -> None:
    """`Mcp.Resources` (a URI, a template) and `Mcp.Prompts`, with handlers toolbridge runs;
    every read and get journaled as the gateway journals them."""
    url, journal = governed
    before = len(_journal_calls(journal)) if journal.exists() else 0
    async with Client(streamable_http_client(url), mode="legacy") as client:  # type: ignore[arg-type]
        listed = (await client.list_resources()).resources
        assert [(r.name, str(r.uri), r.mime_type) for r in listed] == [
            ("readme", "notes://readme", "text/markdown"),
            ("broken", "notes://broken", None),
        ]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["notes://by-name/{name}"]
        readme = await client.read_resource("notes://readme")
        assert "read me" in readme.contents[0].text  # type: ignore[union-attr]
        note = await client.read_resource("notes://by-name/todo")
        assert note.contents[0].text and str(note.contents[0].uri) == "notes://by-name/todo"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as caught:
            await client.read_resource("notes://broken")
        assert caught.value.error.code == -32050 and caught.value.error.message.startswith("no note: ERR_")
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("notes://by-name/a/b")  # a variable is one path segment
        assert unknown.value.error.code == -32002
        prompts = (await client.list_prompts()).prompts
        assert [(p.name, [a.name for a in p.arguments or []]) for p in prompts] == [("greet", ["who"])]
        greeting = await client.get_prompt("greet", {"who": "Ada"})
        assert "hello Ada" in greeting.messages[0].content.text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("greet", {})
        assert missing.value.error.code == -32602 and "'who'" in missing.value.error.message
        with pytest.raises(MCPError) as nope:
            await client.get_prompt("nope", {})
        assert nope.value.error.code == -32602
        # not granted: neither listed nor read, answered as unknown
        with pytest.raises(MCPError) as private:
            await client.read_resource("notes://private")
        assert private.value.error.code == -32002
        with pytest.raises(MCPError) as hidden:
            await client.get_prompt("hidden", {})
        assert hidden.value.error.code == -32602 and "unknown prompt" in hidden.value.error.message
        # the connection survives every failure above
        assert (await client.read_resource("notes://readme")).contents
    rows = [(who, target, code) for who, target, _, code in _journal_calls(journal)[before:]]
    assert rows == [
        ("anonymous", "notes://readme", None),
        ("anonymous", "notes://by-name/todo", None),
        ("anonymous", "notes://broken", "TOOL_FAILED"),  # its handler failed
        ("anonymous", "notes://by-name/a/b", "NOT_FOUND"),  # nothing run
        ("anonymous", "greet", None),
        ("anonymous", "greet", "INVALID_INPUT"),
        ("anonymous", "nope", "NOT_FOUND"),
        ("anonymous", "notes://private", "PERMISSION_DENIED"),
        ("anonymous", "hidden", "PERMISSION_DENIED"),
        ("anonymous", "notes://readme", None),
    ]


def test_an_http_server_mounts_one_endpoint(tmp_path: Path, everything_js: str) -> None:
    """Telo's other mounts and kinds of its http-server module are refused precisely."""
    path = tmp_path / "app.yaml"
    base = _app(everything_js, stateful=False, runtime="", web=True)
    two = (
        base
        + """---
kind: Http.Api
metadata: { name: Rest }
routes: []
"""
    )
    two = two.replace(
        "  - { path: /mcp, mount: !ref McpHttp }",
        "  - { path: /mcp, mount: !ref McpHttp }\n  - { path: /v1, mount: !ref Rest }",
    )
    path.write_text(two, encoding="utf-8")
    found = [(d.code, d.message) for d in check_manifest(path).diagnostics]
    assert [c for c, _ in found] == ["ERR_MANIFEST_UNSUPPORTED", "ERR_MANIFEST_UNSUPPORTED"], found
    assert any("with 2 mounts is a Telo feature toolbridge does not implement" in m for _, m in found)
    assert any(
        "Http.Api of Telo's module http-server" in m and "a Telo kind toolbridge does not implement" in m
        for _, m in found
    )
    path.write_text(base.replace("  Http: oci://ghcr.io/telorun/http-server@0.26.0\n", ""), encoding="utf-8")
    [undefined] = check_manifest(path).diagnostics
    assert undefined.code == "ERR_MANIFEST_UNDEFINED_KIND"  # as Telo: Http is not imported
