"""The state of one governed run or session, and what every rule module shares.

`SessionCore` is the base of `GovernedSession`: it holds the runtime (configuration, journal,
event bus), the mutable `RunState`, and the two primitives every rule uses: `_fail` (the first
failure ends the run or session: fail closed) and `_emit` (an event of this run). The rules
themselves live in `_calls` (per call) and `_run_rules` (per run: model calls, limits, budget).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..calls import PlannedToolCall
from ._declared import DeclaredTool
from ._guards import EmitFn
from ._journal import CallEnd
from ._journal_port import JournalPort
from ._limits import Budget, Reservation
from ._outcomes import CODES, policy_error
from ._permissions import ToolGrantNeeds

if TYPE_CHECKING:
    from ..errors import PolicyError
    from ._host import RuntimeHost

__all__ = ["Plan", "RunState", "SessionCore", "new_run_id"]


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex


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


class SessionCore:
    """What the rule modules share (see the module docs)."""

    rt: RuntimeHost
    state: RunState
    journal: JournalPort
    """Every write of this run goes through the runtime's port (one way for every backend)."""
    _emit: EmitFn
    """Emit an event of this run: `(type, data)`; bound once to the runtime's bus and the run id
    (see `bind_events`), so each event is one call into the bus."""

    def bind_events(self) -> None:
        """Bind `_emit` to the runtime's event bus and this run's id (once `rt` and `state` are set)."""
        self._emit = self.rt.open_runs.emitter(self.state.run_id)

    def _fail(self, code: str, detail: str | None = None) -> PolicyError:
        """The error for `code`; the first one becomes the run's failure (it ends the run)."""
        error = policy_error(code, detail)
        if self.state.failure is None:
            self.state.failure = error
        return error

    def _check_open(self) -> None:
        """Raise the run's failure again if something already ended it (fail closed)."""
        failure = self.state.failure
        if failure is not None:
            again = policy_error(failure.code) if failure.code in CODES else failure
            raise again

    def _note(self, error: PolicyError) -> PolicyError:
        """Make `error` the run's failure if it has none yet."""
        if self.state.failure is None:
            self.state.failure = error
        return error
