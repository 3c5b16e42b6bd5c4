"""`GovernedRun`: one governed run or session, composed of its rule objects, and its lifecycle.

A run is a `RunCore` (its state and the primitives every rule uses) and the objects that hold it:
`CallRules` (per call), `RefusedCalls` (refused calls' rows and spans) and `RunRules` (model
calls, the outcome, the run's end). None of them subclasses another or reads another's private
state; they meet through the core's public methods. `GovernedRun` adds the lifecycle: `open`
(journal the start), `settle` (decide the outcome and journal the end, once) and `completed`
(report it). `GovernedSession` (`_session`) is the caller-facing face of one; `Runtime.run` and
`Runtime.stream` build one per agent run and hand it to the agent's `Governor` (`_governor`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConfigError, ModelError, PolicyError
from ._calls import CallRules, ms
from ._journal import JournalWriteError
from ._limits import Budget
from ._outcomes import CODES, GENERIC_MESSAGES, RuntimeResult
from ._refusals import RefusedCalls
from ._run_rules import RunRules, flatten
from ._state import RunCore, RunState

if TYPE_CHECKING:
    from ._host import RuntimeHost

__all__ = ["GovernedRun"]


class GovernedRun:
    """One run or session: its core, its rule objects, and its lifecycle (see the module docs).

    Attributes:
        core: the run's state and shared primitives (`fail`, `emit`, `check_open`, ...).
        calls: the per-call rules (`plan`, `run`).
        refusals: refused calls' rows and spans (`record`).
        rules: the per-run rules (model calls, the outcome, the run's end).
        result: the run's result once it is decided, else None.
    """

    __slots__ = ("calls", "core", "label", "refusals", "result", "rules", "started")

    def __init__(self, rt: RuntimeHost, *, run_id: str, principal: str | None, label: str) -> None:
        self.core = RunCore(rt, RunState(run_id=run_id, budget=Budget(rt.limits.max_cost_micros)), principal)
        self.refusals = RefusedCalls(self.core)
        self.calls = CallRules(self.core, self.refusals)
        self.rules = RunRules(self.core)
        self.label = label
        self.result: RuntimeResult | None = None
        self.started = time.monotonic()

    @property
    def run_id(self) -> str:
        return self.core.state.run_id

    def _decided(self, result: RuntimeResult) -> RuntimeResult:
        self.result = result
        self.core.closed = True
        return result

    async def open(self, *, deadline: bool = True) -> RuntimeResult | None:
        """Journal the start; a result (`JOURNAL_UNAVAILABLE`) when the journal cannot.

        `deadline`: a session's `max_duration_ms` counts from now (an agent run's is enforced
        around the run by `Runtime`).
        """
        core = self.core
        if core.opened:
            raise ConfigError("a session can be entered only once")
        core.opened = True
        rt, run_id = core.rt, core.state.run_id
        self.started = core.state.started = time.monotonic()
        if deadline:
            core.deadline = anyio.current_time() + rt.limits.max_duration_ms / 1000
        core.emit("run.started", {"agent": self.label, "profile": rt.profile})
        try:
            new = await core.journal.start_run(
                run_id, agent=self.label, profile=rt.profile, principal=core.principal
            )
        except JournalWriteError:
            return self._not_started()
        except BaseException:
            rt.open_runs.forget(run_id)
            raise
        if not new:
            rt.open_runs.forget(run_id)
            raise ConfigError(f"run id {run_id!r} is already in the journal")
        rt.open_runs.opened(run_id, self.cancel)
        return None

    def _not_started(self) -> RuntimeResult:
        self.core.fail("JOURNAL_UNAVAILABLE", "the run's start could not be recorded")
        result = RuntimeResult(
            outcome="failed",
            error_code="JOURNAL_UNAVAILABLE",
            error_message=GENERIC_MESSAGES["JOURNAL_UNAVAILABLE"],
            usage={"input_tokens": 0, "output_tokens": 0, "model_calls": 0},
            run_id=self.run_id,
        )
        self.completed(result)
        return result

    async def settle(
        self,
        *,
        output: Any = None,
        text: str | None = None,
        steps: list[Any] | None = None,
        error: BaseException | None = None,
        timed_out: bool = False,
        cancelled: bool = False,
    ) -> RuntimeResult:
        """Decide the outcome and journal the end (once); `completed` then reports it."""
        if self.result is not None:
            return self.result
        self.core.rt.open_runs.closed(self.run_id)
        result = self.rules.outcome(
            output, text, steps or [], error, timed_out=timed_out, cancelled=cancelled
        )
        return self._decided(await self.rules.end_run(result))

    def completed(self, result: RuntimeResult) -> None:
        """Report the decided `result`: the `run.completed` event; the bus forgets the run."""
        self._decided(result)
        state = self.core.state
        self.core.emit(
            "run.completed",
            {
                "outcome": result.outcome,
                "code": result.error_code,
                "duration_ms": ms(self.started),
                "cost_micros": result.cost_micros,
                "model_calls": state.model_calls,
                "tool_calls": state.tool_calls,
            },
        )
        self.core.rt.open_runs.forget(self.run_id)

    def cancel(self) -> None:
        """`runtime.cancel(run_id)`: end the session `cancelled`; refuse every later call."""
        self.core.fail("CANCELLED")

    def exit_code(self, exc: BaseException) -> str:
        """The code of a session left by an exception (not a cancellation), from what is known.

        The session's own refusal or failure (a `PolicyError` it raised) keeps its code (it is
        already the session's failure); a model error, or any error while a model call was in
        flight or had just failed, is `MODEL_FAILED`; anything else (the caller's code, or a
        framework around it, raised) is `ABORTED`. Calls with effects still in flight make the
        outcome `outcome_unknown` (`RunRules.outcome`).
        """
        errors = flatten(exc)
        for error in errors:
            if isinstance(error, PolicyError) and error.code in CODES:
                return error.code
        if self.core.state.phase == "model" or any(isinstance(e, ModelError) for e in errors):
            return "MODEL_FAILED"
        return "ABORTED"

    def so_far(self) -> RuntimeResult:
        """The result once decided; before that, the outcome so far (`succeeded` until something ends it)."""
        if self.result is not None:
            return self.result
        state = self.core.state
        failure = state.failure
        usage = state.usage()
        if failure is None:
            return RuntimeResult(
                outcome="succeeded", usage=usage, cost_micros=state.budget.spent, run_id=self.run_id
            )
        return RuntimeResult(
            outcome=failure.outcome,
            error_code=failure.code,
            error_message=failure.message,
            usage=usage,
            cost_micros=state.budget.spent,
            run_id=self.run_id,
        )
