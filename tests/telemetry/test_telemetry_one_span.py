"""One `execute_tool` span per governed call of an agent step (issue 23): the agent opens it, the
runtime records its decision on it and runs the call under it (the client's MCP span is its
child); no second tool span from the runtime, whichever way the call ends."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import parent_of
from test_telemetry_agent import data_dir, fs_agent, read_turns

from toolbridge.runtime import create_runtime


async def test_a_governed_agent_call_has_one_tool_span(
    spans: InMemorySpanExporter, node: str, filesystem_js: str, tmp_path: Path
) -> None:
    data = data_dir(tmp_path)
    # No usage in the turns: the token metrics other tests read stay theirs.
    turns = [{k: v for k, v in turn.items() if k != "usage"} for turn in read_turns(data)]
    agent, files = fs_agent(node, filesystem_js, data, turns)
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:fs_read_text_file", "effect:read"]}
    )
    async with files:
        result = await runtime.run(agent, "read my notes")
    assert result.ok, (result.outcome, result.error_code)
    finished = spans.get_finished_spans()
    tools = [s for s in finished if s.name.startswith("execute_tool")]
    assert [s.name for s in tools] == ["execute_tool fs_read_text_file"]
    (tool,) = tools
    attrs = dict(tool.attributes or {})
    assert attrs["toolbridge.outcome"] == "succeeded"  # the runtime's decision, on the agent's span
    assert attrs["toolbridge.run.id"] == result.run_id
    calls = [s.name for s in finished if parent_of(s) == tool.context.span_id]
    assert calls == ["MCP send tools/call read_text_file"]  # the client's span, under the tool span
    assert [s.name for s in finished].count("MCP send tools/call read_text_file") == 1
