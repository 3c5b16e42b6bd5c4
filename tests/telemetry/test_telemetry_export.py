"""Across processes: OTLP/HTTP export to a receiver started by the test (decoding the protobuf it
gets), and a task tool served over Streamable HTTP whose server spans join the client's trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import by_name, free_port, otlp_env, parent_of, toolbridge_command, wait_listening
from otlp_receiver import Received, otlp_receiver

from toolbridge import Agent, HttpClient, McpToolProvider, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SERVER_KIND = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER


def test_cli_run_exports_traces_and_metrics_over_otlp() -> None:
    manifest = ROOT / "examples" / "manifests" / "offline-assistant.yaml"
    with otlp_receiver() as (endpoint, received):
        out = subprocess.run(
            [*toolbridge_command(), "run", str(manifest), "--input", "What do my notes say?"],
            env=otlp_env(endpoint),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert out.returncode == 0, out.stderr
        # the command flushed before exiting: everything is there already
        names = received.names()
    assert "invoke_agent Assistant" in names
    run = received.span("invoke_agent Assistant")
    tool = received.span("execute_tool fs_list_directory")
    mcp = received.span("MCP send tools/call list_directory")
    chat = received.span("chat scripted")
    assert run["resource"]["service.name"] == "toolbridge-under-test"
    assert run["scope"] == "toolbridge"
    assert tool["parent_span_id"] == run["span_id"] == chat["parent_span_id"]
    assert mcp["parent_span_id"] == tool["span_id"]
    assert {run["trace_id"], tool["trace_id"], mcp["trace_id"]} == {run["trace_id"]}
    assert tool["attributes"]["gen_ai.tool.name"] == "fs_list_directory"
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert received.content_types == {"application/x-protobuf"}
    assert {"gen_ai.client.operation.duration", "mcp.client.operation.duration"} <= set(received.metrics)
    transports = {
        p["attributes"].get("network.transport") for p in received.metrics["mcp.client.operation.duration"]
    }
    assert transports == {"pipe"}


async def test_task_tool_over_http_joins_the_clients_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    tools = {
        "tools": [
            {
                "name": "greet",
                "description": "Say hello.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"who": {"type": "string"}},
                    "required": ["who"],
                },
                "task": {
                    "instructions": [
                        {"action": "wait", "params": {"ms": 5}},
                        {"action": "result", "params": {"value": {"greeting": "hello {{who}}"}}},
                    ]
                },
            }
        ]
    }
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    port = free_port()
    with otlp_receiver() as (endpoint, received):
        proc = await anyio.open_process(
            [*toolbridge_command(), "serve-tasks", str(path), "--transport", "http", "--port", str(port)],
            env=otlp_env(endpoint),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await wait_listening(proc, port)
            greeter = McpToolProvider(HttpClient(f"http://127.0.0.1:{port}/mcp"))
            model = ScriptedModel(
                turns=[{"tool_calls": [{"name": "greet", "arguments": {"who": "Ada"}}]}, {"text": "done"}]
            )
            async with greeter:
                result = await Agent(model, tool_providers=[greeter], name="caller").run("greet Ada")
            assert result.text == "done"
            await anyio.to_thread.run_sync(
                lambda: received.wait_for(
                    lambda r: len([s for s in r.spans if s["name"] == "task_instruction result"]) == 1
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
    client_tool = by_name(spans)["execute_tool greet"]
    client_mcp = by_name(spans)["MCP send tools/call greet"]
    assert parent_of(client_mcp) == client_tool.context.span_id
    server = _only(received, "tools/call greet")
    task = received.span("execute_task greet")
    wait = received.span("task_instruction wait")
    result_span = received.span("task_instruction result")
    # one trace: client tool span > client MCP span > server span (other process) > task > instructions
    assert server["trace_id"] == client_tool.context.trace_id
    assert server["parent_span_id"] == client_mcp.context.span_id
    assert server["kind"] == SERVER_KIND
    assert task["parent_span_id"] == server["span_id"]
    assert wait["parent_span_id"] == task["span_id"] == result_span["parent_span_id"]
    assert task["trace_id"] == wait["trace_id"] == client_tool.context.trace_id
    assert task["attributes"]["toolbridge.task.status"] == "success"
    assert wait["attributes"]["toolbridge.task.index"] == 0
    assert result_span["attributes"]["toolbridge.task.action"] == "result"
    assert "Ada" not in json.dumps([s["attributes"] for s in received.spans])  # no content by default


def _only(received: Received, name: str) -> dict[str, Any]:
    matching = [s for s in received.spans if s["name"] == name]
    assert len(matching) == 1, received.names()
    return matching[0]
