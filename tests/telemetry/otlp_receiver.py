"""A minimal OTLP/HTTP receiver for tests: accepts `POST /v1/traces` and `/v1/metrics`, decodes the
protobuf bodies (opentelemetry-proto, installed with the exporter) and keeps what it received."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

MAX_BODY = 16 * 1024 * 1024


class Received:
    """What the receiver decoded: spans (flattened, with their resource's attributes) and metric names."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.metrics: dict[str, list[Any]] = {}
        self.content_types: set[str] = set()

    def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.05)
        raise AssertionError(f"the receiver did not get what was expected within {timeout}s: {self.names()}")

    def names(self) -> list[str]:
        return [s["name"] for s in self.spans]

    def span(self, name: str) -> dict[str, Any]:
        with self.lock:
            for span in self.spans:
                if span["name"] == name:
                    return span
        raise AssertionError(f"no span {name!r} among {self.names()}")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


def _record_traces(received: Received, body: bytes) -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for resource_spans in request.resource_spans:
        resource = _attrs(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.spans.append(
                    {
                        "name": span.name,
                        "trace_id": int.from_bytes(span.trace_id, "big"),
                        "span_id": int.from_bytes(span.span_id, "big"),
                        "parent_span_id": int.from_bytes(span.parent_span_id, "big")
                        if span.parent_span_id
                        else None,
                        "kind": span.kind,
                        "attributes": _attrs(span.attributes),
                        "status_code": span.status.code,
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                    }
                )


def _record_metrics(received: Received, body: bytes) -> None:
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                points = list(getattr(metric, kind).data_points) if kind else []
                received.metrics.setdefault(metric.name, []).extend(
                    {"attributes": _attrs(p.attributes), "kind": kind} for p in points
                )


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """Serve on a free loopback port; yields (endpoint URL, what was received). Stopped on exit."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with received.lock:
                received.content_types.add(str(self.headers.get("Content-Type")))
                if self.path == "/v1/traces":
                    _record_traces(received, body)
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    _record_metrics(received, body)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
