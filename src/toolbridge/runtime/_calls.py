"""Per-call rules: how a batch of tool calls is checked, and how each call runs.

The order of checks for one batch (a model turn, or `GovernedSession.call_tools`), all before any
call runs, so a refusal means the remote side received nothing (the turn rule):

1. every call names a tool the catalog has (`NOT_FOUND`);
2. every call has its grants: `tool:<id>`, each capability, `effect:<effects>` unless `none`
   (`PERMISSION_DENIED`); the refused calls are journaled `not_started`;
3. the run's tool-call count stays within `max_tool_calls` (`LIMIT_EXCEEDED`);
4. each call's arguments fit `max_input_bytes` (`LIMIT_EXCEEDED`) and, for declared tools, pass
   the input schema (`INVALID_INPUT`);
5. the whole batch's declared cost fits the budget (`BUDGET_EXCEEDED`); it is reserved;
6. each call is journaled (`running`, nothing sent); a journal that cannot record it stops the
   batch (`JOURNAL_UNAVAILABLE`).

Then each call: "request sent" is journaled **before** the request goes out (a journal that
cannot record it means the request is not sent: `JOURNAL_UNAVAILABLE`); the call runs under its
timeout (and the session's deadline); the response is journaled; the result is accepted
(declared MCP tools: envelope rules and output schema), size-checked, guarded (the runtime's
`tool_result` guards, then the tool's own), and only then returned. Any failure ends the run:
`failed` with the failure's code for effects `none` or when the request was never sent,
`outcome_unknown` when a request to a tool with effects was sent (a journal write that fails
after sending counts as such a failure). Nothing is retried. Error details of tools, servers,
transports and providers stop here: codes and generic messages only.

Discovered tools (a provider binding) are governed too: their permission id is the model-facing
name, their effects come from the binding (`effects=`, default `write`), tightened by server
annotations (`_permissions.effective_effects`), their capabilities from `capabilities=`; they
cost the binding's `cost_micros` (default 0) and time out after its `timeout_ms` (default
`limits.tool_timeout_ms`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import telemetry
from .._bounded import MAX_ARGUMENT_DEPTH, arguments_too_deep
from .._canonical import canonical_json
from .._deadlines import deadline_watch, takes_deadline
from ..calls import PlannedToolCall, ToolTarget
from ..errors import JsonRpcError, PolicyError, ToolbridgeError, ToolError
from ..tools import ToolResult
from ._answers import answered_code
from ._declared import DeclaredTool, ToolContext
from ._guards import Guard, GuardContext, run_guards
from ._journal import CallEnd, CallPlan, JournalWriteError
from ._limits import Budget, Reservation, parts_bytes
from ._outcomes import CODES, policy_error
from ._permissions import ToolGrantNeeds
from ._refusals import RefusedCalls, args_digest, binding_value, needs_of
from ._state import Plan, RunCore, loop_now

__all__ = ["CallRules", "TakesDeadline", "invoker", "ms", "rt_settle"]

log = logging.getLogger("toolbridge.runtime")

_TOOL_CODE_MAP: Final[dict[str, str]] = {
    "ERR_TOOL_INVALID_INPUT": "INVALID_INPUT",
    "ERR_TOOL_INVALID_OUTPUT": "INVALID_OUTPUT",
    "ERR_TOOL_TIMEOUT": "TIMEOUT",
    "ERR_TOOL_FAILED": "TOOL_FAILED",
}


def _result_bytes(result: ToolResult) -> int:
    if result.kind == "structured":
        media = result.media
        try:
            size = len(canonical_json(result.structured))
        except (TypeError, ValueError):
            size = len(result.to_text().encode("utf-8"))
        return size + parts_bytes(media) if media else size
    size = parts_bytes(result.parts)
    if result.kind == "raw":
        size += len(result.to_text().encode("utf-8"))
    return size


def _as_tool_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.of_text(value)
    return ToolResult.of_structured(value)


def rt_settle(budget: Budget, reservation: Reservation | None, actual: int | None) -> int:
    """Settle a reservation that may be missing (nothing reserved means nothing charged)."""
    if reservation is None:
        return 0
    return budget.settle(reservation, actual)


def ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


class TakesDeadline(functools.partial[Any]):
    """A discovered tool's call (its provider's `call_tool_until` with the tool's name and
    arguments) whose provider enforces the runtime's deadline itself: the rules call it with `deadline=`
    (event-loop time) instead of entering a cancel scope of their own around it, and it raises
    `TimeoutError` when that passes (`GovernedSession` makes one only for an `McpToolProvider`
    whose `call_tool` is its own, not a subclass's or an instance's replacement)."""

    __slots__ = ()


def invoker(
    target: ToolTarget, call: PlannedToolCall, context: object = None
) -> Callable[[], Awaitable[ToolResult]] | None:
    """How the runtime runs a discovered tool's call; None for a declared tool (the rules call its
    `send`). The session and the agent's governor both use it: one way to run a governed call.

    The provider's own coroutine, made when the rules call it: no coroutine layer of ours around
    it (a layer is paid again at every suspension of the call). An `McpToolProvider` takes the
    rules' deadline (`TakesDeadline` of its `call_tool_until`, which hands it to a toolbridge
    client's one cancel scope, or bounds another client with a scope of its own); any other
    provider, or one whose class or instance replaces `call_tool` (the gateway's, a user's
    wrapper, which `call_tool_until` would bypass), gets the rules' own scope around the call.
    A caller's `context` (the gateway's `CallContext`) goes to a provider that says it takes one
    (`accepts_context = True`) as `call_tool(name, args, context=)`.
    """
    source = target.source
    if isinstance(source, DeclaredTool):
        return None
    if context is not None and getattr(source, "accepts_context", False) is True:
        return functools.partial(source.call_tool, target.spec.name, call.arguments, context=context)
    if takes_deadline(source, "toolbridge.bridge"):
        return TakesDeadline(source.call_tool_until, target.spec.name, call.arguments)
    return functools.partial(source.call_tool, target.spec.name, call.arguments)


_Resolved = tuple[PlannedToolCall, ToolGrantNeeds, str, str | None, DeclaredTool | None]
"""A call with what it needs: (call, grant needs, kind, version, the declared tool or None)."""


@dataclass(frozen=True, slots=True)
class _Batch:
    """A checked batch, one entry per call in each list (none of the last three when denied)."""

    resolved: list[_Resolved]
    hashed: list[tuple[str, int]]
    """The SHA-256 and size of each call's canonical arguments."""
    denied: PolicyError | None = None
    """The permission error when the batch was denied (its calls are journaled `not_started`)."""
    validated: list[Any] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    timeouts: list[int] = field(default_factory=list)


class CallRules:
    """The per-call rules of one run or session (see the module docs), over its `RunCore`.

    `plan(calls, step)` checks and journals a batch (the turn rule); `run(call, step, invoke)`
    runs one planned call. A refused batch's rows and spans go through `RefusedCalls`.
    """

    __slots__ = ("core", "refusals")

    def __init__(self, core: RunCore, refusals: RefusedCalls) -> None:
        self.core = core
        self.refusals = refusals

    @staticmethod
    def _binding_int(binding: object, name: str) -> int | None:
        value = binding_value(binding, name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    async def plan(self, calls: Sequence[PlannedToolCall], step: int) -> None:
        """Check a whole batch (the turn rule) and plan each call; raises on the first refusal.

        A batch refused by a check gets a row per call (ended `not_started` with the code).
        """
        try:
            batch = self._plan_checked(calls, step)
        except PolicyError as exc:
            self.refusals.refused(calls, exc)
            await self.refusals.rows(calls, exc, step)
            raise
        try:
            await self._plan_rows(batch, step)
        except PolicyError as exc:
            self.refusals.refused(calls, exc)
            raise

    def _plan_checked(self, calls: Sequence[PlannedToolCall], step: int) -> _Batch:
        st, rt, limits = self.core.state, self.core.rt, self.core.rt.limits
        st.phase = "tools"
        self.core.check_deadline()
        # 1. every tool exists
        for call in calls:
            if call.target is None:
                raise self.core.fail("NOT_FOUND")
        resolved = [(call, *needs_of(self.core, call)) for call in calls]
        # arguments: hash and size (never stored)
        hashed = [args_digest(call.arguments) for call in calls]
        # 2. permissions, for the whole batch; denied calls are recorded as not started
        denied: str | None = None
        for _call, needs, _kind, _version, _tool in resolved:
            missing = rt.permissions.first_missing(needs)
            if missing is not None and denied is None:
                denied = missing
        if denied is not None:
            return _Batch(resolved, hashed, denied=self.core.fail("PERMISSION_DENIED", denied))
        # 3. tool-call count
        if st.tool_calls + len(calls) > limits.max_tool_calls:
            raise self.core.fail("LIMIT_EXCEEDED", "max_tool_calls")
        # 4. sizes and declared input schemas
        validated: list[Any] = []
        for (call, needs, _kind, _version, tool), (_digest, size) in zip(resolved, hashed, strict=True):
            if size > limits.max_input_bytes:
                raise self.core.fail("LIMIT_EXCEEDED", "max_input_bytes")
            if arguments_too_deep(call.arguments):  # nothing deeper is sent, nor validated, nor run
                raise self.core.fail(
                    "INVALID_INPUT",
                    f"arguments of tool {needs.tool_id!r} nest deeper than {MAX_ARGUMENT_DEPTH} levels",
                )
            if tool is not None:
                try:
                    validated.append(tool.validate_input(call.arguments))
                except ToolError:
                    raise self.core.fail("INVALID_INPUT", f"arguments of tool {needs.tool_id!r}") from None
            else:
                validated.append(call.arguments)
        # 5. the whole batch's cost (and each call's timeout)
        costs = []
        timeouts = []
        for call, _needs, _kind, _version, tool in resolved:
            if tool is not None:
                costs.append(tool.cost_micros)
                timeouts.append(tool.timeout_ms)
            else:
                binding = call.target.binding if call.target else None
                costs.append(self._binding_int(binding, "cost_micros") or 0)
                timeouts.append(self._binding_int(binding, "timeout_ms") or limits.tool_timeout_ms)
        if not st.budget.can_reserve(sum(costs)):
            raise self.core.fail("BUDGET_EXCEEDED", "the tool calls of this turn")
        st.tool_calls += len(calls)
        return _Batch(resolved, hashed, validated=validated, costs=costs, timeouts=timeouts)

    # Journaling a checked batch: each call gets its row (`running`, nothing sent) and its plan;
    # a denied batch gets rows ended `not_started` and raises.

    async def _plan_rows(self, batch: _Batch, step: int) -> None:
        st, journal = self.core.state, self.core.journal
        if batch.denied is not None:
            for (call, needs, kind, version, _tool), (digest, size) in zip(
                batch.resolved, batch.hashed, strict=True
            ):
                try:
                    row = await journal.plan(self._call_plan(call, step, needs, kind, version, digest, size))
                except PolicyError:
                    break
                await self.core.record_end(row, "not_started", "PERMISSION_DENIED", 0)
                self.refusals.event(call.call_id, needs.tool_id, needs.effects, "PERMISSION_DENIED")
            raise batch.denied
        for (call, needs, kind, version, tool), (digest, size), value, cost, timeout_ms in zip(
            batch.resolved, batch.hashed, batch.validated, batch.costs, batch.timeouts, strict=True
        ):
            reservation = st.budget.reserve(cost)
            try:
                row = await journal.plan(self._call_plan(call, step, needs, kind, version, digest, size))
            except JournalWriteError:
                rt_settle(st.budget, reservation, 0)
                raise self.core.fail(
                    "JOURNAL_UNAVAILABLE", "a call could not be recorded, so none was sent"
                ) from None
            except BaseException:  # cancelled while writing: nothing of this call was sent
                rt_settle(st.budget, reservation, 0)
                raise
            st.plans[(step, call.call_id)] = Plan(
                call=call, needs=needs, kind=kind, version=version, tool=tool, validated=value,
                timeout_ms=timeout_ms, row=row, reservation=reservation, cost_micros=cost, args_bytes=size,
            )  # fmt: skip

    def _call_plan(
        self,
        call: PlannedToolCall,
        step: int,
        needs: ToolGrantNeeds,
        kind: str,
        version: str | None,
        digest: str,
        size: int,
    ) -> CallPlan:
        """What the journal records of a call this batch plans."""
        return CallPlan(
            run_id=self.core.state.run_id, call_id=call.call_id, step=step, tool_id=needs.tool_id,
            tool_version=version, kind=kind, effects=needs.effects, args_sha256=digest, args_bytes=size,
        )  # fmt: skip

    def run(
        self, call: PlannedToolCall, step: int, invoke: Callable[[], Awaitable[ToolResult]] | None
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run one planned call under its rules; raises `PolicyError` when it does not succeed.

        The call's `execute_tool` span is the caller's (the agent's) when it opened one, else
        the session's own, current while the call runs. A plain function returning what to
        await: with no span of its own to open, that is the call itself (no coroutine layer
        around it, paid again at every suspension of the call).
        """
        if telemetry.current_tool(call.call_id) is not None:
            return self._run_call(call, step, invoke)
        span = telemetry.start_tool(call.name, call.call_id, arguments=call.arguments)
        if not span.recording:
            return self._run_call(call, step, invoke)
        return self._run_traced(span, call, step, invoke)

    async def _run_traced(
        self,
        span: telemetry.Span,
        call: PlannedToolCall,
        step: int,
        invoke: Callable[[], Awaitable[ToolResult]] | None,
    ) -> ToolResult:
        try:
            with span.attach():
                result = await self._run_call(call, step, invoke)
        except BaseException as exc:
            telemetry.end_tool(span, error=exc)
            raise
        telemetry.end_tool(span, result)
        return result

    def _observe(self, plan: Plan, outcome: str, code: str | None, charged: int | None) -> None:
        """The runtime's decision on the call's span, and the call counted."""
        telemetry.governed(
            telemetry.current_tool(plan.call.call_id) or telemetry.NO_SPAN,
            outcome=outcome,
            code=code,
            tool_id=plan.needs.tool_id,
            effects=plan.needs.effects,
            reserved=plan.cost_micros,
            settled=charged,
            principal=self.core.principal,
            run_id=self.core.state.run_id,
        )

    async def _run_call(
        self, call: PlannedToolCall, step: int, invoke: Callable[[], Awaitable[ToolResult]] | None
    ) -> ToolResult:
        st, rt = self.core.state, self.core.rt
        plan = st.plans.pop((step, call.call_id), None)
        if plan is None:  # the agent skipped before_tool_calls: refuse rather than run ungoverned
            error = self.core.fail("PERMISSION_DENIED", "tool call was not checked")
            await self.refusals.record([call], error, step)
            raise error
        if st.failure is not None:  # another call of this turn already ended the run
            charged = rt_settle(st.budget, plan.reservation, 0)
            await self.core.record_end(plan.row, "not_started", st.failure.code, charged)
            self.refusals.event(call.call_id, plan.needs.tool_id, plan.needs.effects, st.failure.code)
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
        self.core.emit("tool.started", meta)
        started = time.monotonic()
        sent = False
        received = False
        code: str | None = None
        try:
            await self.core.journal.request_sent(plan.row)
        except JournalWriteError:
            # No evidence, no call: the request is not sent.
            error = self.core.fail("JOURNAL_UNAVAILABLE", "a call could not be recorded, so none was sent")
            await self._end_unfinished(
                plan, meta, "not_started", "JOURNAL_UNAVAILABLE", sent=False, received=False, started=started
            )
            raise error from None
        except BaseException:  # cancelled while recording it: the request is not sent
            await self._end_unfinished(
                plan, meta, "not_started", "CANCELLED", sent=False, received=False, started=started
            )
            raise
        st.sent_unended[plan.row] = effects
        try:
            tctx: ToolContext | None = None  # made only for a tool that is handed one
            sent = True
            st.in_flight[plan.row] = effects
            raw: Any = None
            try:
                deadline = min(loop_now() + plan.timeout_ms / 1000, self.core.deadline)
                # A toolbridge client takes the deadline into its own cancel scope, and raises
                # `TimeoutError` when it passes: one scope for the call, not one in another.
                # A discovered tool's provider may take it the same way (`TakesDeadline`).
                if plan.tool is not None:
                    until = plan.tool.send_until(plan.validated, deadline)
                elif type(invoke) is TakesDeadline:
                    until = invoke(deadline=deadline)
                else:
                    until = None
                if until is not None:
                    raw = await until  # (no `tctx`: no signal to set on failure)
                else:
                    # A bare cancel scope (what `anyio.fail_after` wraps in a generator context
                    # manager) whose deadline the loop's `DeadlineWatch` keeps (no timer of its
                    # own); only the deadline can cancel it, so a caught cancellation is a timeout.
                    tctx = ToolContext(run_id=st.run_id, call_id=call.call_id, tool_id=plan.needs.tool_id)
                    watch = deadline_watch()
                    with watch.scope_class() as limit:  # anyio.CancelScope(), minus the backend lookup
                        watch.arm(limit, deadline)
                        try:
                            if plan.tool is not None:
                                raw = await plan.tool.send(plan.validated, tctx)
                            else:
                                assert invoke is not None  # only a declared tool's caller may omit it
                                raw = await invoke()
                        except BaseException:
                            # The call failed or was cancelled: a tool polling its signal stops
                            # (`McpTool.send` is the client's coroutine itself and leaves it here).
                            tctx.signal.set()
                            raise
                        finally:
                            watch.disarm(limit)
                    if limit.cancelled_caught:
                        raise TimeoutError
            except TimeoutError:
                if tctx is not None:
                    tctx.signal.set()
                code = "TIMEOUT"
                raise self._call_failure(code, effects, sent=True) from None
            except PolicyError as exc:
                code = exc.code if exc.code in CODES else "TOOL_FAILED"
                raise self._call_failure(code, effects, sent=True) from None
            except ToolbridgeError as exc:
                if exc.details.get("request_sent") is False:
                    # The client refused the request before it left the process (an argument
                    # no server could read): nothing was sent, so the outcome is known.
                    sent = False
                    code = "INVALID_INPUT"
                    raise self._call_failure(code, effects, sent=False) from None
                answered = answered_code(exc)
                if answered is not None:  # the server answered what happened (`_answers`)
                    received = True
                    code = answered
                    await self._answered(plan, meta, exc)
                    raise self._call_failure(code, effects, sent=True, answered=True) from None
                code = "TOOL_FAILED"
                if isinstance(exc, JsonRpcError):
                    meta["rpc_code"] = exc.rpc_code
                raise self._call_failure(code, effects, sent=True) from None
            except Exception:
                code = "TOOL_FAILED"
                raise self._call_failure(code, effects, sent=True) from None
            received = True
            st.in_flight.pop(plan.row, None)
            try:
                await self.core.journal.response_received(plan.row)
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
                if exc.details.get("is_error") is True:  # a declared MCP tool's `isError` answer
                    code = "TOOL_ERROR"
                    raise self._call_failure(code, effects, sent=True, answered=True) from None
                code = _TOOL_CODE_MAP.get(exc.code, "TOOL_FAILED")
                raise self._call_failure(code, effects, sent=True) from None
            size = _result_bytes(result)
            if size > rt.limits.max_output_bytes:
                code = "LIMIT_EXCEEDED"
                raise self._call_failure(code, effects, sent=True, detail="max_output_bytes")
            meta["result_bytes"] = size
            # guards: the runtime's, then the tool's own
            if self.core.rt.guards.tool_result or (plan.tool is not None and plan.tool.guards):
                result = await self._guard_result(plan, result)
        except PolicyError as exc:
            code = exc.code
            outcome = exc.outcome
            if code in ("GUARD_BLOCKED", "GUARD_UNAVAILABLE"):
                outcome = "blocked"
            # A refused call did not run: nothing is charged (its reservation is released).
            await self._end_unfinished(
                plan,
                meta,
                outcome,
                code,
                sent=sent and code not in ("TOOL_REFUSED", "INPUT_REQUIRED"),
                received=received,
                started=started,
            )
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
            await self._end_unfinished(
                plan, meta, outcome, code, sent=sent, received=received, started=started
            )
            raise
        reservation = plan.reservation
        charged = 0 if reservation is None else st.budget.settle(reservation, plan.cost_micros)
        try:
            # not shielded: a success cancelled while it is written is given to no one
            await self.core.journal.end_call(CallEnd(plan.row, "succeeded", None, charged), shielded=False)
        except JournalWriteError:
            # The result is not given to anyone: the journal could not say the call succeeded.
            error = self._call_failure("JOURNAL_UNAVAILABLE", effects, sent=True)
            outcome = error.outcome if error.outcome != "blocked" else "failed"
            await self._end_unfinished(
                plan, meta, outcome, error.code, sent=True, received=True, started=started, charged=charged
            )
            raise error from None
        except BaseException:  # cancelled while recording the success: the result is given to no one
            await self._end_unfinished(
                plan,
                meta,
                "cancelled",
                "CANCELLED",
                sent=True,
                received=True,
                started=started,
                charged=charged,
            )
            raise
        st.sent_unended.pop(plan.row, None)
        self.core.emit(
            "tool.completed", dict(meta, duration_ms=ms(started), outcome="succeeded", cost_micros=charged)
        )
        self._observe(plan, "succeeded", None, charged)
        return result

    async def _answered(self, plan: Plan, meta: dict[str, Any], exc: ToolbridgeError) -> None:
        """A failure the server answered with: the response is journaled as received (a write
        that fails leaves it unrecorded; the call's end still says what happened)."""
        if isinstance(exc, JsonRpcError):
            meta["rpc_code"] = exc.rpc_code
        self.core.state.in_flight.pop(plan.row, None)
        try:
            await self.core.journal.response_received(plan.row)
        except JournalWriteError:
            log.warning("the evidence journal could not be written")

    async def _end_unfinished(
        self,
        plan: Plan,
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
        st = self.core.state
        if charged is None:
            charged = rt_settle(st.budget, plan.reservation, None if sent else 0)
        await self.core.record_end(plan.row, outcome, code, charged)
        st.in_flight.pop(plan.row, None)
        self._observe(plan, outcome, code, charged)
        self.core.emit(
            "tool.completed",
            dict(meta, duration_ms=ms(started), outcome=outcome, code=code, response_received=received),
        )

    def _call_failure(
        self, code: str, effects: str, *, sent: bool, detail: str | None = None, answered: bool = False
    ) -> PolicyError:
        """The error for a call that failed: unknown when a request with effects was sent, unless
        the server `answered` what happened (`_answers`)."""
        if sent and effects != "none" and not answered:
            self.core.state.unknown = True
            error = policy_error("OUTCOME_UNKNOWN")
            error.details["cause"] = code
        else:
            error = policy_error(code, detail)
        if self.core.state.failure is None or error.outcome == "outcome_unknown":
            self.core.state.failure = error
        return error

    async def _guard_result(self, plan: Plan, result: ToolResult) -> ToolResult:
        guards: tuple[Guard, ...] = self.core.rt.guards.tool_result
        if plan.tool is not None:
            guards = guards + plan.tool.guards
        if not guards:
            return result
        gctx = GuardContext(
            run_id=self.core.state.run_id,
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
                timeout_ms=self.core.rt.limits.guard_timeout_ms,
                emit=self.core.emit,
                revalidate=tool.validate_output if tool is not None else None,
            )
        except ToolError:  # only `revalidate` raises it
            error = self.core.fail("INVALID_OUTPUT", "a guard's rewrite does not match the output schema")
            raise error from None
        except PolicyError as exc:
            if self.core.state.failure is None:
                self.core.state.failure = exc
            raise
        return ToolResult.of_structured(value) if tool is not None else _as_tool_result(value)
