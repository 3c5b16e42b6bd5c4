"""The command line's OpenTelemetry set-up: `run --trace` and the standard OTLP variables.

- `--trace` collects the spans of the command while it runs and prints them as a tree on stderr
  when it ends (name, duration, `ok` or `error <code>`). It needs the OpenTelemetry SDK
  (`pip install 'toolbridge[otel-sdk]'`); without it the command stops with one line naming the
  extra.
- `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
  `..._METRICS_ENDPOINT`) exports traces and metrics over OTLP/HTTP to a collector, with the
  exporter's own variables (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, ...), when
  `toolbridge[otlp]` is installed (else a warning says what to install, and the command runs).

When the process already has an SDK `TracerProvider` (toolbridge's CLI called from a program that
configured one), it is used as it is: `--trace` adds its collector to it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..errors import ConfigError
from ..sanitize import visible_text

__all__ = ["TraceSetup", "format_tree", "setup"]

_TRACE_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_METRIC_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
_MAX_TREE_SPANS = 2000


class TraceSetup:
    """What `setup` configured; `finish()` flushes exporters and prints the `--trace` tree."""

    def __init__(self) -> None:
        self.collector: Any = None
        self.flush: list[Any] = []  # what exports the rest when the command ends

    def finish(self, out: TextIO | None = None) -> None:
        for flush in self.flush:
            try:
                flush()
            except Exception as exc:  # an unreachable collector does not fail the command
                print(f"toolbridge: warning: telemetry export failed: {type(exc).__name__}", file=sys.stderr)
        if self.collector is not None:
            self.collector.active = False
            text = format_tree(self.collector.spans)
            stream = out or sys.stderr
            try:
                stream.write(text)
                stream.flush()
            except (OSError, ValueError):
                pass


def _sdk_missing(what: str, extra: str) -> str:
    return f"{what} needs the OpenTelemetry SDK: pip install 'toolbridge[{extra}]'"


def setup(trace: bool) -> TraceSetup | None:
    """Configure tracing for one command (None when nothing was asked).

    Raises:
        ConfigError: `ERR_CONFIG` when `--trace` was given and the SDK is not installed.
    """
    otlp_traces = any(os.environ.get(name) for name in _TRACE_ENDPOINTS)
    otlp_metrics = any(os.environ.get(name) for name in _METRIC_ENDPOINTS)
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        otlp_traces = otlp_metrics = False
    if not trace and not otlp_traces and not otlp_metrics:
        return None
    try:
        from opentelemetry import metrics
        from opentelemetry import trace as otel_trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        if trace:
            raise ConfigError(_sdk_missing("--trace", "otel-sdk"), code="ERR_CONFIG") from None
        print(f"toolbridge: warning: {_sdk_missing('OTLP export', 'otlp')}", file=sys.stderr)
        return None
    result = TraceSetup()
    provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "toolbridge"})
        otel_trace.set_tracer_provider(TracerProvider(resource=resource))
        provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # a provider of another kind was set before
        if trace:
            raise ConfigError("--trace: the process already has a tracer provider of another kind")
        return None
    if trace:
        result.collector = _collector()
        provider.add_span_processor(result.collector)
    if otlp_traces or otlp_metrics:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            print(f"toolbridge: warning: {_sdk_missing('OTLP export', 'otlp')}", file=sys.stderr)
            return result
        if otlp_traces:
            processor = BatchSpanProcessor(OTLPSpanExporter())
            provider.add_span_processor(processor)
            result.flush.append(processor.shutdown)  # exports what is left, then stops
        if otlp_metrics and type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
            reader = PeriodicExportingMetricReader(OTLPMetricExporter())
            metrics.set_meter_provider(MeterProvider(resource=provider.resource, metric_readers=[reader]))
            result.flush.append(reader.force_flush)
    return result


def _collector() -> Any:
    from opentelemetry.sdk.trace import SpanProcessor

    class Collector(SpanProcessor):
        """Keeps the spans that end while the command runs (bounded)."""

        def __init__(self) -> None:
            self.spans: list[Any] = []
            self.active = True

        def on_end(self, span: Any) -> None:
            if self.active and len(self.spans) < _MAX_TREE_SPANS:
                self.spans.append(span)

    return Collector()


def _status(span: Any) -> str:
    attrs = span.attributes or {}
    code = attrs.get("error.type")
    if span.status.status_code.name == "ERROR":
        return f"error {visible_text(str(code))[:80]}" if code else "error"
    outcome = attrs.get("toolbridge.outcome")
    return visible_text(outcome)[:40] if isinstance(outcome, str) and outcome != "succeeded" else "ok"


def format_tree(spans: Sequence[Any]) -> str:
    """The spans as an indented tree, roots in start order: `name  12.3 ms  ok|error CODE`."""
    ids = {span.context.span_id for span in spans}
    children: dict[int | None, list[Any]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    for group in children.values():
        group.sort(key=lambda s: s.start_time or 0)
    lines = ["trace:"] if spans else ["trace: no spans were recorded"]

    def walk(span: Any, prefix: str, last: bool, depth: int) -> None:
        duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        branch = "" if depth == 0 else ("└─ " if last else "├─ ")
        name = visible_text(span.name)[:200]
        lines.append(f"{prefix}{branch}{name}  {duration:.1f} ms  {_status(span)}")
        kids = children.get(span.context.span_id, [])
        below = prefix + ("" if depth == 0 else ("   " if last else "│  "))
        for i, child in enumerate(kids):
            walk(child, below, i == len(kids) - 1, depth + 1)

    for root in children.get(None, []):
        walk(root, "  ", True, 0)
    if len(spans) >= _MAX_TREE_SPANS:
        lines.append(f"  … (only the first {_MAX_TREE_SPANS} spans are shown)")
    return "\n".join(lines) + "\n"
