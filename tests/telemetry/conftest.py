"""OpenTelemetry SDK for the telemetry tests: one global provider, an in-memory exporter per test.

The API allows one global tracer provider per process, so it is set once for the session; each
test adds its own `InMemorySpanExporter` (through a `SimpleSpanProcessor`) and stops it at the end,
so a test sees exactly the spans that ended while it ran. Metrics go to an `InMemoryMetricReader`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_STATE: dict[str, Any] = {}


class _Forward(SpanExporter):
    """The session's one exporter: hands spans to the current test's in-memory exporter."""

    target: InMemorySpanExporter | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        target = self.target
        if target is not None:
            target.export(spans)
        return SpanExportResult.SUCCESS


_FORWARD = _Forward()


def _providers() -> tuple[TracerProvider, InMemoryMetricReader]:
    if not _STATE:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        provider.add_span_processor(SimpleSpanProcessor(_FORWARD))
        _STATE.update(provider=provider, reader=reader)
    return _STATE["provider"], _STATE["reader"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _providers()
    exporter = InMemorySpanExporter()
    _FORWARD.target = exporter
    yield exporter
    _FORWARD.target = None


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    return _providers()[1]
