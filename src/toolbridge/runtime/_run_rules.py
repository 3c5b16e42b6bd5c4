"""Per-run rules: model calls (grants, counts, context size), the budget, and the run's outcome.

A model call needs `model:<id>`, stays within `max_model_calls` (and, for an agent run,
`max_steps`), sends at most `max_context_bytes`, and reserves its most expensive cost (every
context byte counted as a token, plus the output token cap, at the model's prices) before it is
made; the reservation is settled at the reported usage afterwards. A call that cost more than
the rest of the budget is recorded, and the run ends `BUDGET_EXCEEDED`.

The run's outcome comes from its first failure (`RunState.failure`, set by every rule), or from
what stopped it (cancelled, timed out, an error from the agent), made `outcome_unknown` when a
call with effects may have acted. The run's end is journaled with every call end an earlier
write could not record, in one transaction (see `_run_end`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from .. import telemetry
from ..agent.models import Usage
from ..errors import AgentError, ConfigError, ModelError, PolicyError, ToolbridgeError
from ._calls import ms, rt_settle
from ._journal import CallEnd, JournalWriteError
from ._limits import Reservation, model_ceiling, model_cost
from ._outcomes import CODES, GENERIC_MESSAGES, RuntimeResult, worse
from ._state import RunCore

__all__ = ["RunRules", "code_for", "flatten"]

log = logging.getLogger("toolbridge.runtime")


@dataclass
class _ModelCall:
    """A model call between `before_model_call` and `after_model_call` (or `on_model_call_error`)."""

    model_id: str
    number: int
    reservation: Reservation
    prices: Any
    started: float


class RunRules:
    """The per-run rules of one run or session (see the module docs), over its `RunCore`.

    `model_started` / `model_ended` / `model_failed` govern a model call (the session's
    `before_model_call` / `after_model_call` / `on_model_call_error`, and the agent's governor);
    `outcome` decides a run's result and `end_run` journals it.
    """

    __slots__ = ("core",)

    def __init__(self, core: RunCore) -> None:
        self.core = core

    def model_started(
        self,
        model_id: str,
        *,
        context_bytes: int = 0,
        max_output_tokens: int | None = None,
        prices: Any = None,
    ) -> None:
        """Check and reserve one model call before it is made (see `GovernedSession.before_model_call`)."""
        self.core.check_open()
        st, limits = self.core.state, self.core.rt.limits
        st.phase = "model"
        model_id = str(model_id)
        if st.model_calls >= limits.max_model_calls:
            raise self.core.fail("LIMIT_EXCEEDED", "max_model_calls")
        if not self.core.rt.permissions.has(f"model:{model_id}"):
            raise self.core.fail("PERMISSION_DENIED", f"model:{model_id}")
        if context_bytes > limits.max_context_bytes:
            raise self.core.fail("LIMIT_EXCEEDED", "max_context_bytes")
        ceiling = model_ceiling(prices, context_bytes, max_output_tokens)
        reservation = st.budget.reserve(ceiling)
        if reservation is None:
            raise self.core.fail("BUDGET_EXCEEDED", f"model:{model_id}")
        st.model_calls += 1
        st.model_reservations.append(
            _ModelCall(model_id, st.model_calls, reservation, prices, time.monotonic())
        )
        self.core.emit(
            "model.started",
            {
                "model": model_id,
                "call": st.model_calls,
                "context_bytes": context_bytes,
                "reserved_micros": ceiling,
            },
        )

    def model_ended(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_micros: int | None = None,
        tool_calls: int = 0,
    ) -> None:
        """Settle the oldest model call still open (see `GovernedSession.after_model_call`)."""
        st = self.core.state
        if not st.model_reservations:
            raise ConfigError("after_model_call without a before_model_call")
        st.input_tokens += max(0, int(input_tokens))
        st.output_tokens += max(0, int(output_tokens))
        pending: _ModelCall = st.model_reservations.pop(0)
        if cost_micros is None:
            cost_micros = model_cost(
                pending.prices, Usage(input_tokens=input_tokens, output_tokens=output_tokens)
            )
        charged = st.budget.settle(pending.reservation, cost_micros)
        telemetry.model_cost(pending.model_id, charged)
        data: dict[str, Any] = {
            "model": pending.model_id,
            "call": pending.number,
            "duration_ms": ms(pending.started),
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_micros": charged,
            "tool_calls": tool_calls,
        }
        if st.budget.over:
            data["code"] = "BUDGET_EXCEEDED"
            self.core.emit("model.completed", data)
            raise self.core.fail("BUDGET_EXCEEDED", "a model call cost more than the budget allows")
        self.core.emit("model.completed", data)
        st.phase = "after_model"

    def model_failed(self, error: BaseException | None = None) -> None:
        """Settle the model calls still open after a model call raised (see
        `GovernedSession.on_model_call_error`): each keeps its full ceiling charged."""
        code = "MODEL_FAILED"
        if error is not None and isinstance(error, anyio.get_cancelled_exc_class()):
            code = "CANCELLED"
        st = self.core.state
        while st.model_reservations:
            pending: _ModelCall = st.model_reservations.pop(0)
            st.budget.settle(pending.reservation, None)
            self.core.emit("model.completed", {"call": pending.number, "code": code})

    def outcome(
        self,
        output: Any,
        text: str | None,
        steps: list[Any],
        error: BaseException | None,
        *,
        timed_out: bool,
        cancelled: bool,
    ) -> RuntimeResult:
        """The result of the run: its outcome, code and generic message, from what happened."""
        state = self.core.state
        # calls still marked in flight (cancelled mid-call) decide `unknown`
        for row, effects in list(state.in_flight.items()):
            if effects != "none":
                state.unknown = True
            state.in_flight.pop(row, None)
        self.model_failed()
        code: str | None = None
        if cancelled:
            code = "CANCELLED"
        elif timed_out:
            code = "TIMEOUT"
        elif error is not None or state.failure is not None:
            if state.failure is not None:
                code = state.failure.code
            elif error is not None:
                policy = [e for e in flatten(error) if isinstance(e, PolicyError)]
                known = [e for e in flatten(error) if isinstance(e, ToolbridgeError)]
                pick: BaseException = policy[0] if policy else (known[0] if known else error)
                code = code_for(pick, state.phase)
        if code is None and state.budget.over:
            code = "BUDGET_EXCEEDED"
        usage = state.usage()
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

    async def end_run(self, result: RuntimeResult) -> RuntimeResult:
        """Journal the run's end with every call end not yet recorded, all or nothing.

        Shielded from a cancellation that is ending the run, bounded by the journal's own timeouts
        (`JournalPort.end_run`); when the write fails, see `_end_unrecorded`.
        """
        end = self._run_end(result)
        try:
            await self.core.journal.end_run(self.core.state.run_id, end)
            return result
        except JournalWriteError:
            log.warning("the evidence journal could not record the end of a run")
        return self._end_unrecorded(result, end)

    def _run_end(self, result: RuntimeResult) -> dict[str, Any]:
        """What the run's end writes: the result, usage and every call end not yet recorded."""
        state = self.core.state
        ends = dict(state.unrecorded)
        for plan in state.plans.values():  # planned, never run: the turn was stopped before them
            code = result.error_code or "CANCELLED"
            charged = rt_settle(state.budget, plan.reservation, 0)
            ends.setdefault(plan.row, CallEnd(plan.row, "not_started", code, charged))
        state.plans.clear()
        return {
            "outcome": result.outcome,
            "error_code": result.error_code,
            "cost_micros": result.cost_micros,
            **state.usage(),
            "calls": tuple(ends.values()),
        }

    def _end_unrecorded(self, result: RuntimeResult, end: dict[str, Any]) -> RuntimeResult:
        """The honest result of a run whose end could not be written; the end is kept to retry.

        The journal keeps the run `running`, and it is read back (once this process is gone)
        from what it holds: `outcome_unknown` if a call with effects has its request recorded as
        sent and no end, else `failed` / `INTERRUPTED`. The result returned is made to say the
        same outcome (`outcome_unknown`, or `failed` / `JOURNAL_UNAVAILABLE`), and the write is
        tried again at the next run's start and at `close()`.
        """
        state = self.core.state
        ends = {e.row: e for e in end["calls"]}
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
        self.core.journal.keep_run_end(state.run_id, dict(end, outcome=honest.outcome, error_code=code))
        return honest


def code_for(exc: BaseException, phase: str) -> str:
    """The run code for an exception that came out of the agent (not raised by the governor).

    `phase` is where the run was: `model` while a model call was in flight.
    """
    if isinstance(exc, PolicyError):
        return exc.code if exc.code in CODES else "TOOL_FAILED"
    if isinstance(exc, ModelError):
        return "MODEL_FAILED"
    if isinstance(exc, AgentError):
        code = exc.code
        if "MAX_STEPS" in code or "MAX_PAUSES" in code:
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


def flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(flatten(inner))
        return out
    return [exc]
