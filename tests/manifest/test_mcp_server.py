"""Telo's MCP server module: an application whose target is an `Mcp.StdioServer` is served on
stdio by `toolbridge run`, through the official SDK's server, and called here by the official SDK
client: a `McpClient.ToolsCall` (server-everything's echo) and an `Ai.Agent` (a scripted model)
as tools, Telo's `inputs`/`result` CEL mappings and `catches`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from telo_stanzas import everything_client

from toolbridge.manifest import check_manifest

APP = """\
kind: Telo.Application
metadata: {{ name: served, version: 1.0.0 }}
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  Mcp: oci://ghcr.io/telorun/mcp-server@0.9.0
  McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3
targets: [ !ref Server ]
---
kind: Mcp.StdioServer
metadata: {{ name: Server }}
serverInfo: {{ name: served-app, version: 1.2.3 }}
instructions: Tools of a Telo application.
tools: [ !ref Toolbox ]
---
kind: Mcp.Tools
metadata: {{ name: Toolbox }}
entries:
  - name: shout
    description: Echo a message, loudly.
    argumentsSchema:
      type: object
      properties: {{ text: {{ type: string }} }}
      required: [ text ]
    handler: !ref Call
    inputs:
      name: echo
      arguments: {{ message: !cel "request.arguments.text + '!'" }}
  - name: ask
    description: Ask the assistant.
    argumentsSchema:
      {{ type: object, properties: {{ question: {{ type: string }} }}, required: [ question ] }}
    handler: !ref Assistant
    inputs: {{ prompt: !cel "request.arguments.question" }}
    result:
      content:
        - {{ type: text, text: !cel "'assistant: ' + result.text" }}
  - name: broken
    description: A call that fails, answered as a JSON-RPC error.
    handler: !ref Call
    inputs: {{ name: no_such_tool }}
    catches:
      - when: !cel "error.code != ''"
        error: {{ code: -32001, message: !cel "'caught ' + error.code" }}
  - name: failing
    description: A call that fails, answered as a tool error.
    handler: !ref Call
    inputs: {{ name: echo, arguments: {{ wrong: 1 }} }}
---
{everything}---
kind: Ai.ScriptedModel
metadata: {{ name: Script }}
turns: [ {{ text: "forty-two" }}, {{ text: "again" }}, {{ text: "and again" }} ]
---
kind: Ai.Agent
metadata: {{ name: Assistant }}
model: !ref Script
"""


def server_params(path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "import sys; from toolbridge.cli import main; sys.exit(main())", "run", str(path)],
        env={**os.environ},
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_application_serves_a_tools_call_and_an_agent_as_mcp_tools(
    tmp_path: Path, everything_js: str, mode: str
) -> None:
    path = tmp_path / "telo.yaml"
    path.write_text(APP.format(everything=everything_client(everything_js)), encoding="utf-8")
    report = check_manifest(path)
    assert report.ok and not report.diagnostics, report.diagnostics
    async with Client(server_params(path), mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"shout", "ask", "broken", "failing"}
        assert listed["shout"].input_schema["required"] == ["text"]
        shout = await client.call_tool("shout", {"text": "hello"})
        assert shout.is_error is not True
        assert "hello!" in shout.content[0].text  # type: ignore[union-attr]
        ask = await client.call_tool("ask", {"question": "what is 6 x 7?"})
        assert ask.content[0].text == "assistant: forty-two"  # type: ignore[union-attr]
        refused = await client.call_tool("shout", {"text": 3})
        assert refused.is_error is True and "ERR_INVALID_INPUT" in refused.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as info:
            await client.call_tool("broken", {})
        assert info.value.error.code == -32001 and info.value.error.message.startswith("caught ERR_")
        failing = await client.call_tool("failing", {})
        assert failing.is_error is True
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
        assert "unknown tool 'nope'" in unknown.value.error.message
        # the connection survives every failure above
        again = await client.call_tool("ask", {"question": "again?"})
        assert again.content[0].text.startswith("assistant: ")  # type: ignore[union-attr]


def test_a_handler_of_a_module_toolbridge_does_not_run_is_one_finding(tmp_path: Path) -> None:
    path = tmp_path / "telo.yaml"
    path.write_text(
        """\
kind: Telo.Application
metadata: { name: my-stdio-mcp, version: 1.0.0 }
imports:
  Mcp: oci://ghcr.io/telorun/mcp-server@0.9.0
  JS: oci://ghcr.io/telorun/javascript@0.7.0
targets: [ !ref Server ]
---
kind: Mcp.StdioServer
metadata: { name: Server }
serverInfo: { name: my-stdio-mcp, version: 1.0.0 }
tools: [ !ref WeatherTools ]
---
kind: Mcp.Tools
metadata: { name: WeatherTools }
entries:
  - name: get_weather
    description: Get current weather for a city.
    argumentsSchema: { type: object, properties: { city: { type: string } }, required: [ city ] }
    handler: !ref GetWeatherImpl
    inputs: { city: !cel "request.arguments.city" }
    result:
      content:
        - type: text
          text: !cel "result.summary"
---
kind: JS.Script
metadata: { name: GetWeatherImpl }
code: "export function main(input) { return { summary: 'Sunny' } }"
""",
        encoding="utf-8",
    )
    [finding] = check_manifest(path).diagnostics
    assert (finding.code, finding.line) == ("ERR_MANIFEST_UNSUPPORTED", 26)
    assert (
        "JS.Script belongs to Telo's module javascript, which toolbridge does not provide" in finding.message
    )
