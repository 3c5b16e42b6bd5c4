"""Parts of `telemetry`: the metric instruments, and message content in the GenAI conventions'
JSON shape for opt-in capture."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .content import AudioPart, ImagePart, TextPart

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

__all__ = [
    "CAPTURE_ENV",
    "MAX_CONTENT_CHARS",
    "Api",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "ChatToolCall",
    "Instruments",
    "Texted",
    "TokenUsage",
    "WithOutcome",
    "bounded_text",
    "capture_mode",
    "content_text",
    "error_code",
    "messages_json",
    "output_json",
    "provider_of",
]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' switch for recording message content (off unless set)."""

MAX_CONTENT_CHARS = 16_384
"""The longest captured content attribute; longer text is cut and ends with `…`."""


class TokenUsage(Protocol):
    """The token counts a span records (an agent's `Usage`)."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class ChatToolCall(Protocol):
    """A tool call a model asked for, as captured content (an agent's `ToolCall`)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> Mapping[str, object]: ...


class ChatMessage(Protocol):
    """One message of a model request, as captured content (an agent's `Message`)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str | Sequence[TextPart | ImagePart | AudioPart]: ...

    @property
    def tool_calls(self) -> Sequence[ChatToolCall]: ...

    @property
    def tool_call_id(self) -> str | None: ...


class ChatRequest(Protocol):
    """What a `chat` span reads of a model request (an agent's `ModelRequest`)."""

    @property
    def messages(self) -> Sequence[ChatMessage]: ...

    @property
    def options(self) -> Mapping[str, object]: ...


class ChatResponse(Protocol):
    """What a `chat` span reads of a model's answer (an agent's `ModelResponse`)."""

    @property
    def text(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[ChatToolCall]: ...

    @property
    def usage(self) -> TokenUsage: ...

    @property
    def finish_reason(self) -> str: ...


@runtime_checkable
class _Coded(Protocol):
    """An error that carries a code (every `ToolbridgeError`, and some others')."""

    code: object


@runtime_checkable
class _Identified(Protocol):
    """A model object with an id (`provider:model`)."""

    id: object


@runtime_checkable
class _Provided(Protocol):
    """A model object that names its provider itself."""

    provider: object


@runtime_checkable
class _Named(Protocol):
    """A model object that names its model itself (without the provider)."""

    model: object


@runtime_checkable
class WithOutcome(Protocol):
    """An error that names the run outcome it leads to (a `PolicyError`)."""

    outcome: object


@runtime_checkable
class Texted(Protocol):
    """A result that has a text form (a `ToolResult`)."""

    def to_text(self) -> str: ...


class Api:
    """The OpenTelemetry API's modules, imported when telemetry first needs them."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.context = context
        self.metrics = metrics
        self.propagate = propagate
        self.trace = trace
        self.SpanKind = SpanKind
        self.Status = Status
        self.StatusCode = StatusCode
        self.no_trace = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self.no_meter = (metrics.NoOpMeterProvider,)
        # The fast "nothing configured" test reads the API's globals (private: read defensively,
        # falling back to the public calls when they are not there).
        self.metrics_internal: ModuleType | None = None
        try:
            from opentelemetry.metrics import _internal as metrics_internal

            self.metrics_internal = metrics_internal
        except ImportError:  # pragma: no cover - a future API layout
            pass
        self.env_providers = any(
            name in os.environ for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
        )


_SPAN_MODES = frozenset({"true", "1", "span_only", "span_and_event"})
_EVENT_MODES = frozenset({"event_only", "span_and_event"})


def bounded_text(value: object, limit: int) -> str:
    """`value` as text (JSON unless a string), cut at `limit` characters, secrets redacted."""
    from .redact import redact

    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return redact(text)


def _parts_json(content: str | Sequence[TextPart | ImagePart | AudioPart]) -> list[dict[str, object]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, object]] = []
    for part in content or ():
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        else:
            parts.append({"type": "blob", "mime_type": part.media_type})
    return parts


def _call_json(call: ChatToolCall) -> dict[str, object]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}


def messages_json(messages: Sequence[ChatMessage]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for message in messages:
        role = message.role
        parts = _parts_json(message.content)
        if role == "tool":
            texts = (p.get("content") for p in parts)
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": " ".join(t if isinstance(t, str) else "" for t in texts),
                }
            ]
        parts.extend(_call_json(call) for call in message.tool_calls or ())
        out.append({"role": role, "parts": parts})
    return out


def output_json(response: ChatResponse) -> list[dict[str, object]]:
    parts = _parts_json(response.text)
    parts.extend(_call_json(call) for call in response.tool_calls or ())
    return [{"role": "assistant", "parts": parts, "finish_reason": response.finish_reason}]


_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)


_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class Instruments:
    """toolbridge's metric instruments, made from one meter."""

    def __init__(self, meter: Meter) -> None:
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used by model calls",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of model calls",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="Duration of tool calls",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.mcp_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="Duration of MCP requests sent by toolbridge clients",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.calls = meter.create_counter(
            "toolbridge.tool.calls", unit="{call}", description="Governed tool calls by outcome"
        )
        self.blocked = meter.create_counter(
            "toolbridge.tool.blocked", unit="{call}", description="Tool calls refused by the runtime"
        )
        self.runs = meter.create_counter(
            "toolbridge.agent.runs", unit="{run}", description="Agent runs by outcome"
        )
        self.cost = meter.create_counter(
            "toolbridge.cost", unit="{micro}", description="Cost charged by the runtime, in micro-units"
        )


def capture_mode() -> str:
    """What `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` asks: `off` (default), `span`,
    `event` or `span_and_event`."""
    raw = os.environ.get(CAPTURE_ENV, "").strip().lower()
    if raw == "span_and_event":
        return "span_and_event"
    if raw in _SPAN_MODES:
        return "span"
    if raw in _EVENT_MODES:
        return "event"
    return "off"


def content_text(value: object) -> str:
    """Content as captured: text or JSON, cut at `MAX_CONTENT_CHARS`, secrets redacted."""
    return bounded_text(value, MAX_CONTENT_CHARS)


def error_code(error: BaseException) -> str:
    code = error.code if isinstance(error, _Coded) else None
    if isinstance(code, str) and code:
        return code
    if isinstance(error, GeneratorExit) or type(error).__name__ == "CancelledError":
        return "CANCELLED"  # a cancelled call, or a stream closed before its end
    return type(error).__qualname__


def provider_of(model: object) -> tuple[str, str]:
    """(gen_ai.provider.name, model name) of a toolbridge model object."""
    model_id = str(model.id or "") if isinstance(model, _Identified) else ""
    provider = model.provider if isinstance(model, _Provided) else None
    name = model.model if isinstance(model, _Named) else None
    if not isinstance(provider, str):
        provider, _, rest = model_id.partition(":") if ":" in model_id else ("toolbridge", "", model_id)
        name = name if isinstance(name, str) else rest
    if not isinstance(name, str) or not name:
        name = model_id.partition(":")[2] or model_id
    return {"google": "gcp.gemini"}.get(provider, provider), name
