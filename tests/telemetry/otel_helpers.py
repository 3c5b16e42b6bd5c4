"""Helpers of the telemetry tests: finished spans by name, parents, metric points."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished spans by name (a name seen twice keeps the first)."""
    out: dict[str, ReadableSpan] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, span)
    return out


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Data points by metric name, from one collection."""
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    if data is None:
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out
