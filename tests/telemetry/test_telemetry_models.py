"""`chat` spans of a real provider class (`OpenAIModel` on the official SDK, against a loopback
OpenAI-compatible server), streamed and not, a failing model call, and a stream closed early."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_helpers import by_name, parent_of

from toolbridge import Agent, OpenAIModel
from toolbridge.agent import TextDeltaEvent


def _fake_module() -> Any:
    path = Path(__file__).resolve().parents[1] / "agent" / "agent_fake_openai.py"
    spec = importlib.util.spec_from_file_location("telemetry_fake_openai", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fake = _fake_module()


@pytest.fixture
def server() -> Iterator[Any]:
    with fake.FakeOpenAI() as server:
        yield server


def model(server: Any) -> OpenAIModel:
    return OpenAIModel(
        "gpt-test", api_key="sk-test-000000000000", base_url=server.base_url, retry_backoff_s=0.01
    )


async def test_chat_span_of_a_provider_call(spans: InMemorySpanExporter, server: Any) -> None:
    server.replies.append(fake.Reply(body=fake.completion("Hello!", usage=(31, 5))))
    result = await Agent(model(server), name="helper", options={"temperature": 0.2}).run("hi")
    assert result.text == "Hello!"
    named = by_name(spans)
    chat, run = named["chat gpt-test"], named["invoke_agent helper"]
    assert parent_of(chat) == run.context.span_id and chat.kind == SpanKind.CLIENT
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-test"
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (31, 5)
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    assert dict(run.attributes or {})["gen_ai.provider.name"] == "openai"


async def test_streamed_chat_span(spans: InMemorySpanExporter, server: Any) -> None:
    server.replies.append(
        fake.Reply(
            chunks=[
                fake.chunk({"role": "assistant", "content": "Hel"}),
                fake.chunk({"content": "lo"}, finish_reason="stop"),
                fake.chunk({}, usage=(12, 2)),
            ]
        )
    )
    deltas = [
        e.text async for e in Agent(model(server), name="s").stream("hi") if isinstance(e, TextDeltaEvent)
    ]
    assert "".join(deltas) == "Hello"
    chat = by_name(spans)["chat gpt-test"]
    attrs = dict(chat.attributes or {})
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (12, 2)
    assert chat.status.status_code != StatusCode.ERROR


async def test_failing_model_call(spans: InMemorySpanExporter, server: Any) -> None:
    for _ in range(5):
        server.replies.append(
            fake.Reply(400, {"error": {"message": "bad request sk-leak", "type": "invalid"}})
        )
    with pytest.raises(Exception) as caught:
        await Agent(model(server), name="f").run("hi")
    code = getattr(caught.value, "code", None)
    assert isinstance(code, str) and code.startswith("ERR_MODEL")
    named = by_name(spans)
    for span in (named["chat gpt-test"], named["invoke_agent f"]):
        assert span.status.status_code == StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == code
        assert "sk-leak" not in str(span.status.description) and not span.events


async def test_a_stream_closed_early_ends_its_spans_cancelled(
    spans: InMemorySpanExporter, server: Any
) -> None:
    server.replies.append(
        fake.Reply(
            chunks=[fake.chunk({"role": "assistant", "content": "a"}), fake.chunk({"content": "b"})] * 20
        )
    )
    async with aclosing(Agent(model(server), name="early").stream("hi")) as events:
        async for event in events:
            if isinstance(event, TextDeltaEvent):
                break
    named = by_name(spans)
    run, chat = named["invoke_agent early"], named["chat gpt-test"]
    assert dict(run.attributes or {})["toolbridge.outcome"] == "cancelled"
    assert dict(run.attributes or {})["error.type"] == "CANCELLED"
    assert dict(chat.attributes or {})["error.type"] == "CANCELLED"
