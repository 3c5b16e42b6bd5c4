"""Trace context crosses toolbridge's own stdio transport: the W3C `traceparent` (and `baggage`)
reach the server in the request's `_meta`, naming the SDK's MCP client span under the tool span."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from opentelemetry import baggage, context
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import by_name, parent_of

from toolbridge import Agent, McpToolProvider, ScriptedModel, StdioClient

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
