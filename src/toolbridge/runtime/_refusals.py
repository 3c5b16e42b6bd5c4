"""Refused calls: each gets its journal row (ended `not_started` with the refusal's code), its span
and its count, whatever refused it (a check of the batch, a call the runtime was never asked to
check, a call made after the session ended, or the caller: `GovernedSession.refuse`).

A call to no known tool (`NOT_FOUND`) gets its row too: `tool_id` is the name it asked for
(control and invisible characters shown as escapes, at most `UNKNOWN_NAME_CHARS` characters),
`kind` is `unknown` and `effects` `none` (nothing was sent). So the journal says which tool every
refused call was for.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .. import telemetry
from .._canonical import canonical_json
from ..calls import PlannedToolCall
from ..errors import PolicyError
from ..sanitize import visible_text
from ._declared import DeclaredTool
from ._journal import CallPlan
from ._permissions import ToolGrantNeeds
from ._state import SessionCore

__all__ = ["UNKNOWN_NAME_CHARS", "RefusedCalls", "args_digest"]

log = logging.getLogger("toolbridge.runtime")

UNKNOWN_NAME_CHARS = 200
"""The journal keeps at most this many characters of the name a call to no known tool asked for."""


def args_digest(arguments: Mapping[str, Any]) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the canonical JSON of a call's arguments (never stored)."""
    try:
        data = canonical_json(dict(arguments))
    except (TypeError, ValueError):
        data = b""
    return hashlib.sha256(data).hexdigest(), len(data)


class RefusedCalls(SessionCore):
    """Rows and spans of refused calls (the call rules, `CallRules`, build on it)."""

    def _needs(self, call: PlannedToolCall) -> tuple[ToolGrantNeeds, str, str | None, DeclaredTool | None]:
        raise NotImplementedError  # `CallRules._needs`

    async def _record_end(self, row: int, outcome: str, code: str | None, charged: int) -> None:
        raise NotImplementedError  # `CallRules._record_end`

    def _refused(self, calls: Sequence[PlannedToolCall], error: PolicyError) -> None:
        """Spans and counts for a batch refused before any of its calls ran."""
        for call in calls:
            missing = tool_id = effects = None
            if call.target is not None:
                try:
                    needs = self._needs(call)[0]
                except PolicyError:
                    continue
                tool_id, effects = needs.tool_id, needs.effects
                if error.code == "PERMISSION_DENIED":
                    missing = next(iter(self.rt.permissions.missing(needs.required())), None)
            telemetry.refused_tool(
                call.name,
                call.call_id,
                error.code,
                error.outcome,
                tool_id=tool_id,
                effects=effects,
                missing=missing,
                principal=getattr(self, "principal", None),
                run_id=self.state.run_id,
            )

    def _refused_plan(self, call: PlannedToolCall, step: int) -> CallPlan:
        """What the journal records of a refused call (a call to no known tool: see the module)."""
        digest, size = args_digest(call.arguments)
        try:
            if call.target is None:
                raise LookupError
            needs, kind, version, _tool = self._needs(call)
        except (LookupError, PolicyError):
            name = visible_text(call.name)[:UNKNOWN_NAME_CHARS] if isinstance(call.name, str) else "?"
            tool_id, version, kind, effects = name, None, "unknown", "none"
        else:
            tool_id, effects = needs.tool_id, needs.effects
        return CallPlan(
            run_id=self.state.run_id, call_id=call.call_id, step=step, tool_id=tool_id,
            tool_version=version, kind=kind, effects=effects, args_sha256=digest, args_bytes=size,
        )  # fmt: skip

    async def _record_refused(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """Spans, counts and a journal row (ended `not_started` with `error`'s code) per call."""
        self._refused(calls, error)
        await self._refused_rows(calls, error, step)

    async def _refused_rows(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """A row per refused call of a batch, ended `not_started` with the refusal's code."""
        for call in calls:
            try:
                row = await self.journal.plan(self._refused_plan(call, step))
            except PolicyError:
                log.warning("the evidence journal could not record a refused call")
                return
            await self._record_end(row, "not_started", error.code, 0)
