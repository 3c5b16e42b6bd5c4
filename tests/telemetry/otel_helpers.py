"""Helpers of the telemetry tests: finished spans by name, parents, metric points."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from subprocess_helpers import free_port as free_port

VENV_BIN = Path(sys.executable).parent


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


def toolbridge_command() -> list[str]:
    script = VENV_BIN / "toolbridge"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from toolbridge.cli import main; sys.exit(main())"]


def otlp_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_SERVICE_NAME="toolbridge-under-test",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_METRIC_EXPORT_INTERVAL="500",
    )
    return env


async def wait_listening(proc: Any, port: int) -> None:
    with anyio.fail_after(30):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
                await stream.aclose()
                return
            except OSError:
                assert proc.returncode is None, "the HTTP task server exited"
                await anyio.sleep(0.1)
