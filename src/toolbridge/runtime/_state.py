"""The state of one governed run or session, and what every rule object shares.

`RunCore` holds the runtime (configuration, journal, event bus, as `RuntimeHost`), the mutable
`RunState`, and the primitives every rule uses: `fail` (the first failure ends the run or
session: fail closed), `emit` (an event of this run), `check_open`, `check_deadline`,
`record_end`. The rules themselves are objects of their own holding the same core: `_calls`
(per call), `_refusals` (refused calls), `_run_rules` (per run: model calls, limits, budget) and
`_run` (the lifecycle: open, settle, complete).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..calls import PlannedToolCall
from ..errors import ConfigError
from ._declared import DeclaredTool
from ._guards import EmitFn
from ._journal import CallEnd, JournalWriteError
from ._journal_port import JournalPort
from ._limits import Budget, Reservation
from ._outcomes import CODES, policy_error
from ._permissions import ToolGrantNeeds

if TYPE_CHECKING:
    from ..errors import PolicyError
    from ._host import RuntimeHost

__all__ = ["MAX_NAME", "Plan", "RunCore", "RunState", "checked_name", "loop_now", "new_run_id"]

log = logging.getLogger("toolbridge.runtime")


MAX_NAME = 256
"""A run id, a principal and a caller's call id hold at most this many characters."""


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex


def checked_name(what: str, value: str | None) -> str | None:
    """`value` (a run id or principal) when it is None or a non-empty string of at most `MAX_NAME`."""
    if value is not None and (not isinstance(value, str) or not 0 < len(value) <= MAX_NAME):
        raise ConfigError(f"{what} must be a non-empty string of at most {MAX_NAME} characters")
    return value


@dataclass(slots=True, kw_only=True)
class Plan:
    """What the checks of a batch decided for one call, used when the call runs."""

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
class RunState:
    """Mutable state of one run or session."""

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
    plans: dict[tuple[int, str], Plan] = field(default_factory=dict)
    in_flight: dict[int, str] = field(default_factory=dict)
    sent_unended: dict[int, str] = field(default_factory=dict)
    """Rows whose `request_sent` is in the journal and whose end is not (row -> effects)."""
    unrecorded: dict[int, CallEnd] = field(default_factory=dict)
    """Call ends whose write failed: written again with the run's end."""
    model_reservations: list[Any] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def usage(self) -> dict[str, int]:
        """The run's usage so far, as `RuntimeResult.usage` and the journal's run end hold it."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "model_calls": self.model_calls,
        }


_NO_DEADLINE: Final = float("inf")


def loop_now() -> float:
    """The event loop's clock (what cancel-scope deadlines use), without anyio's lookups."""
    return asyncio.get_running_loop().time()


class RunCore:
    """One run's (or session's) shared state and primitives: what every rule object holds.

    The call rules (`_calls.CallRules`), the refused calls (`_refusals.RefusedCalls`), the run
    rules (`_run_rules.RunRules`) and the lifecycle (`_run.GovernedRun`) each hold the same
    `RunCore` and meet only through its public methods: `fail` (the first failure ends the run:
    fail closed), `emit` (an event of this run), `check_open`, `check_deadline` and
    `record_end` (a call's end, kept for the run's end when its write fails).
    """

    __slots__ = ("closed", "deadline", "emit", "journal", "opened", "principal", "rt", "state")

    def __init__(self, rt: RuntimeHost, state: RunState, principal: str | None) -> None:
        self.rt = rt
        self.state = state
        self.principal = principal
        self.journal: JournalPort = rt.journal_port
        """Every write of this run goes through the runtime's port (one way for every backend)."""
        self.emit: EmitFn = rt.open_runs.emitter(state.run_id)
        """Emit an event of this run: `(type, data)`, bound once to the runtime's bus and run id."""
        self.deadline: float = _NO_DEADLINE
        """The session's deadline (event-loop time); a run's own deadline is enforced around it."""
        self.opened = False
        """The start was attempted (`GovernedRun.open`): calls may be checked from now on."""
        self.closed = False
        """The run's result is decided: a call is refused (`the session is closed`)."""

    def fail(self, code: str, detail: str | None = None) -> PolicyError:
        """The error for `code`; the first one becomes the run's failure (it ends the run)."""
        error = policy_error(code, detail)
        if self.state.failure is None:
            self.state.failure = error
        return error

    def note(self, error: PolicyError) -> PolicyError:
        """Make `error` the run's failure if it has none yet."""
        if self.state.failure is None:
            self.state.failure = error
        return error

    def check_open(self) -> None:
        """Refuse a call of a run that is not open, or raise the failure that ended it (fail closed)."""
        if not self.opened:
            raise ConfigError("use the session as `async with runtime.session(...) as session:`")
        failure = self.state.failure
        if failure is None:
            if self.closed:
                raise ConfigError("the session is closed")
            return
        raise policy_error(failure.code) if failure.code in CODES else failure

    def check_deadline(self) -> None:
        if self.deadline != _NO_DEADLINE and loop_now() >= self.deadline:
            raise self.fail("TIMEOUT", "max_duration_ms")

    async def record_end(self, row: int, outcome: str, code: str | None, charged: int) -> None:
        """Journal a call's end (shielded from a cancellation ending the call: `JournalPort`);
        when that write fails, keep it for the run's end."""
        end = CallEnd(row, outcome, code, charged)
        try:
            await self.journal.end_call(end)
        except JournalWriteError:
            log.warning("the evidence journal could not be written")
            self.state.unrecorded[row] = end
            return
        self.state.sent_unended.pop(row, None)
