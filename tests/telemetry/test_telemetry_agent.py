"""Spans and metrics of real agent runs (server-filesystem and server-everything over stdio),
read back from the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_helpers import by_name, metric_points, parent_of

from toolbridge import Agent, McpToolProvider, ScriptedModel, StdioClient, telemetry
from toolbridge.errors import PolicyError
from toolbridge.redact import register_secret
from toolbridge.runtime import create_runtime

SECRET_ARG = "needle-argument-7f3c"
LONG = "trigger-long-running-operation"
FILE_TEXT = "needle-result-91ab: the quarterly notes"


def fs_agent(node: str, filesystem_js: str, data: Path, turns: list[dict[str, Any]]) -> tuple[Agent, Any]:
    files = McpToolProvider(StdioClient(node, [filesystem_js, str(data)]))
    agent = Agent(
        ScriptedModel(turns=turns),
        tool_providers=[
            {"provider": files, "prefix": "fs_", "include": ["read_text_file"], "effects": "read"}
        ],
        name="notes",
    )
    return agent, files


def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text(FILE_TEXT, encoding="utf-8")
    return data


def read_turns(data: Path) -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [
                {"id": "c1", "name": "fs_read_text_file", "arguments": {"path": str(data / "notes.txt")}}
            ],
            "usage": {"input_tokens": 120, "output_tokens": 7},
        },
        {"text": "done", "usage": {"input_tokens": 150, "output_tokens": 3}},
    ]


async def test_agent_run_model_tool_and_mcp_spans(
    spans: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    node: str,
    filesystem_js: str,
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path)
    agent, files = fs_agent(node, filesystem_js, data, read_turns(data))
    async with files:
        result = await agent.run("read my notes")
    assert result.text == "done"
    finished = spans.get_finished_spans()
    named = by_name(spans)
    run = named["invoke_agent notes"]
    chats = [s for s in finished if s.name == "chat scripted"]
    tool = named["execute_tool fs_read_text_file"]
    mcp = named["MCP send tools/call read_text_file"]

    # one trace, parent links: run > chat, run > tool > the SDK's MCP client span
    assert {s.context.trace_id for s in (run, *chats, tool, mcp)} == {run.context.trace_id}
    assert run.parent is None
    assert len(chats) == 2 and all(parent_of(c) == run.context.span_id for c in chats)
    assert parent_of(tool) == run.context.span_id
    assert parent_of(mcp) == tool.context.span_id
    assert mcp.kind == SpanKind.CLIENT and chats[0].kind == SpanKind.CLIENT
    assert named["MCP send tools/list"].parent is not None  # the listing is part of the run

    attrs = dict(run.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "notes"
    assert attrs["toolbridge.run.id"] == result.run_id
    assert attrs["gen_ai.usage.input_tokens"] == 270 and attrs["gen_ai.usage.output_tokens"] == 10
    assert run.status.status_code != StatusCode.ERROR

    first = dict(chats[0].attributes or {})
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.provider.name"] == "toolbridge"
    assert first["gen_ai.usage.input_tokens"] == 120 and first["gen_ai.usage.output_tokens"] == 7
    assert tuple(first["gen_ai.response.finish_reasons"]) == ("tool-calls",)
    assert tuple(dict(chats[1].attributes or {})["gen_ai.response.finish_reasons"]) == ("stop",)

    tattrs = dict(tool.attributes or {})
    assert tattrs["gen_ai.operation.name"] == "execute_tool"
    assert tattrs["gen_ai.tool.name"] == "fs_read_text_file"
    assert tattrs["gen_ai.tool.call.id"] == "c1"
    assert tattrs["gen_ai.tool.type"] == "extension"
    assert tool.status.status_code != StatusCode.ERROR
    assert dict(mcp.attributes or {})["mcp.method.name"] == "tools/call"

    points = metric_points(metric_reader)
    tokens = {
        (p.attributes["gen_ai.token.type"], p.sum)
        for p in points["gen_ai.client.token.usage"]
        if p.attributes.get("gen_ai.request.model") == "scripted"
    }
    assert ("input", 270) in tokens and ("output", 10) in tokens
    durations = points["gen_ai.client.operation.duration"]
    assert any(p.attributes["gen_ai.operation.name"] == "chat" for p in durations)
    mcp_points = [
        p
        for p in points["mcp.client.operation.duration"]
        if p.attributes.get("gen_ai.tool.name") == "read_text_file"
    ]
    assert mcp_points and mcp_points[0].attributes["network.transport"] == "pipe"
    assert mcp_points[0].attributes["mcp.method.name"] == "tools/call"


async def test_content_is_not_recorded_by_default(
    spans: InMemorySpanExporter,
    node: str,
    filesystem_js: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(telemetry.CAPTURE_ENV, raising=False)
    data = data_dir(tmp_path)
    (data / SECRET_ARG).mkdir()
    turns = [
        {"tool_calls": [{"name": "fs_read_text_file", "arguments": {"path": str(data / "notes.txt")}}]},
        {"tool_calls": [{"name": "fs_read_text_file", "arguments": {"path": str(data / SECRET_ARG / "x")}}]},
        {"text": "done"},
    ]
    agent, files = fs_agent(node, filesystem_js, data, turns)
    async with files:
        await agent.run(f"prompt mentioning {SECRET_ARG}")
    dump = _everything_recorded(spans)
    assert "execute_tool fs_read_text_file" in dump  # spans were recorded
    assert SECRET_ARG not in dump
    assert "needle-result" not in dump
    assert "notes.txt" not in dump


async def test_opt_in_capture_records_content_with_secrets_redacted(
    spans: InMemorySpanExporter,
    node: str,
    filesystem_js: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "SPAN_ONLY")
    register_secret("needle-result-91ab", name="NOTES_TOKEN")
    data = data_dir(tmp_path)
    agent, files = fs_agent(node, filesystem_js, data, read_turns(data))
    async with files:
        await agent.run("read my notes")
    named = by_name(spans)
    tool = dict(named["execute_tool fs_read_text_file"].attributes or {})
    assert "notes.txt" in tool["gen_ai.tool.call.arguments"]
    assert "***: the quarterly notes" in tool["gen_ai.tool.call.result"]
    chat = dict(named["chat scripted"].attributes or {})
    assert '"read my notes"' in chat["gen_ai.input.messages"]
    assert "fs_read_text_file" in chat["gen_ai.output.messages"]
    assert "needle-result-91ab" not in _everything_recorded(spans)


def _everything_recorded(spans: InMemorySpanExporter) -> str:
    """Every name, attribute and event of every finished span, as one string."""
    parts: list[str] = []
    for span in spans.get_finished_spans():
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        parts.append(str(span.status.description))
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
    return "\n".join(parts)


async def test_blocked_call_span(
    spans: InMemorySpanExporter,
    node: str,
    filesystem_js: str,
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path)
    files = McpToolProvider(StdioClient(node, [filesystem_js, str(data)]))
    model = ScriptedModel(
        turns=[
            {"tool_calls": [{"name": "fs_write_file", "arguments": {"path": "x", "content": "y"}}]},
            {"text": "never"},
        ]
    )
    agent = Agent(model, tool_providers=[{"provider": files, "prefix": "fs_", "include": ["write_file"]}])
    runtime = create_runtime(permissions={"allow": ["model:scripted"]})
    async with files:
        result = await runtime.run(agent, "write it")
    assert (result.outcome, result.error_code) == ("blocked", "PERMISSION_DENIED")
    named = by_name(spans)
    run = named["invoke_agent agent"]
    tool = named["execute_tool fs_write_file"]
    assert parent_of(tool) == run.context.span_id
    assert not any(s.name.startswith("MCP send tools/call") for s in spans.get_finished_spans())
    attrs = dict(tool.attributes or {})
    assert tool.status.status_code == StatusCode.ERROR
    assert attrs["error.type"] == "PERMISSION_DENIED"
    assert attrs["toolbridge.outcome"] == "blocked"
    assert attrs["toolbridge.error.code"] == "PERMISSION_DENIED"
    assert attrs["toolbridge.permission"] == "denied"
    assert attrs["toolbridge.permission.missing"] == "tool:fs_write_file"
    assert attrs["toolbridge.call.sent"] is False
    assert attrs["toolbridge.effects"] == "write"
    rattrs = dict(run.attributes or {})
    assert run.status.status_code == StatusCode.ERROR
    assert rattrs["error.type"] == "PERMISSION_DENIED" and rattrs["toolbridge.outcome"] == "blocked"
    assert rattrs["toolbridge.run.id"] == result.run_id


async def test_session_calls_have_their_own_tool_spans(
    spans: InMemorySpanExporter,
    node: str,
    filesystem_js: str,
    tmp_path: Path,
) -> None:
    data = data_dir(tmp_path)
    files = McpToolProvider(StdioClient(node, [filesystem_js, str(data)]))
    runtime = create_runtime(permissions={"allow": ["tool:read_text_file", "effect:read"]})
    bindings = [{"provider": files, "include": ["read_text_file", "write_file"], "effects": "read"}]
    async with files, runtime.session(tool_providers=bindings, principal="alice") as session:
        await session.call_tool("read_text_file", {"path": str(data / "notes.txt")})
        with pytest.raises(PolicyError):
            await session.call_tool("write_file", {"path": str(data / "x"), "content": "y"})
    read = [s for s in spans.get_finished_spans() if s.name == "execute_tool read_text_file"]
    (write,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool write_file"]
    assert len(read) == 1
    mcp = by_name(spans)["MCP send tools/call read_text_file"]
    assert parent_of(mcp) == read[0].context.span_id
    rattrs = dict(read[0].attributes or {})
    assert rattrs["toolbridge.outcome"] == "succeeded" and rattrs["toolbridge.principal"] == "alice"
    assert rattrs["toolbridge.run.id"] == session.run_id and rattrs["toolbridge.permission"] == "granted"
    wattrs = dict(write.attributes or {})
    assert wattrs["toolbridge.permission"] == "denied" and wattrs["toolbridge.principal"] == "alice"
    assert wattrs["error.type"] == "PERMISSION_DENIED"


async def test_outcome_unknown_span(
    spans: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    node: str,
    everything_js: str,
) -> None:
    ops = McpToolProvider(StdioClient(node, [everything_js, "stdio"]))
    model = ScriptedModel(
        turns=[
            {"tool_calls": [{"name": LONG, "arguments": {"duration": 5, "steps": 5}}]},
            {"text": "never"},
        ]
    )
    binding = {
        "provider": ops,
        "include": ["trigger-long-running-operation"],
        "effects": "write",
        "timeout_ms": 300,
        "cost_micros": 40,
    }
    agent = Agent(model, tool_providers=[binding])
    grants = ["model:scripted", "tool:trigger-long-running-operation", "effect:write"]
    runtime = create_runtime(permissions={"allow": grants}, limits={"max_cost_micros": 1000})
    async with ops:
        result = await runtime.run(agent, "go")
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    named = by_name(spans)
    tool = named["execute_tool trigger-long-running-operation"]
    mcp = named["MCP send tools/call trigger-long-running-operation"]
    assert parent_of(mcp) == tool.context.span_id
    attrs = dict(tool.attributes or {})
    assert tool.status.status_code == StatusCode.ERROR
    assert attrs["error.type"] == "OUTCOME_UNKNOWN"
    assert attrs["toolbridge.outcome"] == "outcome_unknown"
    assert attrs["toolbridge.permission"] == "granted"
    assert attrs["toolbridge.call.sent"] is True
    assert attrs["toolbridge.cost.reserved_micros"] == 40
    assert attrs["toolbridge.cost.settled_micros"] == 40  # charged in full: the server may have acted
    run = named["invoke_agent agent"]
    assert dict(run.attributes or {})["toolbridge.outcome"] == "outcome_unknown"
    runs = metric_points(metric_reader)["toolbridge.agent.runs"]
    assert any(
        p.attributes.get("toolbridge.outcome") == "outcome_unknown"
        and p.attributes.get("toolbridge.error.code") == "OUTCOME_UNKNOWN"
        for p in runs
    )
    calls = metric_points(metric_reader)["toolbridge.tool.calls"]
    assert any(
        p.attributes.get("toolbridge.outcome") == "outcome_unknown"
        and p.attributes.get("gen_ai.tool.name") == LONG
        for p in calls
    )
