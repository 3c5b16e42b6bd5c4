"""The helpers on their own: `server_span` parents from `_meta`, hostile `_meta`, capture modes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_helpers import by_name, parent_of

from toolbridge import telemetry
from toolbridge.errors import McpTimeoutError
from toolbridge.redact import register_secret


def test_server_span_continues_the_trace_in_meta(spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("client"):
        meta: dict[str, Any] = {"progressToken": 3}
        telemetry.inject_context(meta)
    assert meta["traceparent"].startswith("00-")
    with telemetry.server_span("tools/call", "search", meta, **{"mcp.session.id": "s1"}) as span:
        assert span.recording
        with telemetry.task_span("inner"):
            pass
    named = by_name(spans)
    client, server, inner = named["client"], named["tools/call search"], named["execute_task inner"]
    assert server.kind == SpanKind.SERVER
    assert parent_of(server) == client.context.span_id and server.context.trace_id == client.context.trace_id
    assert parent_of(inner) == server.context.span_id
    attrs = dict(server.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call" and attrs["gen_ai.tool.name"] == "search"
    assert attrs["mcp.session.id"] == "s1"


def test_server_span_records_the_error_code_and_reraises(spans: InMemorySpanExporter) -> None:
    with pytest.raises(McpTimeoutError), telemetry.server_span("tools/list"):
        raise McpTimeoutError("upstream was slow")
    (span,) = spans.get_finished_spans()
    assert span.name == "tools/list" and span.parent is None
    assert span.status.status_code == StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "ERR_MCP_TIMEOUT"
    assert "slow" not in str(span.status.description) and not span.events


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {},
        {"traceparent": "garbage"},
        {"traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},  # all-zero ids are invalid
        {"traceparent": 17},
        {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" + "x" * 10_000},
        {"tracestate": "k=v"},
        {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01\n"},
        {"traceparent": "\uff10\uff10-" + "a" * 32 + "-" + "b" * 16 + "-01"},  # fullwidth digits
        ["not", "a", "mapping"],
    ],
)
def test_bad_trace_context_starts_a_new_trace(spans: InMemorySpanExporter, meta: Any) -> None:
    assert telemetry.extract_context(meta) is None
    with telemetry.server_span("ping", None, meta):
        pass
    (span,) = spans.get_finished_spans()
    assert span.parent is None


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["traceparent", "tracestate", "baggage", "other"]),
        st.one_of(st.text(max_size=300), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3)),
    )
)
def test_extract_never_raises(meta: dict[str, Any]) -> None:
    ctx = telemetry.extract_context(meta)
    if ctx is not None:
        value = meta["traceparent"]
        assert value.isascii() and value.isprintable() and len(value) <= 512
    if ctx is not None:
        assert trace.get_current_span(ctx).get_span_context().is_valid


def test_event_only_capture_records_an_event_not_attributes(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "EVENT_ONLY")
    register_secret("hunter2-secret", name="PW")
    span = telemetry.start_tool("login", "c1", arguments={"password": "hunter2-secret", "user": "ada"})
    telemetry.end_tool(span)
    (done,) = spans.get_finished_spans()
    assert "gen_ai.tool.call.arguments" not in (done.attributes or {})
    (event,) = done.events
    text = str(dict(event.attributes or {})["gen_ai.tool.call.arguments"])
    assert '"user":"ada"' in text and "hunter2-secret" not in text and "***" in text


def test_captured_content_is_bounded(spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")
    span = telemetry.start_tool("big", "c1", arguments={"blob": "x" * 100_000, "odd": object()})
    telemetry.end_tool(span)
    (done,) = spans.get_finished_spans()
    text = str(dict(done.attributes or {})["gen_ai.tool.call.arguments"])
    assert len(text) == telemetry.MAX_CONTENT_CHARS and text.endswith("…")


@pytest.mark.parametrize("value", ["", "false", "NO_CONTENT", "garbage", "0"])
def test_capture_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(telemetry.CAPTURE_ENV, value)
    assert telemetry.capture_mode() == "off"


def test_valid_baggage_is_kept_and_malformed_baggage_dropped() -> None:
    from opentelemetry import baggage

    parent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    ctx = telemetry.extract_context({"traceparent": parent, "baggage": "tenant=acme,region=eu;prop=1"})
    assert ctx is not None and baggage.get_baggage("tenant", ctx) == "acme"
    ctx = telemetry.extract_context({"traceparent": parent, "baggage": "tenant=acme,,/"})
    assert ctx is not None and baggage.get_all(ctx) == {}
    assert trace.get_current_span(ctx).get_span_context().trace_id == int("a" * 32, 16)
