"""`JournalPort`: the journal as the runtime writes it, one way for every backend.

The rules (`_calls`, `_refusals`, `_run_rules`), the session, `Runtime.run` and `Operation`
write evidence only through the runtime's port, and await every write the same way. The
backend's sync fast path lives here, in one place: the memory and SQLite journals are called
directly inside these coroutines (which then never suspend: no second coroutine under the
port), a backend whose writes wait on the network (`is_async`: PostgreSQL) is awaited.

A call's end and a run's end are written shielded from the cancellation that may be ending the
call or run, bounded by the backend's own timeouts; a run end that could not be written is kept
(`keep_run_end`) and written again before the next run starts and at `close()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ..errors import PolicyError
from ._journal import CallEnd, CallPlan, JournalBackend

__all__ = ["JournalPort"]


class JournalPort:
    """The runtime's writes to its `JournalBackend` (see the module docs)."""

    __slots__ = ("_pending", "awaited", "backend")

    def __init__(self, backend: JournalBackend) -> None:
        self.backend = backend
        self.awaited = backend.is_async
        """True when the backend's writes are awaited (`is_async`), False when called directly."""
        self._pending: dict[str, dict[str, Any]] = {}

    async def start_run(self, run_id: str, *, agent: str | None, profile: str, principal: str | None) -> bool:
        """Record a run's start (after the run ends kept before); False when the id is taken."""
        await self.flush_run_ends()
        return await self.backend.astart_run(run_id, agent=agent, profile=profile, principal=principal)

    async def start_fresh_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None
    ) -> None:
        """Record the start of a run whose id is new (an `Operation`'s): no lookup first."""
        if self.awaited:
            await self.backend.astart_run(run_id, agent=agent, profile=profile, principal=principal)
        else:
            self.backend.start_run(run_id, agent=agent, profile=profile, principal=principal)

    async def plan(self, plan: CallPlan) -> int:
        """Record a planned call (`running`, nothing sent); its row."""
        if self.awaited:
            return await self.backend.arecord_plan(plan)
        return self.backend.record_plan(plan)

    async def request_sent(self, row: int) -> None:
        """Record that the request is about to leave (durably, before it is sent)."""
        if self.awaited:
            await self.backend.arequest_sent(row)
        else:
            self.backend.request_sent(row)

    async def response_received(self, row: int) -> None:
        if self.awaited:
            await self.backend.aresponse_received(row)
        else:
            self.backend.response_received(row)

    async def end_call(self, end: CallEnd, *, shielded: bool = True) -> None:
        """Record a call's end, shielded from a cancellation that is ending the call (unless
        `shielded=False`: a success cancelled while it is written is no success)."""
        row, outcome, code, cost = end.row, end.outcome, end.error_code, end.cost_micros
        if not self.awaited:
            self.backend.end_call(row, outcome=outcome, error_code=code, cost_micros=cost)
        elif not shielded:
            await self.backend.aend_call(row, outcome=outcome, error_code=code, cost_micros=cost)
        else:
            with anyio.CancelScope(shield=True):
                await self.backend.aend_call(row, outcome=outcome, error_code=code, cost_micros=cost)

    async def end_run(self, run_id: str, end: Mapping[str, Any]) -> None:
        """Record a run's end with its call ends (all or nothing), shielded from cancellation."""
        if not self.awaited:
            self.backend.end_run(run_id, **end)
            return
        with anyio.CancelScope(shield=True):
            await self.backend.aend_run(run_id, **end)

    def keep_run_end(self, run_id: str, end: Mapping[str, Any]) -> None:
        """Keep a run end whose write failed, to write again later (`flush_run_ends`)."""
        self._pending[run_id] = dict(end)

    async def flush_run_ends(self) -> None:
        """Write the run ends kept before (best effort: stops at the first that fails again)."""
        for run_id, end in list(self._pending.items()):
            try:
                await self.end_run(run_id, end)
            except PolicyError:
                return
            self._pending.pop(run_id, None)

    def flush_run_ends_now(self) -> None:
        """`flush_run_ends` with the backend's sync methods (for `Runtime.close`)."""
        for run_id, end in list(self._pending.items()):
            try:
                self.backend.end_run(run_id, **end)
            except PolicyError:
                return
            del self._pending[run_id]
