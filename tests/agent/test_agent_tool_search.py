"""`Agent(tool_search=...)`: a model shown two meta tools over a real 1,200-tool MCP server finds,
uses and calls a tool; the working set is read from the conversation; under a governed runtime
the meta tools are granted and journaled like any tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolbridge.agent import Agent, FunctionModel, Message, ModelRequest, ToolSearch
from toolbridge.agent.models import ToolCall
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.errors import ConfigError

CATALOG = Path(__file__).resolve().parent.parent / "gateway" / "upstreams" / "catalog_server.py"


def _script(seen: list[list[str]]) -> FunctionModel:
    """find -> use the best match -> call it -> answer, recording the tools of each request."""

    def turn(messages: list[Message], request: ModelRequest) -> object:
        seen.append([t.name for t in request.tools])
        step = len(seen) - 1
        if step == 0:
            return [ToolCall("c0", "find_tools", {"query": "create a new calendar meeting event"})]
        last = messages[-1].content
        if step == 1:
            best = json.loads(last if isinstance(last, str) else last[0].text)["tools"][0]["name"]
            return [ToolCall("c1", "use_tools", {"names": [best, "no_such_tool"]})]
        if step == 2:
            return [ToolCall("c2", "cal_create_event", {"text": "standup"})]
        return f"done: {last if isinstance(last, str) else last[0].text}"

    return FunctionModel(turn)


async def test_a_model_finds_uses_and_calls_a_tool(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    seen: list[list[str]] = []
    async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state")]) as client:
        agent = Agent(_script(seen), [McpToolProvider(client)], tool_search=ToolSearch(threshold=50))
        result = await agent.run("book the standup")
    assert seen[0] == ["find_tools", "use_tools"]  # 1,201 tools, two shown
    assert seen[1] == ["find_tools", "use_tools"]
    assert seen[2] == ["cal_create_event", "find_tools", "use_tools"]  # catalog order
    assert result.output.startswith("done: cal_create_event:")
    found = json.loads(result.steps[0].tool_results[0].content[0].text)["tools"]
    assert found[0]["name"] == "cal_create_event"
    assert found[0]["description"] == "Create a new meeting or event in the calendar."
    assert found[0]["why"].startswith("create (name, description)")
    used = json.loads(result.steps[1].tool_results[0].content[0].text)
    assert used == {"added": ["cal_create_event"], "unknown": ["no_such_tool"]}
    assert (tmp_path / "state" / "calls.log").read_text(encoding="utf-8") == "cal_create_event standup\n"


async def test_under_the_threshold_everything_is_shown_and_errors_are_fed_back(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    seen: list[list[str]] = []

    def turn(messages: list[Message], request: ModelRequest) -> object:
        seen.append([t.name for t in request.tools])
        if len(seen) == 1:
            return [
                ToolCall("a", "find_tools", {"query": "x" * 5000}),
                ToolCall("b", "use_tools", {"names": "x"}),
            ]
        return "ok"

    async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state"), "20"]) as client:
        agent = Agent(FunctionModel(turn), [McpToolProvider(client)], tool_search=30)
        await agent.run("hi")
        assert len(seen[0]) == 21 and "find_tools" not in seen[0]
        seen.clear()
        small = Agent(FunctionModel(turn), [McpToolProvider(client)], tool_search=ToolSearch(threshold=5))
        result = await small.run("hi")
    errors = [r for r in result.steps[0].tool_results]
    assert all(r.error for r in errors)
    assert {r.error_code for r in errors} == {"ERR_DISCOVERY_QUERY"}


@pytest.mark.parametrize("bad", [-1, "10", 2.5, object()])
def test_bad_settings_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        Agent(FunctionModel(lambda m, r: "x"), [], tool_search=bad)  # type: ignore[arg-type]


async def test_governed_the_meta_tools_are_granted_and_journaled(tmp_path: Path) -> None:
    from toolbridge.runtime import create_runtime

    (tmp_path / "state").mkdir()
    grants = ["model:function", "tool:find_tools", "tool:use_tools", "tool:cal_create_event", "effect:write"]
    runtime = create_runtime(permissions=grants)
    seen: list[list[str]] = []
    async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state")]) as client:
        agent = Agent(_script(seen), [McpToolProvider(client)], tool_search=ToolSearch(threshold=50))
        result = await runtime.run(agent, "book the standup")
        assert result.outcome == "succeeded", result.error_code
        record = runtime.inspect(result.run_id)
        assert [c.tool_id for c in record.calls] == ["find_tools", "use_tools", "cal_create_event"]
        # without the meta tools' grants, the model's search is refused like any ungranted tool
        strict = create_runtime(permissions=["model:function", "tool:cal_create_event", "effect:write"])
        refused = await strict.run(Agent(_script([]), [McpToolProvider(client)], tool_search=50), "x")
        assert refused.error_code == "PERMISSION_DENIED"
    runtime.close()
    strict.close()


async def test_the_manifest_field_tool_search(tmp_path: Path) -> None:
    import json as _json

    from toolbridge.manifest import load_manifest

    (tmp_path / "state").mkdir()
    args = _json.dumps([str(CATALOG), str(tmp_path / "state")])
    (tmp_path / "agent.yaml").write_text(
        f"""
kind: Ai.ScriptedModel
metadata: {{ name: Script }}
turns:
  - toolCalls: [ {{ name: find_tools, arguments: {{ query: archive an old email thread }} }} ]
  - toolCalls: [ {{ name: use_tools, arguments: {{ names: [mail_archive_thread] }} }} ]
  - toolCalls: [ {{ name: mail_archive_thread, arguments: {{ text: old }} }} ]
  - text: done
---
kind: Mcp.StdioClient
metadata: {{ name: Catalog }}
command: {sys.executable}
args: {args}
---
kind: AiMcp.ToolProvider
metadata: {{ name: CatalogTools }}
client: !ref Catalog
---
kind: Ai.Agent
metadata: {{ name: Finder }}
model: !ref Script
toolProviders: [ {{ provider: !ref CatalogTools }} ]
toolSearch: 50
""",
        encoding="utf-8",
    )
    manifest = load_manifest(tmp_path / "agent.yaml")
    async with manifest.open() as live:
        agent = await live.agent()
        assert agent.tool_search is not None and agent.tool_search.threshold == 50
        result = await agent.run("tidy the inbox")
    assert result.output == "done"
    found = _json.loads(result.steps[0].tool_results[0].content[0].text)["tools"]
    assert found[0]["name"] == "mail_archive_thread"
    assert (tmp_path / "state" / "calls.log").read_text(encoding="utf-8") == "mail_archive_thread old\n"
