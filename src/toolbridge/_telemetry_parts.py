"""Parts of `telemetry`: the metric instruments, and message content in the GenAI conventions'
JSON shape for opt-in capture."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CAPTURE_ENV",
    "MAX_CONTENT_CHARS",
    "Instruments",
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

_SPAN_MODES = frozenset({"true", "1", "span_only", "span_and_event"})
_EVENT_MODES = frozenset({"event_only", "span_and_event"})


def bounded_text(value: Any, limit: int) -> str:
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


def _parts_json(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content or ():
        text = getattr(part, "text", None)
        if isinstance(text, str):
            parts.append({"type": "text", "content": text})
        else:
            parts.append({"type": "blob", "mime_type": getattr(part, "mime_type", None)})
    return parts


def messages_json(messages: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        role = getattr(message, "role", "user")
        parts = _parts_json(getattr(message, "content", ""))
        if role == "tool":
            parts = [
                {
                    "type": "tool_call_response",
                    "id": getattr(message, "tool_call_id", None),
                    "response": " ".join(p.get("content") or "" for p in parts),
                }
            ]
        for call in getattr(message, "tool_calls", ()) or ():
            parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
        out.append({"role": role, "parts": parts})
    return out


def output_json(response: Any) -> list[dict[str, Any]]:
    parts = _parts_json(getattr(response, "text", ""))
    for call in getattr(response, "tool_calls", ()) or ():
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    return [{"role": "assistant", "parts": parts, "finish_reason": getattr(response, "finish_reason", None)}]


_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)


_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


class Instruments:
    """toolbridge's metric instruments, made from one meter."""

    def __init__(self, meter: Any) -> None:
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


def content_text(value: Any) -> str:
    """Content as captured: text or JSON, cut at `MAX_CONTENT_CHARS`, secrets redacted."""
    return bounded_text(value, MAX_CONTENT_CHARS)


def error_code(error: BaseException) -> str:
    code = getattr(error, "code", None)
    if isinstance(code, str) and code:
        return code
    if isinstance(error, GeneratorExit) or type(error).__name__ == "CancelledError":
        return "CANCELLED"  # a cancelled call, or a stream closed before its end
    return type(error).__qualname__


def provider_of(model: Any) -> tuple[str, str]:
    """(gen_ai.provider.name, model name) of a toolbridge model object."""
    model_id = str(getattr(model, "id", "") or "")
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    if not isinstance(provider, str):
        provider, _, rest = model_id.partition(":") if ":" in model_id else ("toolbridge", "", model_id)
        name = name if isinstance(name, str) else rest
    if not isinstance(name, str) or not name:
        name = model_id.partition(":")[2] or model_id
    return {"google": "gcp.gemini"}.get(provider, provider), name
