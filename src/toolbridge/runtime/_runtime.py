"""The governed runtime: runs an agent under permissions, limits, budgets, guards and a journal.

`create_runtime(...)` builds a `Runtime`; `await runtime.run(agent, input)` runs the agent with an
`AgentHooks` subclass (`_Governor`) that the agent calls at fixed points (see
`toolbridge.agent._hooks`). The governor is per run and owns its state; the runtime owns the
configuration (fixed at creation), the event bus and the journal.

The order of checks for one turn of tool calls (all before any call runs, so a refusal means the
remote side received nothing):

1. every call names a tool the agent has (`NOT_FOUND`);
2. every call has its grants: `tool:<id>`, each capability, `effect:<effects>` unless `none`
   (`PERMISSION_DENIED`);
3. the run's tool-call count stays within `max_tool_calls` (`LIMIT_EXCEEDED`);
4. each call's arguments fit `max_input_bytes` (`LIMIT_EXCEEDED`) and, for declared tools, pass
   the input schema (`INVALID_INPUT`);
5. the whole batch's declared cost fits the budget (`BUDGET_EXCEEDED`); it is reserved.

Then each call: the journal row is marked `request_sent` (committed) **before** the request goes
out; the call runs under its timeout; the response is marked; the result is accepted (declared
MCP tools: envelope rules and output schema), size-checked, guarded, and only then given to the
model. Any failure ends the run: `failed` with the failure's code for effects `none` or when the
request was never sent, `outcome_unknown` when a request to a tool with effects was sent. The
runtime never retries. Error details of tools, servers, transports and providers are dropped at
this boundary: the run result, events and journal carry codes and generic messages only.

Discovered tools (an `McpToolProvider` binding of the agent) are governed too: their permission id
is the model-facing name, their effects come from the binding (`effects=`, default `write`),
tightened by server annotations (see `_permissions.effective_effects`), and their capabilities
from `capabilities=`. They cost nothing and time out after `limits.tool_timeout_ms` (a binding
that carries integer `cost_micros` / `timeout_ms` attributes overrides these).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import pydantic

from ..agent._hooks import AgentHooks, PlannedToolCall, RunContext
from ..agent.models._base import Message
from ..content import AudioPart, ImagePart, TextPart
from ..errors import AgentError, ConfigError, ModelError, PolicyError, ToolbridgeError, ToolError
from ..tools import ToolResult, ToolSpec
from ._canonical import canonical_json, sha256_hex
from ._declared import DeclaredTool, ToolContext
from ._events import Event, EventBus
from ._guards import Guard, GuardContext, Guards, run_guards
from ._journal import CallEnd, JournalBackend, JournalWriteError, RunRecord
from ._journal_memory import MemoryJournal
from ._journal_sqlite import Journal
from ._limits import Budget, Limits, Reservation
from ._outcomes import CODES, GENERIC_MESSAGES, RuntimeResult, policy_error, worse
from ._permissions import Permissions, ToolGrantNeeds, effective_effects

__all__ = ["PROFILES", "Runtime", "create_runtime"]

log = logging.getLogger("toolbridge.runtime")

PROFILES: Final = ("ephemeral", "durable")

_TOOL_CODE_MAP: Final[dict[str, str]] = {
    "ERR_TOOL_INVALID_INPUT": "INVALID_INPUT",
    "ERR_TOOL_INVALID_OUTPUT": "INVALID_OUTPUT",
    "ERR_TOOL_TIMEOUT": "TIMEOUT",
    "ERR_TOOL_FAILED": "TOOL_FAILED",
}
_DEFAULT_MAX_OUTPUT_TOKENS: Final = 4096


_CACHEABLE: Final = (Message, ToolSpec)
"""Frozen types whose context size `_context_bytes` may remember for the rest of a run."""


def _new_run_id() -> str:
    return "run_" + uuid.uuid4().hex


@dataclass
class _Plan:
    """What `before_tool_calls` decided for one call, used by `call_tool`."""

    call: PlannedToolCall
    needs: ToolGrantNeeds
    kind: str
    version: str | None
    tool: DeclaredTool | None
    validated: Any
    timeout_ms: int
    row: int
    reservation: Reservation | None
    cost_micros: int
    args_bytes: int


@dataclass
class _RunState:
    """Mutable state of one run, owned by its governor."""

    run_id: str
    budget: Budget
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    step: int | None = None
    step_started: float = 0.0
    failure: PolicyError | None = None
    unknown: bool = False
    phase: str = "start"
    plans: dict[tuple[int, str], _Plan] = field(default_factory=dict)
    in_flight: dict[int, str] = field(default_factory=dict)
    sent_unended: dict[int, str] = field(default_factory=dict)
    """Rows whose `request_sent` is in the journal and whose end is not (row -> effects)."""
    unrecorded: dict[int, CallEnd] = field(default_factory=dict)
    """Call ends whose write failed: written again with the run's end."""
    model_reservation: Reservation | None = None
    model_started: float = 0.0


def _parts_bytes(parts: Any) -> int:
    """Size of content parts: UTF-8 bytes of text, base64 length of images and audio."""
    total = 0
    for part in parts:
        if isinstance(part, TextPart):
            total += len(part.text.encode("utf-8"))
        elif isinstance(part, ImagePart | AudioPart):
            total += len(part.data)
    return total


def _message_bytes(message: Any) -> int:
    """Approximate size of one message: its text and media, and its tool calls' arguments."""
    content = getattr(message, "content", "")
    total = len(content.encode("utf-8")) if isinstance(content, str) else _parts_bytes(content)
    for tool_call in getattr(message, "tool_calls", ()) or ():
        try:
            total += len(canonical_json(dict(tool_call.arguments))) + len(tool_call.name)
        except (TypeError, ValueError):
            continue  # arguments that are not JSON data are not counted (nor is that call's name)
    return total


def _spec_bytes(spec: Any) -> int:
    """Approximate size of one tool spec: its parameters schema and description."""
    try:
        return len(canonical_json(dict(spec.parameters))) + len(spec.description.encode("utf-8"))
    except (TypeError, ValueError):
        return 0


SizeCache = dict[int, tuple[Any, int]]
"""Sizes already computed, by `id()` of the object, with the object kept so the id stays its own."""


def _sized(item: Any, measure: Callable[[Any], int], cache: SizeCache | None) -> int:
    """`measure(item)`, remembered in `cache` for the frozen `Message`s and `ToolSpec`s."""
    if cache is None or type(item) not in _CACHEABLE:
        return measure(item)
    hit = cache.get(id(item))
    if hit is not None and hit[0] is item:
        return hit[1]
    size = measure(item)
    cache[id(item)] = (item, size)
    return size


def _context_bytes(request: Any, cache: SizeCache | None = None) -> int:
    """Approximate size of what one model call sends: message contents, tool calls and tool specs.

    Args:
        request: the model request (its `messages` and `tools` are read).
        cache: sizes remembered between the model calls of one run. A run re-sends its whole
            conversation at every step; messages and specs are frozen, so each one is measured
            once (the argument and schema mappings they hold are not changed once sent).
    """
    total = 0
    for message in getattr(request, "messages", ()) or ():
        total += _sized(message, _message_bytes, cache)
    for spec in getattr(request, "tools", ()) or ():
        total += _sized(spec, _spec_bytes, cache)
    return total


def _model_ceiling(model: Any, request: Any, context_bytes: int) -> int:
    """The most a model call may cost: every context byte a token, plus the output token cap."""
    prices = getattr(model, "prices", None)
    if prices is None or not hasattr(prices, "input_per_million_micros"):
        return 0
    options = getattr(request, "options", None) or {}
    max_out = options.get("max_tokens") or options.get("max_completion_tokens") or _DEFAULT_MAX_OUTPUT_TOKENS
    if not isinstance(max_out, int) or max_out <= 0:
        max_out = _DEFAULT_MAX_OUTPUT_TOKENS
    exact: int = context_bytes * prices.input_per_million_micros + max_out * prices.output_per_million_micros
    return -(-exact // 1_000_000)


def _model_cost(model: Any, usage: Any) -> int:
    prices = getattr(model, "prices", None)
    if prices is None or usage is None or not hasattr(prices, "cost_micros"):
        return 0
    try:
        return int(prices.cost_micros(usage))
    except Exception:
        return 0


def _result_bytes(result: ToolResult) -> int:
    if result.kind == "structured":
        try:
            return len(canonical_json(result.structured))
        except (TypeError, ValueError):
            return len(result.to_text().encode("utf-8"))
    size = _parts_bytes(result.parts)
    if result.kind == "raw":
        size += len(result.to_text().encode("utf-8"))
    return size


def _binding_value(binding: Any, name: str) -> Any:
    """An option of a discovered tool's binding: an attribute, or a key of a mapping binding."""
    value = getattr(binding, name, None)
    if value is None and isinstance(binding, Mapping):
        value = binding.get(name)
    return value


def _as_tool_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.of_text(value)
    return ToolResult.of_structured(value)


class _Governor(AgentHooks):
    """The hooks of one governed run."""

    def __init__(self, runtime: Runtime, state: _RunState) -> None:
        self.rt = runtime
        self.state = state
        self._sizes: SizeCache = {}

    # -- helpers ---------------------------------------------------------------------------------

    def _emit(self, type_: str, data: Mapping[str, Any]) -> None:
        self.rt._bus.emit(self.state.run_id, type_, data)

    def _fail(self, code: str, detail: str | None = None) -> PolicyError:
        error = policy_error(code, detail)
        if self.state.failure is None:
            self.state.failure = error
        return error

    def _step(self, ctx: RunContext) -> None:
        step = int(getattr(ctx, "step", 0) or 0)
        if self.state.step == step:
            return
        self.end_step()
        self.state.step = step
        self.state.step_started = time.monotonic()
        self._emit("step.started", {"step": step})

    def end_step(self, code: str | None = None) -> None:
        """Emit `step.completed` for the open step, if any."""
        if self.state.step is None:
            return
        data: dict[str, Any] = {
            "step": self.state.step,
            "duration_ms": round((time.monotonic() - self.state.step_started) * 1000, 3),
        }
        if code:
            data["code"] = code
        self._emit("step.completed", data)
        self.state.step = None

    async def before_run(self, ctx: RunContext, messages: Sequence[Any]) -> Sequence[Any]:
        ctx.run_id = self.state.run_id  # one id for the agent's result, the events and the journal
        ctx.state["toolbridge.runtime"] = self.rt
        return messages

    # -- model calls -----------------------------------------------------------------------------

    async def before_model_call(self, ctx: RunContext, model: Any, request: Any) -> None:
        self._step(ctx)
        st, limits = self.state, self.rt.limits
        st.phase = "model"
        model_id = str(getattr(model, "id", "") or "")
        if int(getattr(ctx, "step", 0) or 0) >= limits.max_steps:
            raise self._fail("LIMIT_EXCEEDED", "max_steps")
        if st.model_calls >= limits.max_model_calls:
            raise self._fail("LIMIT_EXCEEDED", "max_model_calls")
        if not self.rt.permissions.has(f"model:{model_id}"):
            raise self._fail("PERMISSION_DENIED", f"model:{model_id}")
        size = _context_bytes(request, self._sizes)
        if size > limits.max_context_bytes:
            raise self._fail("LIMIT_EXCEEDED", "max_context_bytes")
        ceiling = _model_ceiling(model, request, size)
        reservation = st.budget.reserve(ceiling)
        if reservation is None:
            raise self._fail("BUDGET_EXCEEDED", f"model:{model_id}")
        st.model_reservation = reservation
        st.model_calls += 1
        st.model_started = time.monotonic()
        self._emit(
            "model.started",
            {"model": model_id, "call": st.model_calls, "context_bytes": size, "reserved_micros": ceiling},
        )

    async def after_model_call(self, ctx: RunContext, model: Any, request: Any, response: Any) -> None:
        st = self.state
        usage = getattr(response, "usage", None)
        in_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        out_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        st.input_tokens += in_tokens
        st.output_tokens += out_tokens
        charged = 0
        if st.model_reservation is not None:
            charged = st.budget.settle(st.model_reservation, _model_cost(model, usage))
            st.model_reservation = None
        data: dict[str, Any] = {
            "model": str(getattr(model, "id", "") or ""),
            "call": st.model_calls,
            "duration_ms": round((time.monotonic() - st.model_started) * 1000, 3),
            "input_tokens": in_tokens,
            "output_tokens": out_tokens,
            "cost_micros": charged,
            "tool_calls": len(getattr(response, "tool_calls", ()) or ()),
        }
        if st.budget.over:
            data["code"] = "BUDGET_EXCEEDED"
            self._emit("model.completed", data)
            raise self._fail("BUDGET_EXCEEDED", "a model call cost more than the budget allows")
        self._emit("model.completed", data)
        st.phase = "after_model"

    def model_failed(self) -> None:
        """Settle a model reservation whose call raised (the full ceiling stays charged)."""
        st = self.state
        if st.model_reservation is not None:
            st.budget.settle(st.model_reservation, None)
            st.model_reservation = None
            self._emit("model.completed", {"call": st.model_calls, "code": "MODEL_FAILED"})

    # -- tool calls ------------------------------------------------------------------------------

    def _needs(self, call: PlannedToolCall) -> tuple[ToolGrantNeeds, str, str | None, DeclaredTool | None]:
        target = call.target
        assert target is not None
        source = target.source
        if target.declared or isinstance(source, DeclaredTool):
            if not isinstance(source, DeclaredTool):
                raise self._fail("NOT_FOUND", "declared tool of an unknown kind")
            return (
                ToolGrantNeeds(source.id, source.effects, source.capabilities),
                source.kind,
                source.version,
                source,
            )
        caps = _binding_value(target.binding, "capabilities")
        try:
            effects = effective_effects(_binding_value(target.binding, "effects"), target.spec.annotations)
        except ConfigError:
            effects = "host"  # an unreadable declaration is treated as the most powerful
        return ToolGrantNeeds(target.model_name, effects, tuple(caps or ())), "discovered", None, None

    @staticmethod
    def _binding_int(binding: Any, name: str) -> int | None:
        value = _binding_value(binding, name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    def _plan_row(
        self,
        step: int,
        call: PlannedToolCall,
        needs: ToolGrantNeeds,
        kind: str,
        version: str | None,
        digest: str,
        size: int,
    ) -> int:
        """Journal one planned call (outcome `running`, nothing sent); returns its row id."""
        return self.rt._journal.plan_call(
            self.state.run_id,
            call.call_id,
            step=step,
            tool_id=needs.tool_id,
            tool_version=version,
            kind=kind,
            effects=needs.effects,
            args_sha256=digest,
            args_bytes=size,
        )

    async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        st, rt, limits = self.state, self.rt, self.rt.limits
        st.phase = "tools"
        self._step(ctx)
        step = int(getattr(ctx, "step", 0) or 0)
        # 1. every tool exists
        for call in calls:
            if call.target is None:
                raise self._fail("NOT_FOUND")
        resolved = [(call, *self._needs(call)) for call in calls]
        # arguments: hash and size (never stored)
        hashed: list[tuple[str, int]] = []
        for call in calls:
            try:
                data = canonical_json(dict(call.arguments))
            except (TypeError, ValueError):
                data = b""
            hashed.append((sha256_hex(data), len(data)))
        # 2. permissions, for the whole batch; denied calls are recorded as not started
        denied: str | None = None
        for _call, needs, _kind, _version, _tool in resolved:
            missing = rt.permissions.missing(needs.required())
            if missing and denied is None:
                denied = missing[0]
        if denied is not None:
            error = self._fail("PERMISSION_DENIED", denied)
            for (call, needs, kind, version, _tool), (digest, size) in zip(resolved, hashed, strict=True):
                try:
                    row = self._plan_row(step, call, needs, kind, version, digest, size)
                except PolicyError:
                    break
                self._record_end(row, "not_started", "PERMISSION_DENIED", 0)
            raise error
        # 3. tool-call count
        if st.tool_calls + len(calls) > limits.max_tool_calls:
            raise self._fail("LIMIT_EXCEEDED", "max_tool_calls")
        # 4. sizes and declared input schemas
        validated: list[Any] = []
        for (call, needs, _kind, _version, tool), (_digest, size) in zip(resolved, hashed, strict=True):
            if size > limits.max_input_bytes:
                raise self._fail("LIMIT_EXCEEDED", "max_input_bytes")
            if tool is not None:
                try:
                    validated.append(tool.validate_input(call.arguments))
                except ToolError:
                    raise self._fail("INVALID_INPUT", f"arguments of tool {needs.tool_id!r}") from None
            else:
                validated.append(call.arguments)
        # 5. the whole batch's cost
        costs = []
        for call, _needs, _kind, _version, tool in resolved:
            if tool is not None:
                costs.append(tool.cost_micros)
            else:
                costs.append(
                    self._binding_int(call.target.binding if call.target else None, "cost_micros") or 0
                )
        if not st.budget.can_reserve(sum(costs)):
            raise self._fail("BUDGET_EXCEEDED", "the tool calls of this turn")
        st.tool_calls += len(calls)
        for (call, needs, kind, version, tool), (digest, size), value, cost in zip(
            resolved, hashed, validated, costs, strict=True
        ):
            reservation = st.budget.reserve(cost)
            if tool is not None:
                timeout_ms = tool.timeout_ms
            else:
                binding = call.target.binding if call.target else None
                timeout_ms = self._binding_int(binding, "timeout_ms") or limits.tool_timeout_ms
            try:
                row = self._plan_row(step, call, needs, kind, version, digest, size)
            except JournalWriteError:
                rt_settle(st.budget, reservation, 0)
                raise self._fail(
                    "JOURNAL_UNAVAILABLE", "a call could not be recorded, so none was sent"
                ) from None
            st.plans[(step, call.call_id)] = _Plan(
                call=call,
                needs=needs,
                kind=kind,
                version=version,
                tool=tool,
                validated=value,
                timeout_ms=timeout_ms,
                row=row,
                reservation=reservation,
                cost_micros=cost,
                args_bytes=size,
            )

    async def call_tool(
        self,
        ctx: RunContext,
        call: PlannedToolCall,
        invoke: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        st, rt = self.state, self.rt
        step = int(getattr(ctx, "step", 0) or 0)
        plan = st.plans.pop((step, call.call_id), None)
        if plan is None:  # the agent skipped before_tool_calls: refuse rather than run ungoverned
            raise self._fail("PERMISSION_DENIED", "tool call was not checked")
        if st.failure is not None:  # another call of this turn already ended the run
            charged = rt_settle(st.budget, plan.reservation, 0)
            self._record_end(plan.row, "not_started", st.failure.code, charged)
            raise st.failure
        effects = plan.needs.effects
        meta: dict[str, Any] = {
            "call_id": call.call_id,
            "tool_id": plan.needs.tool_id,
            "kind": plan.kind,
            "effects": effects,
            "args_bytes": plan.args_bytes,
        }
        if plan.version is not None:
            meta["tool_version"] = plan.version
        self._emit("tool.started", meta)
        started = time.monotonic()
        sent = False
        received = False
        code: str | None = None
        try:
            rt._journal.request_sent(plan.row)
        except JournalWriteError:
            # No evidence, no call: the request is not sent.
            error = self._fail("JOURNAL_UNAVAILABLE", "a call could not be recorded, so none was sent")
            self._end_unfinished(
                plan, meta, "not_started", "JOURNAL_UNAVAILABLE", sent=False, received=False, started=started
            )
            raise error from None
        st.sent_unended[plan.row] = effects
        try:
            tctx = ToolContext(run_id=st.run_id, call_id=call.call_id, tool_id=plan.needs.tool_id)
            sent = True
            st.in_flight[plan.row] = effects
            raw: Any = None
            try:
                # A bare cancel scope (what `anyio.fail_after` wraps in a generator context
                # manager); only its deadline can cancel it, so a caught cancellation is a timeout.
                with anyio.CancelScope(deadline=anyio.current_time() + plan.timeout_ms / 1000) as limit:
                    if plan.tool is not None:
                        raw = await plan.tool.send(plan.validated, tctx)
                    else:
                        raw = await invoke()
                if limit.cancelled_caught:
                    raise TimeoutError
            except TimeoutError:
                tctx.signal.set()
                code = "TIMEOUT"
                raise self._call_failure(code, effects, sent=True) from None
            except PolicyError as exc:
                code = exc.code if exc.code in CODES else "TOOL_FAILED"
                raise self._call_failure(code, effects, sent=True) from None
            except Exception:
                code = "TOOL_FAILED"
                raise self._call_failure(code, effects, sent=True) from None
            received = True
            st.in_flight.pop(plan.row, None)
            try:
                rt._journal.response_received(plan.row)
            except JournalWriteError:
                code = "JOURNAL_UNAVAILABLE"
                raise self._call_failure(code, effects, sent=True) from None
            # acceptance
            try:
                if plan.tool is not None:
                    value = plan.tool.accept(raw)
                    result = ToolResult.of_structured(value)
                else:
                    result = _as_tool_result(raw)
            except ToolError as exc:
                code = _TOOL_CODE_MAP.get(exc.code, "TOOL_FAILED")
                raise self._call_failure(code, effects, sent=True) from None
            size = _result_bytes(result)
            if size > rt.limits.max_output_bytes:
                code = "LIMIT_EXCEEDED"
                raise self._call_failure(code, effects, sent=True, detail="max_output_bytes")
            meta["result_bytes"] = size
            # guards: the runtime's, then the tool's own
            result = await self._guard_result(plan, result)
        except PolicyError as exc:
            code = exc.code
            outcome = exc.outcome
            if code in ("GUARD_BLOCKED", "GUARD_UNAVAILABLE"):
                outcome = "blocked"
            self._end_unfinished(plan, meta, outcome, code, sent=sent, received=received, started=started)
            raise
        except BaseException:
            # cancelled (the run was cancelled or timed out, or a sibling call failed)
            if sent and not received:
                outcome = "outcome_unknown" if effects != "none" else "cancelled"
                code = "OUTCOME_UNKNOWN" if effects != "none" else "CANCELLED"
                if effects != "none":
                    st.unknown = True
            else:
                outcome, code = "cancelled", "CANCELLED"
            self._end_unfinished(plan, meta, outcome, code, sent=sent, received=received, started=started)
            raise
        charged = rt_settle(st.budget, plan.reservation, plan.cost_micros)
        try:
            rt._journal.end_call(plan.row, outcome="succeeded", error_code=None, cost_micros=charged)
        except JournalWriteError:
            # The result is not given to anyone: the journal could not say the call succeeded.
            error = self._call_failure("JOURNAL_UNAVAILABLE", effects, sent=True)
            outcome = error.outcome if error.outcome != "blocked" else "failed"
            self._end_unfinished(
                plan, meta, outcome, error.code, sent=True, received=True, started=started, charged=charged
            )
            raise error from None
        st.sent_unended.pop(plan.row, None)
        self._emit(
            "tool.completed", dict(meta, duration_ms=_ms(started), outcome="succeeded", cost_micros=charged)
        )
        return result

    def _end_unfinished(
        self,
        plan: _Plan,
        meta: Mapping[str, Any],
        outcome: str,
        code: str,
        *,
        sent: bool,
        received: bool,
        started: float,
        charged: int | None = None,
    ) -> None:
        """Settle, journal and report a call that did not succeed; the caller re-raises.

        The reservation is charged in full once the request was sent (the remote side may have
        acted), and released when it was not.
        """
        st = self.state
        if charged is None:
            charged = rt_settle(st.budget, plan.reservation, None if sent else 0)
        self._record_end(plan.row, outcome, code, charged)
        st.in_flight.pop(plan.row, None)
        self._emit(
            "tool.completed",
            dict(meta, duration_ms=_ms(started), outcome=outcome, code=code, response_received=received),
        )

    def _record_end(self, row: int, outcome: str, code: str | None, charged: int) -> None:
        """Journal a call's end; when that write fails, keep it for the run's end."""
        try:
            self.rt._journal.end_call(row, outcome=outcome, error_code=code, cost_micros=charged)
        except JournalWriteError:
            log.warning("the evidence journal could not be written")
            self.state.unrecorded[row] = CallEnd(row, outcome, code, charged)
            return
        self.state.sent_unended.pop(row, None)

    def _call_failure(self, code: str, effects: str, *, sent: bool, detail: str | None = None) -> PolicyError:
        """The error for a call that failed: unknown when a request with effects was sent."""
        if sent and effects != "none":
            self.state.unknown = True
            error = policy_error("OUTCOME_UNKNOWN")
            error.details["cause"] = code
        else:
            error = policy_error(code, detail)
        if self.state.failure is None or error.outcome == "outcome_unknown":
            self.state.failure = error
        return error

    async def _guard_result(self, plan: _Plan, result: ToolResult) -> ToolResult:
        guards: tuple[Guard, ...] = self.rt.guards.tool_result
        if plan.tool is not None:
            guards = guards + plan.tool.guards
        if not guards:
            return result
        gctx = GuardContext(
            run_id=self.state.run_id,
            stage="tool_result",
            tool_id=plan.needs.tool_id,
            call_id=plan.call.call_id,
        )
        tool = plan.tool  # a declared tool's guards see its structured value, revalidated
        try:
            value = await run_guards(
                guards,
                result.structured if tool is not None else result,
                gctx,
                timeout_ms=self.rt.limits.guard_timeout_ms,
                emit=self._emit,
                revalidate=tool.validate_output if tool is not None else None,
            )
        except ToolError:  # only `revalidate` raises it
            raise self._fail("INVALID_OUTPUT", "a guard's rewrite does not match the output schema") from None
        except PolicyError as exc:
            if self.state.failure is None:
                self.state.failure = exc
            raise
        return ToolResult.of_structured(value) if tool is not None else _as_tool_result(value)


def rt_settle(budget: Budget, reservation: Reservation | None, actual: int | None) -> int:
    """Settle a reservation that may be missing (nothing reserved means nothing charged)."""
    if reservation is None:
        return 0
    return budget.settle(reservation, actual)


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _input_bytes(value: Any) -> int:
    if isinstance(value, pydantic.BaseModel):
        return len(value.model_dump_json().encode("utf-8"))
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    try:
        return len(canonical_json(value))
    except (TypeError, ValueError):
        total = 0
        if isinstance(value, Sequence):
            for item in value:
                content = getattr(item, "content", item)
                total += _input_bytes(content) if isinstance(content, str | Mapping) else len(repr(content))
        return total


def _code_for(exc: BaseException, phase: str) -> str:
    """The run code for an exception that came out of the agent (not raised by the governor).

    `phase` is where the run was: `model` while a model call was in flight.
    """
    if isinstance(exc, PolicyError):
        return exc.code if exc.code in CODES else "TOOL_FAILED"
    if isinstance(exc, ModelError):
        return "MODEL_FAILED"
    if isinstance(exc, AgentError):
        code = exc.code
        if "MAX_STEPS" in code:
            return "LIMIT_EXCEEDED"
        if "UNKNOWN_TOOL" in code:
            return "NOT_FOUND"
        if "OUTPUT" in code:
            return "INVALID_OUTPUT"
        if "INPUT" in code:
            return "INVALID_INPUT"
        if "COLLISION" in code:
            return "TOOL_COLLISION"
        return "TOOLS_UNAVAILABLE"  # other problems with the tool set: no call was made
    if isinstance(exc, ConfigError):
        return "INVALID_INPUT"
    if isinstance(exc, ToolbridgeError):
        return "TOOLS_UNAVAILABLE"  # listing a provider's tools failed (transport, protocol, ...)
    return "MODEL_FAILED" if phase == "model" else "TOOL_FAILED"


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_flatten(inner))
        return out
    return [exc]


class Runtime:
    """Runs agents under fixed permissions, limits, guards and a journal.

    Build it with `create_runtime`; the configuration cannot change afterwards.
    """

    def __init__(
        self,
        *,
        profile: str,
        permissions: Permissions,
        limits: Limits,
        guards: Guards,
        journal: JournalBackend,
    ) -> None:
        self.profile = profile
        self.permissions = permissions
        self.limits = limits
        self.guards = guards
        self._journal = journal
        self._pending_ends: dict[str, dict[str, Any]] = {}
        self._bus = EventBus()
        self._active: dict[str, anyio.CancelScope] = {}
        self._cancel_requested: set[str] = set()

    @property
    def journal_path(self) -> str:
        """Where the journal lives (`:memory:` for the ephemeral profile)."""
        return self._journal.path

    def subscribe(self, callback: Callable[[Event], object]) -> Callable[[], None]:
        """Receive every event of every run (metadata only); returns an unsubscribe function."""
        return self._bus.subscribe(callback)

    def inspect(self, run_id: str) -> RunRecord:
        """The run and the evidence of its tool calls.

        Raises:
            ConfigError: (`ERR_CONFIG`) when the journal has no such run.
        """
        record = self._journal.get_run(run_id, active=run_id in self._active)
        if record is None:
            raise ConfigError(f"no run {run_id!r} in the journal {self._journal.path!r}")
        return record

    def runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs in the journal (newest first, without calls)."""
        return self._journal.list_runs(limit)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run in progress; it ends `cancelled` (or `outcome_unknown`, see `run`).

        Returns:
            True when the run was in progress.
        """
        scope = self._active.get(run_id)
        if scope is None:
            return False
        self._cancel_requested.add(run_id)
        scope.cancel()
        return True

    def close(self) -> None:
        """Close the journal (after one more try at run ends it could not write before)."""
        self._flush_pending()
        self._journal.close()

    async def run(self, agent: Any, input: Any, *, run_id: str | None = None) -> RuntimeResult:
        """Run `agent` on `input` under this runtime's checks.

        Never raises for a failed run: the result's `outcome` and `error_code` say what happened.
        A run cancelled through `cancel(run_id)` returns `cancelled`; when the task calling `run`
        is cancelled from outside, the run is recorded as cancelled and the cancellation
        propagates. Either way, a call with effects that was in flight makes the outcome
        `outcome_unknown`.

        Args:
            agent: an `Agent` (anything with `run(input, hooks=...)`).
            input: the prompt or messages.
            run_id: an id for the run (default: a fresh one).

        A journal that cannot record the run's start (locked past its busy timeout, disk full)
        gives `failed` / `JOURNAL_UNAVAILABLE` with nothing run.

        Raises:
            ConfigError: (`ERR_CONFIG`) when `run_id` is already in the journal.
        """
        run_id = run_id or _new_run_id()
        state = _RunState(run_id=run_id, budget=Budget(self.limits.max_cost_micros))
        governor = _Governor(self, state)
        model = getattr(agent, "model", None)
        agent_label = f"{getattr(agent, 'name', None) or type(agent).__name__} ({getattr(model, 'id', '?')})"
        started = time.monotonic()
        self._bus.emit(run_id, "run.started", {"agent": agent_label, "profile": self.profile})
        refused = self._start_run(run_id, agent_label, None)
        if refused is not None:
            self._bus.emit(
                run_id,
                "run.completed",
                {
                    "outcome": refused.outcome,
                    "code": refused.error_code,
                    "duration_ms": _ms(started),
                    "cost_micros": 0,
                    "model_calls": 0,
                    "tool_calls": 0,
                },
            )
            self._bus.forget(run_id)
            return refused
        scope = anyio.CancelScope()
        self._active[run_id] = scope
        output: Any = None
        text: str | None = None
        steps: list[Any] = []
        error: BaseException | None = None
        timed_out = False
        outer_cancel = False
        try:
            with scope:
                with anyio.move_on_after(self.limits.max_duration_ms / 1000) as deadline:
                    try:
                        output, text, steps = await self._run_agent(agent, input, governor)
                    except Exception as exc:
                        error = exc
                timed_out = deadline.cancelled_caught
        except BaseException:
            outer_cancel = True
            raise
        finally:
            self._active.pop(run_id, None)
            cancelled = run_id in self._cancel_requested
            self._cancel_requested.discard(run_id)
            if outer_cancel:
                cancelled = True
            result = self._finish(
                state, governor, output, text, steps, error, timed_out=timed_out, cancelled=cancelled
            )
            result = self._end_run(state, result)
            governor.end_step(result.error_code)
            self._bus.emit(
                run_id,
                "run.completed",
                {
                    "outcome": result.outcome,
                    "code": result.error_code,
                    "duration_ms": _ms(started),
                    "cost_micros": result.cost_micros,
                    "model_calls": state.model_calls,
                    "tool_calls": state.tool_calls,
                },
            )
            self._bus.forget(run_id)
        return result

    async def _run_agent(
        self, agent: Any, input: Any, governor: _Governor
    ) -> tuple[Any, str | None, list[Any]]:
        st, limits = governor.state, self.limits
        if _input_bytes(input) > limits.max_input_bytes:
            raise governor._fail("LIMIT_EXCEEDED", "max_input_bytes")
        if self.guards.input:
            st.phase = "guards"
            input = await run_guards(
                self.guards.input,
                input,
                GuardContext(run_id=st.run_id, stage="input"),
                timeout_ms=limits.guard_timeout_ms,
                emit=governor._emit,
            )
        st.phase = "agent"
        try:
            result = await agent.run(input, hooks=governor)
        except BaseException:
            governor.model_failed()
            raise
        text = getattr(result, "text", None)
        output = getattr(result, "output", None)
        if output is None:
            output = text
        steps = list(getattr(result, "steps", None) or [])
        if _input_bytes(output if output is not None else "") > limits.max_output_bytes:
            raise governor._fail("LIMIT_EXCEEDED", "max_output_bytes")
        if self.guards.output:
            st.phase = "guards"
            try:
                output = await run_guards(
                    self.guards.output,
                    output,
                    GuardContext(run_id=st.run_id, stage="output"),
                    timeout_ms=limits.guard_timeout_ms,
                    emit=governor._emit,
                )
            except PolicyError as exc:
                if st.failure is None:
                    st.failure = exc
                raise
            if isinstance(output, str):
                text = output
        return output, text, steps

    def _start_run(self, run_id: str, label: str, principal: str | None) -> RuntimeResult | None:
        """Journal a run's start; a result (`JOURNAL_UNAVAILABLE`) when that cannot be done.

        Raises:
            ConfigError: (`ERR_CONFIG`) when `run_id` is already in the journal.
        """
        self._flush_pending()
        try:
            known = self._journal.get_run(run_id) is not None
        except ConfigError:
            known = False  # unreadable now: the insert below tells (a duplicate id fails it too)
        if known:
            raise ConfigError(f"run id {run_id!r} is already in the journal")
        try:
            self._journal.start_run(run_id, agent=label, profile=self.profile, principal=principal)
        except JournalWriteError:
            log.warning("the evidence journal could not record the start of a run")
            return RuntimeResult(
                outcome="failed",
                error_code="JOURNAL_UNAVAILABLE",
                error_message=GENERIC_MESSAGES["JOURNAL_UNAVAILABLE"],
                usage={"input_tokens": 0, "output_tokens": 0, "model_calls": 0},
                run_id=run_id,
            )
        return None

    def _end_run(self, state: _RunState, result: RuntimeResult) -> RuntimeResult:
        """Journal the run's end with every call end not yet recorded, all or nothing.

        When even that fails, the journal keeps the run `running`, and it is read back (once this
        process is gone) from what it holds: `outcome_unknown` if a call with effects has its
        request recorded as sent and no end, else `failed` / `INTERRUPTED`. The result returned
        is made to say the same outcome (`outcome_unknown`, or `failed` / `JOURNAL_UNAVAILABLE`),
        and the write is tried again at the next run's start and at `close()`.
        """
        ends = dict(state.unrecorded)
        for plan in state.plans.values():  # planned, never run: the turn was stopped before them
            code = result.error_code or "CANCELLED"
            charged = rt_settle(state.budget, plan.reservation, 0)
            ends.setdefault(plan.row, CallEnd(plan.row, "not_started", code, charged))
        state.plans.clear()
        end: dict[str, Any] = {
            "outcome": result.outcome,
            "error_code": result.error_code,
            "cost_micros": result.cost_micros,
            "input_tokens": state.input_tokens,
            "output_tokens": state.output_tokens,
            "model_calls": state.model_calls,
            "calls": tuple(ends.values()),
        }
        try:
            self._journal.end_run(state.run_id, **end)
            return result
        except JournalWriteError:
            log.warning("the evidence journal could not record the end of a run")
        for row in ends:
            if ends[row].outcome != "not_started":
                continue
            state.sent_unended.pop(row, None)
        unknown = any(effects != "none" for effects in state.sent_unended.values())
        code = "OUTCOME_UNKNOWN" if unknown else "JOURNAL_UNAVAILABLE"
        honest = RuntimeResult(
            outcome=CODES[code],
            error_code=code,
            error_message=GENERIC_MESSAGES[code],
            usage=result.usage,
            cost_micros=result.cost_micros,
            run_id=result.run_id,
        )
        self._pending_ends[state.run_id] = dict(end, outcome=honest.outcome, error_code=code)
        return honest

    def _flush_pending(self) -> None:
        """Write the run ends that could not be written before (best effort)."""
        for run_id, end in list(self._pending_ends.items()):
            try:
                self._journal.end_run(run_id, **end)
            except JournalWriteError:
                return
            del self._pending_ends[run_id]

    def _finish(
        self,
        state: _RunState,
        governor: _Governor,
        output: Any,
        text: str | None,
        steps: list[Any],
        error: BaseException | None,
        *,
        timed_out: bool,
        cancelled: bool,
    ) -> RuntimeResult:
        # calls still marked in flight (cancelled mid-call) decide `unknown`
        for row, effects in list(state.in_flight.items()):
            if effects != "none":
                state.unknown = True
            state.in_flight.pop(row, None)
        governor.model_failed()
        code: str | None = None
        if cancelled:
            code = "CANCELLED"
        elif timed_out:
            code = "TIMEOUT"
        elif error is not None:
            if state.failure is not None:
                code = state.failure.code
            else:
                policy = [e for e in _flatten(error) if isinstance(e, PolicyError)]
                known = [e for e in _flatten(error) if isinstance(e, ToolbridgeError)]
                pick: BaseException = policy[0] if policy else (known[0] if known else error)
                code = _code_for(pick, state.phase)
        if code is None and state.budget.over:
            code = "BUDGET_EXCEEDED"
        usage = {
            "input_tokens": state.input_tokens,
            "output_tokens": state.output_tokens,
            "model_calls": state.model_calls,
        }
        if code is None:
            return RuntimeResult(
                outcome="succeeded",
                output=output,
                usage=usage,
                cost_micros=state.budget.spent,
                run_id=state.run_id,
                text=text,
                steps=steps,
            )
        outcome = CODES.get(code, "failed")
        if state.unknown:
            outcome, code = worse(outcome, "outcome_unknown"), "OUTCOME_UNKNOWN"
        message = GENERIC_MESSAGES.get(code, "the run failed")
        if state.failure is not None and state.failure.code == code:
            message = state.failure.message  # built by `policy_error`: generic text + our own detail
        return RuntimeResult(
            outcome=outcome,
            error_code=code,
            error_message=message,
            usage=usage,
            cost_micros=state.budget.spent,
            run_id=state.run_id,
        )


def create_runtime(
    profile: str = "ephemeral",
    permissions: Mapping[str, Any] | Sequence[str] | Permissions | None = None,
    limits: Mapping[str, Any] | Limits | None = None,
    journal: str | os.PathLike[str] | JournalBackend | None = None,
    *,
    guards: Mapping[str, Any] | Guards | None = None,
) -> Runtime:
    """Create a governed runtime.

    Args:
        profile: `ephemeral` (the journal lives in memory) or `durable` (the journal is an SQLite
            file, written as things happen, so a crash loses nothing).
        permissions: `{"allow": [...]}`: the exact grants (see `toolbridge.runtime` docs).
            Nothing is allowed by default, not even the model.
        limits: overrides of the default limits (snake_case or camelCase names).
        journal: the `durable` profile's journal (required there, refused otherwise): the path
            of an SQLite file, or a `JournalBackend` (such as `Journal(path, durable=True,
            busy_timeout_ms=...)`).
        guards: `{"input": [...], "tool_result": [...], "output": [...]}`.

    Returns:
        The runtime.

    Raises:
        ConfigError: (`ERR_CONFIG`) for an unknown profile, a durable profile without a journal,
            a journal with the ephemeral profile, an unknown limit, bad permissions or guards.
    """
    if profile not in PROFILES:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    perms = Permissions.from_config(permissions)
    lim = Limits.from_config(limits)
    grd = Guards.from_config(guards)
    store: JournalBackend
    if profile == "durable":
        if isinstance(journal, JournalBackend):
            store = journal
        elif journal is None or str(journal) in ("", ":memory:"):
            raise ConfigError("the durable profile needs journal=<path of an SQLite file>")
        else:
            store = Journal(journal, durable=True)
    else:
        if journal is not None:
            raise ConfigError("journal= is for the durable profile; the ephemeral profile keeps it in memory")
        store = MemoryJournal()
    return Runtime(profile=profile, permissions=perms, limits=lim, guards=grd, journal=store)
