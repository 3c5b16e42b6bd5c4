"""The Agents SDK's own tracing (which, with OPENAI_API_KEY set, exports every tool call's input and
output to OpenAI) is off once `as_tools()` built the tools, unless `sdk_tracing=True` asks for it.

Each case runs in a fresh interpreter (the SDK's switch is process-wide): a real `Runner.run` with
a scripted model calls a toolbridge tool, and a recording trace processor (in place of the SDK's
exporter to OpenAI) sees what the SDK would have exported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = """
import asyncio, json, os
from typing import Any
from agents import Agent, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tracing import TracingProcessor, set_trace_processors
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from toolbridge import FunctionTools
from toolbridge.integrations.openai_agents import as_tools

os.environ["OPENAI_API_KEY"] = "sk-not-a-real-key-0000"
seen = []

class Recorder(TracingProcessor):
    def on_trace_start(self, trace): seen.append("trace")
    def on_trace_end(self, trace): pass
    def on_span_start(self, span): pass
    def on_span_end(self, span): seen.append(json.dumps(span.export(), default=str))
    def shutdown(self): pass
    def force_flush(self): pass

set_trace_processors([Recorder()])

class Scripted(Model):
    def __init__(self): self.turns = [[("secret_echo", {"text": "PAYLOAD-123"})], "done"]
    async def get_response(self, *a: Any, **k: Any) -> ModelResponse:
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            text = ResponseOutputText(type="output_text", text=turn, annotations=[])
            out = [ResponseOutputMessage(
                id="m", type="message", role="assistant", status="completed", content=[text]
            )]
        else:
            out = [ResponseFunctionToolCall(
                type="function_call", call_id="c1", name=n, arguments=json.dumps(x)
            ) for n, x in turn]
        usage = Usage(requests=1, input_tokens=5, output_tokens=1)
        return ModelResponse(output=out, usage=usage, response_id=None)
    def stream_response(self, *a: Any, **k: Any) -> Any: raise NotImplementedError

tools = FunctionTools()

@tools.tool
def secret_echo(text: str) -> str:
    "Echo."
    return "echoed " + text

async def main():
    built = await as_tools(tools, SDK_TRACING)
    result = await Runner.run(Agent(name="a", model=Scripted(), tools=built), "go")
    print(json.dumps({"final": result.final_output, "seen": seen}))

asyncio.run(main())
"""


def run(option: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CODE.replace("SDK_TRACING", option)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("option", ["", "sdk_tracing=False"])
def test_by_default_the_sdk_traces_nothing(option: str) -> None:
    result = run(option)
    assert result["final"] == "done"
    assert result["seen"] == []


def test_sdk_tracing_true_leaves_the_sdk_tracing_on() -> None:
    """The opt-in: the SDK traces the run, tool input and output included (what it would export)."""
    result = run("sdk_tracing=True")
    seen = result["seen"]
    assert isinstance(seen, list) and "trace" in seen
    assert any("PAYLOAD-123" in span and "echoed" in span for span in seen), seen
