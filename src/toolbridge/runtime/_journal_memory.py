"""The in-memory journal backend (`ephemeral` profile): the same evidence, in plain objects.

Like the SQLite backend, it stores free text (agent label, principal, tool ids and versions)
with registered secrets scrubbed (`toolbridge.redact`).

Nothing survives the process; nothing can fail to be written. Records are kept per run; a
reader gets copies, so what it holds never changes under it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

from ..redact import redact_value
from ._budgets import MemoryQuotas, QuotaUsage
from ._journal import CallEnd, CallPlan, CallRecord, JournalBackend, RunRecord, Writer, read_back

__all__ = ["MemoryJournal"]


class MemoryJournal(JournalBackend):
    """An evidence journal held in memory (see `JournalBackend` for each method)."""

    def __init__(self) -> None:
        self.path = ":memory:"
        self.writer = Writer.current()
        self._runs: dict[str, RunRecord] = {}
        self._calls: list[CallRecord] = []
        self._quotas = MemoryQuotas()

    def close(self) -> None:
        """Nothing to release."""

    def start_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> None:
        self._runs[run_id] = RunRecord(
            run_id=run_id,
            agent=redact_value(agent),  # free text: registered secrets are never stored
            profile=profile,
            outcome="running",
            error_code=None,
            started_at=time.time(),
            ended_at=None,
            cost_micros=0,
            usage={"input_tokens": 0, "output_tokens": 0, "model_calls": 0},
            pid=self.writer.pid,
            principal=redact_value(principal),
        )

    def end_run(
        self,
        run_id: str,
        *,
        outcome: str,
        error_code: str | None,
        cost_micros: int,
        input_tokens: int,
        output_tokens: int,
        model_calls: int,
        calls: Sequence[CallEnd] = (),
    ) -> None:
        for end in calls:
            self.end_call(
                end.row, outcome=end.outcome, error_code=end.error_code, cost_micros=end.cost_micros
            )
        run = self._runs[run_id]
        run.outcome, run.error_code, run.ended_at = outcome, error_code, time.time()
        run.cost_micros = cost_micros
        run.usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, "model_calls": model_calls}

    def record_plan(self, plan: CallPlan) -> int:
        record = CallRecord(
            run_id=plan.run_id,
            call_id=plan.call_id,
            step=plan.step,
            tool_id=redact_value(plan.tool_id),
            tool_version=redact_value(plan.tool_version),
            kind=plan.kind,
            effects=plan.effects,
            args_sha256=plan.args_sha256,
            args_bytes=plan.args_bytes,
            request_sent=False,
            response_received=False,
            outcome="running",
            error_code=None,
            planned_at=time.time(),
            sent_at=None,
            ended_at=None,
            cost_micros=0,
        )
        self._calls.append(record)
        self._runs[plan.run_id].calls.append(record)
        return len(self._calls)

    def request_sent(self, row: int) -> None:
        call = self._calls[row - 1]
        call.request_sent, call.sent_at = True, time.time()

    def response_received(self, row: int) -> None:
        self._calls[row - 1].response_received = True

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        call = self._calls[row - 1]
        call.outcome, call.error_code, call.cost_micros, call.ended_at = (
            outcome,
            error_code,
            cost_micros,
            time.time(),
        )

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        return read_back(copy.deepcopy(run), alive=True)

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        newest = sorted(self._runs.values(), key=lambda r: r.started_at, reverse=True)[: max(0, limit)]
        out = []
        for run in newest:
            record = copy.copy(run)
            record.calls = []
            record.usage = dict(run.usage)
            out.append(record)
        return out

    # -- quotas (`_budgets`): this process only -----------------------------------------------

    def reserve_quota(self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int) -> bool:
        return self._quotas.reserve(principal, key, ceiling, max_calls, max_micros)

    def settle_quota(self, principal: str, key: str, reserved: int, actual: int, calls_back: int) -> None:
        self._quotas.settle(principal, key, reserved, actual, calls_back)

    def quota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        return self._quotas.usage(principal, key)
