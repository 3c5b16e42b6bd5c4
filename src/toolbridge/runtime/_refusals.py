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

    def _record_end(self, row: int, outcome: str, code: str | None, charged: int) -> None:
        raise NotImplementedError  # `CallRules._record_end`

    async def _aflush_end(self, row: int) -> None:
        raise NotImplementedError  # `CallRules._aflush_end`

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

    def _refused_row_args(self, call: PlannedToolCall, step: int) -> dict[str, Any]:
        """What `plan_call` records for a refused call (a call to no known tool: see the module)."""
        digest, size = args_digest(call.arguments)
        fields: dict[str, Any] = {"step": step, "args_sha256": digest, "args_bytes": size}
        try:
            if call.target is None:
                raise LookupError
            needs, kind, version, _tool = self._needs(call)
        except (LookupError, PolicyError):
            name = visible_text(call.name)[:UNKNOWN_NAME_CHARS] if isinstance(call.name, str) else "?"
            fields.update(tool_id=name, tool_version=None, kind="unknown", effects="none")
            return fields
        fields.update(tool_id=needs.tool_id, tool_version=version, kind=kind, effects=needs.effects)
        return fields

    async def _record_refused(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """Spans, counts and a journal row (ended `not_started` with `error`'s code) per call."""
        self._refused(calls, error)
        if self._ajournal is None:
            self._refused_rows(calls, error, step)
        else:
            await self._arefused_rows(calls, error, step)

    def _refused_rows(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """A row per refused call of a batch, ended `not_started` with the refusal's code."""
        for call in calls:
            fields = self._refused_row_args(call, step)
            try:
                row = self._journal.plan_call(self.state.run_id, call.call_id, **fields)
            except PolicyError:
                log.warning("the evidence journal could not record a refused call")
                return
            self._record_end(row, "not_started", error.code, 0)

    async def _arefused_rows(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """`_refused_rows` through the async journal (`_ajournal`)."""
        journal = self._ajournal
        assert journal is not None
        for call in calls:
            fields = self._refused_row_args(call, step)
            try:
                row = await journal.aplan_call(self.state.run_id, call.call_id, **fields)
            except PolicyError:
                log.warning("the evidence journal could not record a refused call")
                return
            self._record_end(row, "not_started", error.code, 0)
            await self._aflush_end(row)
