"""OpenTelemetry traces and metrics for agent runs, model calls, tool calls, tasks and servers.

Only the OpenTelemetry **API** is used (`toolbridge[otel]`; the `mcp` SDK depends on it anyway),
imported on first use: `import toolbridge` never imports it. With no SDK configured, every
helper returns the shared no-op `NO_SPAN` after one check. With an SDK, the spans follow the
GenAI and MCP conventions: `invoke_agent {agent}` per run, `chat {model}` per model call,
`execute_tool {tool}` per tool call (the SDK's `MCP send tools/call …` span beneath it, the trace
context in the request's `_meta`), the runtime's decision as `toolbridge.*` attributes (a call
refused before it ran is a span ended at once), `execute_task {tool}` / `task_instruction
{action}` in `serve-tasks`, and `server_span(...)` for a server's requests (the gateway). A
failure is status ERROR with `error.type` = the toolbridge code; exceptions are not recorded
(their text may carry arguments or server output). Metrics: `gen_ai.client.token.usage`,
`gen_ai.client.operation.duration`, `gen_ai.execute_tool.duration`,
`mcp.client.operation.duration`, and the counters `toolbridge.agent.runs`,
`toolbridge.tool.calls`, `toolbridge.tool.blocked`, `toolbridge.cost`.

Content (prompts, arguments, results) is recorded only when
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` asks (`capture_mode`), redacted and bounded.
`TOOLBRIDGE_TELEMETRY=off` or `set_enabled(False)` turns toolbridge's own telemetry off.
The whole picture, with the attribute tables: docs/observability.md.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Literal

from . import _telemetry_parts as _parts
from ._telemetry_parts import (
    CAPTURE_ENV,
    MAX_CONTENT_CHARS,
    ChatRequest,
    ChatResponse,
    TokenUsage,
    capture_mode,
)
from ._telemetry_parts import Instruments as _Instruments

if TYPE_CHECKING:  # opentelemetry is an optional extra: imported on first use only
    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = [
    "CAPTURE_ENV",
    "MAX_CONTENT_CHARS",
    "NO_SPAN",
    "Span",
    "annotate",
    "capture_mode",
    "clear_current",
    "current_tool",
    "extract_context",
    "inject_context",
    "instruction_span",
    "is_enabled",
    "model_cost",
    "record_mcp_operation",
    "refused_tool",
    "server_span",
    "set_enabled",
    "start_chat",
    "start_run",
    "start_tool",
    "task_span",
    "with_context",
]

_CARRIER_KEYS = (("traceparent", 512), ("tracestate", 512), ("baggage", 8192))
_BAGGAGE_MEMBER = re.compile(r"\s*[!#$%&'*+\-.^_`|~0-9A-Za-z]+\s*=[^,;]*(;[^,]*)?\Z")
_OFF = frozenset({"0", "false", "off", "no", "disabled"})


_enabled = os.environ.get("TOOLBRIDGE_TELEMETRY", "").strip().lower() not in _OFF
_api: _parts.Api | Literal[False] | None = None  # the loaded API modules, False when opentelemetry is missing
_tracer_cache: tuple[TracerProvider, Tracer | None] | None = None  # (provider, tracer or None)
_meter_cache: tuple[MeterProvider, _Instruments | None] | None = None  # (provider, _Instruments or None)
_current_tool: ContextVar[Span | None] = ContextVar("toolbridge_current_tool", default=None)


def set_enabled(enabled: bool) -> None:
    """Turn toolbridge's own spans and metrics on or off for the process (default: on, unless
    `TOOLBRIDGE_TELEMETRY=off`). Off, every helper returns at once, as with no SDK configured."""
    global _enabled, _tracer_cache, _meter_cache
    _enabled = bool(enabled)
    _tracer_cache = _meter_cache = None


def is_enabled() -> bool:
    """Whether toolbridge emits spans and metrics at all (an SDK must still be configured)."""
    return _enabled


def _loaded() -> _parts.Api:
    """The OpenTelemetry API, loaded by whoever made the span at hand."""
    api = _api
    assert api, "no span records before the API is loaded"
    return api


def _load() -> _parts.Api | None:
    """The OpenTelemetry API, imported on first use (None when it is not installed)."""
    global _api
    if _api is None:
        try:
            _api = _parts.Api()
        except ImportError:
            _api = False
    return _api or None


def _tracer() -> Tracer | None:
    """toolbridge's tracer, or None when nothing would record (off, no API, no SDK provider)."""
    global _tracer_cache
    if not _enabled:
        return None
    api = _api or _load()
    if api is None or (not api.env_providers and getattr(api.trace, "_TRACER_PROVIDER", api) is None):
        return None
    provider = api.trace.get_tracer_provider()
    cached = _tracer_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer: Tracer | None = None
    if not isinstance(provider, api.no_trace):
        from ._version import __version__

        tracer = provider.get_tracer("toolbridge", __version__)
    _tracer_cache = (provider, tracer)
    return tracer


def _instruments() -> _Instruments | None:
    """The metric instruments, or None when no SDK meter provider is configured."""
    global _meter_cache
    if not _enabled:
        return None
    api = _api or _load()
    if api is None or (
        not api.env_providers and getattr(api.metrics_internal, "_METER_PROVIDER", api) is None
    ):
        return None
    provider = api.metrics.get_meter_provider()
    cached = _meter_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    instruments = None
    # The API's own stand-in before an SDK provider is set is a private proxy class.
    if not isinstance(provider, api.no_meter) and type(provider).__name__ != "_ProxyMeterProvider":
        from ._version import __version__

        instruments = _Instruments(provider.get_meter("toolbridge", __version__))
    _meter_cache = (provider, instruments)
    return instruments


# -- spans ---------------------------------------------------------------------------------------


class _Attached:
    """Makes a span the current one (and, for a tool span, the current tool) while entered."""

    __slots__ = ("_span", "_token", "_tool_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[Context] | None = None
        self._tool_token: Token[Span | None] | None = None

    def __enter__(self) -> Span:
        api = _loaded()
        self._token = api.context.attach(api.trace.set_span_in_context(self._span.otel))
        if self._span.call_id is not None:
            self._tool_token = _current_tool.set(self._span)
        return self._span

    def __exit__(self, *exc: object) -> None:
        if self._tool_token is not None:
            _current_tool.reset(self._tool_token)
        _loaded().context.detach(self._token)


class _NullAttach:
    __slots__ = ()

    def __enter__(self) -> Span:
        return NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_ATTACH = _NullAttach()


class Span:
    """A toolbridge span: an OpenTelemetry span and when it started (`NO_SPAN` when off).

    Methods never raise for telemetry's sake; attribute values that are None are skipped.
    """

    __slots__ = ("_ended", "call_id", "name", "otel", "started")

    recording = True

    otel: OtelSpan

    def __init__(self, otel: OtelSpan, name: str, call_id: str | None = None) -> None:
        self.otel = otel
        self.name = name
        self.call_id = call_id
        self.started = time.monotonic()
        self._ended = False

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set one attribute (None is skipped)."""
        if value is not None and not self._ended:
            self.otel.set_attribute(key, value)

    def update(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Set several attributes (None values are skipped)."""
        if not self._ended:
            self.otel.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def attach(self) -> AbstractContextManager[Span]:
        """A context manager making this span the current one (children nest under it)."""
        return _Attached(self)

    def context(self) -> Context | None:
        """An OpenTelemetry `Context` with this span current (for an explicit parent)."""
        context: Context = _loaded().trace.set_span_in_context(self.otel)
        return context

    def fail(self, code: str) -> None:
        """Mark the span failed: status ERROR and `error.type` = `code` (a toolbridge code)."""
        if self._ended:
            return
        self.otel.set_attribute("error.type", code)
        api = _loaded()
        self.otel.set_status(api.Status(api.StatusCode.ERROR, code))

    def content(self, key: str, value: object) -> None:
        """Record message content under `key` only when capture is on (redacted, bounded)."""
        mode = capture_mode()
        if mode == "off" or self._ended:
            return
        text = _parts.content_text(value)
        if mode in ("span", "span_and_event"):
            self.otel.set_attribute(key, text)
        if mode in ("event", "span_and_event"):
            self.otel.add_event("gen_ai.content", {key: text})

    def end(self) -> float:
        """End the span (once); returns its duration in seconds."""
        seconds = time.monotonic() - self.started
        if not self._ended:
            self._ended = True
            self.otel.end()
        return seconds


class _NoSpan(Span):
    __slots__ = ()

    recording = False

    def __init__(self) -> None:  # no `otel`: no method of this span reads it
        self.name = ""
        self.call_id = None
        self.started = 0.0
        self._ended = True

    def set(self, key: str, value: AttributeValue | None) -> None:
        return None

    def update(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        return None

    def attach(self) -> AbstractContextManager[Span]:
        return _NULL_ATTACH

    def context(self) -> Context | None:
        return None

    def fail(self, code: str) -> None:
        return None

    def content(self, key: str, value: object) -> None:
        return None

    def end(self) -> float:
        return 0.0


NO_SPAN: Span = _NoSpan()
"""The span every helper returns when nothing records: all its methods do nothing."""


def _start(
    tracer: Tracer,
    name: str,
    attributes: Mapping[str, AttributeValue | None],
    *,
    parent: Span | None = None,
    context: Context | None = None,
    kind: str = "INTERNAL",
    call_id: str | None = None,
) -> Span:
    if parent is not None and parent.recording:
        context = parent.context()
    otel = tracer.start_span(
        name,
        context=context,
        kind=_loaded().SpanKind[kind],
        attributes={k: v for k, v in attributes.items() if v is not None},
        record_exception=False,
        set_status_on_exception=False,
    )
    return Span(otel, name, call_id)


# -- agent runs and model calls ------------------------------------------------------------------


def start_run(agent_name: str, model: object) -> Span:
    """Start the `invoke_agent {agent}` span of a run (not made current: see `Span.attach`)."""
    tracer = _tracer()
    if tracer is None:
        return NO_SPAN
    provider, name = _parts.provider_of(model)
    return _start(
        tracer,
        f"invoke_agent {agent_name}",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": name,
        },
    )


def end_run(
    span: Span, *, run_id: str | None, usage: TokenUsage | None = None, error: BaseException | None = None
) -> None:
    """End a run's span with its id, total usage, and error (code and outcome) if it failed."""
    if not span.recording:
        return
    span.set("gen_ai.conversation.id", run_id)
    span.set("toolbridge.run.id", run_id)
    if usage is not None:
        span.set("gen_ai.usage.input_tokens", int(usage.input_tokens or 0))
        span.set("gen_ai.usage.output_tokens", int(usage.output_tokens or 0))
    code: str | None = None
    outcome = "succeeded"
    if error is not None:
        code = _parts.error_code(error)
        span.fail(code)
        span.set("toolbridge.error.code", code)
        given = error.outcome if isinstance(error, _parts.WithOutcome) else None
        outcome = given if isinstance(given, str) else "cancelled" if code == "CANCELLED" else "failed"
    span.set("toolbridge.outcome", outcome)
    span.end()
    instruments = _instruments()
    if instruments is not None:
        attrs = {"gen_ai.agent.name": span.name.partition(" ")[2], "toolbridge.outcome": outcome}
        if code is not None:
            attrs["toolbridge.error.code"] = code
        instruments.runs.add(1, attrs)


def start_chat(model: object, parent: Span, request: ChatRequest | None = None) -> Span:
    """Start the `chat {model}` span of one model call, as a child of `parent` (the run)."""
    tracer = _tracer()
    if tracer is None:
        return NO_SPAN
    provider, name = _parts.provider_of(model)
    span = _start(
        tracer,
        f"chat {name}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": name,
        },
        parent=parent,
        kind="CLIENT",
    )
    options = (request.options if request is not None else None) or {}
    if isinstance(options, Mapping):
        for key, attr in (
            ("temperature", "gen_ai.request.temperature"),
            ("top_p", "gen_ai.request.top_p"),
            ("max_tokens", "gen_ai.request.max_tokens"),
        ):
            value = options.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                span.set(attr, value)
    if request is not None and capture_mode() != "off":
        span.content("gen_ai.input.messages", _parts.messages_json(request.messages))
    return span


def end_chat(
    span: Span, model: object, response: ChatResponse | None = None, error: BaseException | None = None
) -> None:
    """End a model call's span: usage and finish reason (or the error); token and duration metrics."""
    if not span.recording:
        return
    error_type = None
    usage = response.usage if response is not None else None
    if response is not None:
        reason = response.finish_reason
        if isinstance(reason, str):
            span.set("gen_ai.response.finish_reasons", (reason,))
        if usage is not None:
            span.set("gen_ai.usage.input_tokens", int(usage.input_tokens or 0))
            span.set("gen_ai.usage.output_tokens", int(usage.output_tokens or 0))
        if capture_mode() != "off":
            span.content("gen_ai.output.messages", _parts.output_json(response))
    if error is not None:
        error_type = _parts.error_code(error)
        span.fail(error_type)
    seconds = span.end()
    instruments = _instruments()
    if instruments is None:
        return
    provider, name = _parts.provider_of(model)
    attrs: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": name,
    }
    if error_type is not None:
        attrs["error.type"] = error_type
    instruments.duration.record(seconds, attrs)
    if usage is not None:
        for kind, tokens in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            instruments.tokens.record(int(tokens or 0), {**attrs, "gen_ai.token.type": kind})


# -- tool calls ----------------------------------------------------------------------------------


def start_tool(
    name: str,
    call_id: str,
    *,
    tool_type: str = "extension",
    arguments: object = None,
    parent: Span | None = None,
) -> Span:
    """Start the `execute_tool {tool}` span of one call; `attach()` it around the call so the
    MCP client span nests under it (and `current_tool` finds it)."""
    tracer = _tracer()
    if tracer is None:
        return NO_SPAN
    span = _start(
        tracer,
        f"execute_tool {name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": tool_type,
        },
        parent=parent,
        call_id=call_id,
    )
    if arguments is not None:
        span.content("gen_ai.tool.call.arguments", arguments)
    return span


def end_tool(span: Span, result: object = None, error: BaseException | None = None) -> None:
    """End a tool call's span with its result (content only when captured) or its error code."""
    if not span.recording:
        return
    error_type = None
    if error is not None:
        error_type = _parts.error_code(error)
        span.fail(error_type)
        if not isinstance(error, _parts.WithOutcome) or error.outcome is None:
            span.set("toolbridge.outcome", "failed")
    elif result is not None and capture_mode() != "off":
        span.content(
            "gen_ai.tool.call.result", result.to_text() if isinstance(result, _parts.Texted) else result
        )
    seconds = span.end()
    instruments = _instruments()
    if instruments is not None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": span.name.partition(" ")[2]}
        if error_type is not None:
            attrs["error.type"] = error_type
        instruments.tool_duration.record(seconds, attrs)


def current_tool(call_id: str) -> Span | None:
    """The attached `execute_tool` span of call `call_id`, if the caller opened one."""
    span = _current_tool.get()
    return span if span is not None and span.call_id == call_id else None


def governed(
    span: Span,
    *,
    outcome: str,
    code: str | None = None,
    tool_id: str | None = None,
    effects: str | None = None,
    reserved: int | None = None,
    settled: int | None = None,
    principal: str | None = None,
    run_id: str | None = None,
    sent: bool = True,
    permission: str | None = "granted",
) -> None:
    """Record the runtime's decision on a tool span, and count it (`toolbridge.tool.calls`,
    `toolbridge.tool.blocked`, `toolbridge.cost`)."""
    if span.recording:
        span.update(
            {
                "toolbridge.outcome": outcome,
                "toolbridge.error.code": code,
                "toolbridge.tool.id": tool_id,
                "toolbridge.effects": effects,
                "toolbridge.permission": permission,
                "toolbridge.cost.reserved_micros": reserved,
                "toolbridge.cost.settled_micros": settled,
                "toolbridge.principal": principal,
                "toolbridge.run.id": run_id,
                "toolbridge.call.sent": sent,
            }
        )
        if code is not None:
            span.fail(code)
    instruments = _instruments()
    if instruments is not None:
        name = span.name.partition(" ")[2] or (tool_id or "")
        attrs = {"gen_ai.tool.name": name, "toolbridge.outcome": outcome}
        if code is not None:
            attrs["toolbridge.error.code"] = code
        instruments.calls.add(1, attrs)
        if outcome == "blocked":
            instruments.blocked.add(1, attrs)
        if settled:
            instruments.cost.add(settled, {"toolbridge.cost.kind": "tool", "gen_ai.tool.name": name})


def refused_tool(
    name: str,
    call_id: str,
    code: str,
    outcome: str,
    *,
    tool_id: str | None = None,
    effects: str | None = None,
    missing: str | None = None,
    principal: str | None = None,
    run_id: str | None = None,
) -> None:
    """A tool call the runtime refused before it ran: a span ended at once, and counted."""
    tracer = _tracer()
    span = NO_SPAN if tracer is None else start_tool(name, call_id)
    span.set("toolbridge.permission.missing", missing)
    governed(
        span,
        outcome=outcome,
        code=code,
        tool_id=tool_id,
        effects=effects,
        principal=principal,
        run_id=run_id,
        sent=False,
        permission="denied" if missing is not None else None,
    )
    span.end()


def annotate(attributes: Mapping[str, AttributeValue | None]) -> None:
    """Set attributes (None skipped) on the current span, when one records."""
    if _tracer() is not None:
        span = _loaded().trace.get_current_span()
        if span.is_recording():
            span.set_attributes({k: v for k, v in attributes.items() if v is not None})


def model_cost(model_id: str, settled: int) -> None:
    """The runtime charged a model call: on the current (`chat`) span, and counted."""
    annotate({"toolbridge.cost.settled_micros": settled})
    instruments = _instruments() if settled > 0 else None
    if instruments is not None:
        instruments.cost.add(settled, {"toolbridge.cost.kind": "model", "gen_ai.request.model": model_id})


def record_mcp_operation(
    method: str,
    started: float,
    *,
    tool: str | None = None,
    error: BaseException | None = None,
    transport: str,
) -> None:
    """One MCP request a toolbridge client sent at `time.monotonic()` `started`
    (`mcp.client.operation.duration`)."""
    instruments = _instruments()
    if instruments is None:
        return
    seconds = time.monotonic() - started
    attrs: dict[str, AttributeValue] = {"mcp.method.name": method, "network.transport": transport}
    if tool is not None:
        attrs["gen_ai.tool.name"] = tool
        attrs["gen_ai.operation.name"] = "execute_tool"
    if error is not None:
        attrs["error.type"] = _parts.error_code(error)
    instruments.mcp_duration.record(seconds, attrs)


# -- trace context and servers -------------------------------------------------------------------


def clear_current() -> None:
    """Leave the current task with no current span (the first line of a long-lived background
    task, a connection's owner), so that its spans are not filed under whatever span was current
    when it was started."""
    api = _api or _load()
    if api is not None:
        api.context.attach(api.context.Context())


def inject_context(meta: dict[str, object]) -> None:
    """Put the current trace context (`traceparent`, `tracestate`, `baggage`) into a `_meta` dict."""
    api = _api or _load()
    if api is not None and _enabled:
        api.propagate.inject(meta)


def with_context(params: Mapping[str, object] | None) -> Mapping[str, object] | None:
    """`params` with the current trace context added to its `_meta` (keys already there are
    kept), for a transport on which the SDK does not inject it (in-process direct dispatch)."""
    api = _api or _load()
    if api is None or not _enabled:
        return params
    carrier: dict[str, str] = {}
    api.propagate.inject(carrier)
    if not carrier:
        return params
    out = dict(params or {})
    given = out.get("_meta") or {}
    meta: dict[str, object] = dict(given) if isinstance(given, Mapping) else {}
    for key, value in carrier.items():
        meta.setdefault(key, value)
    out["_meta"] = meta
    return out


def extract_context(meta: Mapping[str, object] | None) -> Context | None:
    """The OpenTelemetry `Context` carried by a request's `_meta`, or None (absent or invalid)."""
    api = _api or _load()
    if api is None or not meta or not isinstance(meta, Mapping):
        return None
    # W3C trace context is short printable ASCII: anything else is dropped before the
    # propagators see it (they would log the hostile text).
    carrier = {
        k: v
        for k, limit in _CARRIER_KEYS
        if isinstance(v := meta.get(k), str) and len(v) <= limit and v.isascii() and v.isprintable()
    }
    baggage = carrier.get("baggage")
    if baggage is not None and not all(_BAGGAGE_MEMBER.match(m) for m in baggage.split(",")):
        del carrier["baggage"]
    if "traceparent" not in carrier:
        return None
    try:
        ctx: Context = api.propagate.extract(carrier)
    except (ValueError, TypeError):
        return None
    if not api.trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


@contextmanager
def _current(span: Span) -> Iterator[Span]:
    """`span` current while the block runs, failed with the error's code if it raises, then ended."""
    try:
        with span.attach():
            yield span
    except BaseException as exc:
        span.fail(_parts.error_code(exc))
        raise
    finally:
        span.end()


@contextmanager
def server_span(
    method: str,
    target: str | None = None,
    meta: Mapping[str, object] | None = None,
    **attributes: AttributeValue | None,
) -> Iterator[Span]:
    """A SERVER span for one request a toolbridge server received, current while it is handled.

    Named `{method} {target}` (the MCP convention), with `mcp.method.name` and, for `tools/call`,
    `gen_ai.tool.name`; its parent is the trace context in the request's `_meta` (so the client's
    trace continues through this server), else the current span. An exception leaving the block
    marks it failed with its toolbridge code and is re-raised. For the gateway:

    ```python
    # fragment
    with telemetry.server_span("tools/call", name, params.meta, **{"mcp.session.id": sid}):
        result = await upstream.call_tool(name, args)
    ```
    """
    tracer = _tracer()
    if tracer is None:
        yield NO_SPAN
        return
    attrs: dict[str, AttributeValue | None] = {"mcp.method.name": method, **attributes}
    if method == "tools/call" and target:
        attrs["gen_ai.tool.name"] = target
        attrs["gen_ai.operation.name"] = "execute_tool"
    span = _start(
        tracer,
        f"{method} {target}" if target else method,
        attrs,
        context=extract_context(meta),
        kind="SERVER",
    )
    with _current(span):
        yield span


@contextmanager
def task_span(tool: str, arguments: object = None) -> Iterator[Span]:
    """The `execute_task {tool}` span of one task run by `serve-tasks` (current while it runs)."""
    tracer = _tracer()
    if tracer is None:
        yield NO_SPAN
        return
    span = _start(
        tracer,
        f"execute_task {tool}",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.type": "function"},
    )
    if arguments is not None:
        span.content("gen_ai.tool.call.arguments", arguments)
    with _current(span):
        yield span


@contextmanager
def instruction_span(action: str, index: int, path: str) -> Iterator[Span]:
    """The `task_instruction {action}` span of one instruction (a fallback gets its own)."""
    tracer = _tracer()
    if tracer is None:
        yield NO_SPAN
        return
    span = _start(
        tracer,
        f"task_instruction {action}",
        {"toolbridge.task.action": action, "toolbridge.task.index": index, "toolbridge.task.path": path},
    )
    with _current(span):
        yield span
