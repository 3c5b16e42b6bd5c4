"""`toolbridge run --trace`, and what happens when OpenTelemetry parts are missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolbridge.cli import main

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "examples" / "manifests"

# Runs Python with some modules made unimportable (as if their package were not installed).
BLOCKER = """
import sys
class Blocker:
    def __init__(self, prefixes): self.prefixes = prefixes
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker(BLOCKED))
"""


def run_python(code: str, blocked: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER.replace("BLOCKED", repr(blocked)) + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_trace_prints_the_span_tree(spans: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = MANIFESTS / "governed-assistant.yaml"
    assert main(["run", str(manifest), "--input", "Summarise my notes", "--trace"]) == 1
    err = capsys.readouterr().err
    tree = err[err.index("trace:\n") :].splitlines()
    assert tree[1].startswith("  invoke_agent Assistant  ") and tree[1].endswith("error PERMISSION_DENIED")
    text = "\n".join(tree)
    assert "  ├─ execute_tool fs_read_file  " in text
    assert "  │  └─ MCP send tools/call read_file  " in text
    assert "  ├─ execute_tool greet  " in text
    assert "  │  └─ task_instruction result  " in text
    blocked = [line for line in tree if "execute_tool fs_write_file" in line]
    assert (
        len(blocked) == 1
        and blocked[0].startswith("  └─ ")
        and blocked[0].endswith("error PERMISSION_DENIED")
    )
    for line in tree[1:]:  # every line: name, a duration in ms, ok / error CODE
        assert " ms  " in line, line
    assert sum(1 for line in tree if "chat scripted" in line) == 2


def test_trace_without_the_sdk_is_one_clear_line() -> None:
    manifest = MANIFESTS / "offline-assistant.yaml"
    code = (
        "from toolbridge.cli import main\n"
        f"raise SystemExit(main(['run', {str(manifest)!r}, '--input', 'hi', '--trace']))\n"
    )
    out = run_python(code, ["opentelemetry.sdk"])
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "toolbridge[otel-sdk]" in lines[0] and "--trace" in lines[0]
    assert "Traceback" not in out.stderr


def test_otlp_variables_without_the_exporter_warn_and_the_run_goes_on() -> None:
    manifest = MANIFESTS / "offline-assistant.yaml"
    code = (
        "import os\n"
        "os.environ['OTEL_EXPORTER_OTLP_ENDPOINT'] = 'http://127.0.0.1:9'\n"
        "from toolbridge.cli import main\n"
        f"raise SystemExit(main(['run', {str(manifest)!r}, '--input', 'hi']))\n"
    )
    out = run_python(code, ["opentelemetry.exporter"])
    assert out.returncode == 0, out.stderr
    assert "toolbridge[otlp]" in out.stderr
    assert "Your notes are about" in out.stdout


def test_without_opentelemetry_everything_is_a_no_op() -> None:
    """No OpenTelemetry at all: the helpers return the no-op span and an agent runs as before."""
    code = """
import anyio
from toolbridge import Agent, FunctionTools, ScriptedModel, telemetry

tools = FunctionTools()

@tools.tool
def add(a: int, b: int) -> int:
    "Add."
    return a + b

model = ScriptedModel(turns=[{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "3"}])
result = anyio.run(Agent(model, tool_providers=[tools]).run, "add")
assert telemetry.start_run("a", model) is telemetry.NO_SPAN
parent = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
with telemetry.server_span("tools/call", "x", parent) as s:
    assert s is telemetry.NO_SPAN
assert telemetry.extract_context({"traceparent": "x"}) is None
import sys
assert not any(m.startswith("opentelemetry") for m in sys.modules)
print(result.text, result.steps[0].tool_results[0].content)
"""
    out = run_python(code, ["opentelemetry"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "3"


def test_helpers_return_the_no_op_span_without_an_sdk() -> None:
    """With the API but no SDK configured (a fresh process), nothing is built: the no-op span."""
    code = """
from toolbridge import telemetry
from toolbridge.agent.models._scripted import ScriptedModel
model = ScriptedModel(turns=["x"])
assert telemetry.start_tool("t", "c") is telemetry.NO_SPAN
assert telemetry.start_run("a", model) is telemetry.NO_SPAN
assert telemetry.start_chat(model, telemetry.NO_SPAN) is telemetry.NO_SPAN
with telemetry.task_span("t") as span:
    assert span is telemetry.NO_SPAN
print("ok")
"""
    out = run_python(code, [])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_set_enabled_turns_toolbridge_spans_off(spans: InMemorySpanExporter) -> None:
    from toolbridge import telemetry

    telemetry.set_enabled(False)
    try:
        assert telemetry.start_tool("t", "c") is telemetry.NO_SPAN
    finally:
        telemetry.set_enabled(True)
    span = telemetry.start_tool("t", "c")
    assert span.recording
    telemetry.end_tool(span)
    assert [s.name for s in spans.get_finished_spans()] == ["execute_tool t"]


def test_the_tree_shows_hostile_names_as_escapes() -> None:
    """Span names come from servers (tool names): the tree never prints control characters."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter as Memory
    from opentelemetry.trace import Status, StatusCode

    from toolbridge.cli._trace import format_tree

    memory = Memory()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    hostile = "execute_tool \x1b[2Jevil\u202e" + "x" * 500
    with tracer.start_as_current_span(hostile), tracer.start_as_current_span("child") as child:
        child.set_attribute("error.type", "\x1b]0;title\x07")
        child.set_status(Status(StatusCode.ERROR))
    text = format_tree(memory.get_finished_spans())
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    lines = text.splitlines()
    assert lines[0] == "trace:" and lines[1].startswith("  execute_tool \\x1b[2Jevil")
    assert all(len(line) < 320 for line in lines)
    assert lines[2].startswith("  └─ child  ") and "error \\x1b]0;title\\x07" in lines[2]
    assert format_tree([]) == "trace: no spans were recorded\n"
