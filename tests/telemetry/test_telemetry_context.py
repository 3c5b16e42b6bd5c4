"""Trace context crosses toolbridge's own stdio transport: the W3C `traceparent` (and `baggage`)
reach the server in the request's `_meta`, naming the SDK's MCP client span under the tool span."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import meta_server
import pytest
from mcp.server import Server
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import by_name, parent_of

from toolbridge import Agent, InProcessClient, McpToolProvider, ScriptedModel, StdioClient

META_SERVER = str(Path(__file__).with_name("meta_server.py"))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_traceparent_reaches_a_stdio_server(spans: InMemorySpanExporter, mode: str) -> None:
    server = McpToolProvider(StdioClient(sys.executable, [META_SERVER], mode=mode))
    model = ScriptedModel(turns=[{"tool_calls": [{"name": "meta", "arguments": {}}]}, {"text": "done"}])
    agent = Agent(model, tool_providers=[server], name="ctx")
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        async with server:
            result = await agent.run("go")
    finally:
        context.detach(token)
    tool_result = result.steps[0].tool_results[0].result
    assert tool_result is not None
    received = json.loads(tool_result.to_text())
    named = by_name(spans)
    tool = named["execute_tool meta"]
    mcp = named["MCP send tools/call meta"]
    assert parent_of(mcp) == tool.context.span_id
    _version, trace_id, span_id, flags = received["traceparent"].split("-")
    assert int(trace_id, 16) == tool.context.trace_id
    assert int(span_id, 16) == mcp.context.span_id  # the request names the span that sent it
    assert int(flags, 16) & 1  # sampled
    assert received["baggage"] == "tenant=acme"


async def test_no_trace_context_without_a_current_span(spans: InMemorySpanExporter) -> None:
    """Nothing recording, nothing current: no made-up traceparent (the server sees none or an
    invalid one it ignores, never our tool span)."""
    async with StdioClient(sys.executable, [META_SERVER]) as client:
        result = await client.call_tool("meta", {})
    received = json.loads(result["content"][0]["text"])
    # The SDK's own client span records (a provider is set), so a traceparent names it - and only it.
    mcp = by_name(spans)["MCP send tools/call meta"]
    assert mcp.parent is None
    assert int(received["traceparent"].split("-")[2], 16) == mcp.context.span_id


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_traceparent_reaches_an_in_process_server(spans: InMemorySpanExporter, mode: str) -> None:
    """In process the SDK dispatches directly in "auto" mode (no JSON-RPC, no injection of its
    own): toolbridge adds the trace context to `_meta` itself, so the server sees it either way."""
    server = Server("meta", on_list_tools=meta_server.list_tools, on_call_tool=meta_server.call_tool)
    with trace.get_tracer("test").start_as_current_span("outer") as outer:
        async with InProcessClient(server, mode=mode) as client:
            result = await client.call_tool("meta", {})
    received = json.loads(result["content"][0]["text"])
    _version, trace_id, _span_id, _flags = received["traceparent"].split("-")
    assert int(trace_id, 16) == outer.get_span_context().trace_id
    server_span = [s for s in spans.get_finished_spans() if s.name == "tools/call meta"]
    assert len(server_span) == 1 and server_span[0].context.trace_id == outer.get_span_context().trace_id
