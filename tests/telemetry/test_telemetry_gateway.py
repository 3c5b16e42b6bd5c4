"""One trace from a client through `toolbridge gateway` (another process, Streamable HTTP) to the
upstream server behind it: the gateway's spans (exported over OTLP to a receiver started here)
continue the client's trace, and the upstream receives a `traceparent` naming the gateway's own
MCP client span."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import by_name, free_port, otlp_env, toolbridge_command, wait_listening
from otlp_receiver import otlp_receiver

from toolbridge import Agent, HttpClient, McpToolProvider, ScriptedModel

META_SERVER = Path(__file__).with_name("meta_server.py")
TOKEN = "trace-token-0123456789"


def gateway_manifest(tmp_path: Path) -> Path:
    text = f"""
kind: Gateway
metadata: {{ name: TraceGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Up
    prefix: up_
    effects: read
clients:
  - name: alice
    token: "${{{{ secrets.aliceToken }}}}"
    permissions: {{ allow: [tool:up_meta, effect:read] }}
---
kind: Runtime
metadata: {{ name: Policy }}
profile: ephemeral
permissions: {{ allow: [] }}
---
kind: Mcp.StdioClient
metadata: {{ name: UpMcp }}
command: {json.dumps(sys.executable)}
args: [{json.dumps(str(META_SERVER))}]
---
kind: AiMcp.ToolProvider
metadata: {{ name: Up }}
client: !ref UpMcp
"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_client_gateway_upstream_is_one_trace(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    manifest = gateway_manifest(tmp_path)
    port = free_port()
    with otlp_receiver() as (endpoint, received):
        proc = await anyio.open_process(
            [*toolbridge_command(), "gateway", str(manifest), "--transport", "http", "--port", str(port)],
            env={**otlp_env(endpoint), "ALICE_TOKEN": TOKEN},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await wait_listening(proc, port)
            gateway = McpToolProvider(
                HttpClient(f"http://127.0.0.1:{port}/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
            )
            model = ScriptedModel(
                turns=[{"tool_calls": [{"name": "up_meta", "arguments": {}}]}, {"text": "done"}]
            )
            async with gateway:
                result = await Agent(model, tool_providers=[gateway], name="caller").run("trace it")
            await anyio.to_thread.run_sync(
                lambda: received.wait_for(
                    lambda r: any(s["name"] == "MCP send tools/call meta" for s in r.spans)
                )
            )
        finally:
            proc.terminate()
            with anyio.move_on_after(10) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                proc.kill()
                await proc.wait()
            await proc.aclose()
    tool_result = result.steps[0].tool_results[0].result
    assert tool_result is not None, result.steps[0].tool_results[0].content
    upstream_saw = json.loads(tool_result.to_text())
    client_mcp = by_name(spans)["MCP send tools/call up_meta"]
    trace_id = client_mcp.context.trace_id
    server = received.span("tools/call up_meta")  # the gateway's SERVER span
    gateway_tool = received.span("execute_tool up_meta")
    gateway_mcp = received.span("MCP send tools/call meta")
    assert server["parent_span_id"] == client_mcp.context.span_id
    assert gateway_tool["parent_span_id"] == server["span_id"]
    assert gateway_mcp["parent_span_id"] == gateway_tool["span_id"]
    assert {server["trace_id"], gateway_tool["trace_id"], gateway_mcp["trace_id"]} == {trace_id}
    assert gateway_tool["attributes"]["toolbridge.outcome"] == "succeeded"
    assert gateway_tool["attributes"]["toolbridge.principal"] == "alice"
    _version, upstream_trace, upstream_parent, _flags = upstream_saw["traceparent"].split("-")
    assert int(upstream_trace, 16) == trace_id
    assert int(upstream_parent, 16) == gateway_mcp["span_id"]
