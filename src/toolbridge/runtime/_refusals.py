"""Refused calls: each gets its journal row (ended `not_started` with the refusal's code), its span
and its count, whatever refused it (a check of the batch, a call the runtime was never asked to
check, a call made after the session ended, or the caller: `GovernedSession.refuse`).

A call to no known tool (`NOT_FOUND`) gets its row too: `tool_id` is the name it asked for
(control and invisible characters shown as escapes, at most `UNKNOWN_NAME_CHARS` characters),
`kind` is `unknown` and `effects` `none` (nothing was sent). So the journal says which tool every
refused call was for. `needs_of` says what a call needs (grants, effects, kind), for these rows
and for the call rules.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .. import telemetry
from .._canonical import canonical_json
from ..calls import PlannedToolCall, ToolBinding
from ..errors import ConfigError, PolicyError
from ..sanitize import visible_text
from ._declared import DeclaredTool
from ._journal import CallPlan
from ._permissions import ToolGrantNeeds, effective_effects
from ._state import RunCore

__all__ = ["UNKNOWN_NAME_CHARS", "Needs", "RefusedCalls", "args_digest", "binding_value", "needs_of"]

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


def binding_value(binding: object, name: str) -> Any:
    """An option of a discovered tool's binding: an attribute, or a key of a mapping binding."""
    value = getattr(binding, name, None)
    # A `ToolBinding` (what a catalog holds) is no mapping: no ABC check for it.
    if value is None and type(binding) is not ToolBinding and isinstance(binding, Mapping):
        value = binding.get(name)
    return value


Needs = tuple[ToolGrantNeeds, str, str | None, DeclaredTool | None]
"""What a call needs: (grant needs, kind, version, the declared tool or None)."""


def needs_of(core: RunCore, call: PlannedToolCall) -> Needs:
    """The grants, kind, version and declared tool of a call to a known tool (`call.target`)."""
    target = call.target
    assert target is not None
    source = target.source
    if target.declared or isinstance(source, DeclaredTool):
        if not isinstance(source, DeclaredTool):
            raise core.fail("NOT_FOUND", "declared tool of an unknown kind")
        return source.grant_needs(), source.kind, source.version, source
    caps = binding_value(target.binding, "capabilities")
    try:
        effects = effective_effects(binding_value(target.binding, "effects"), target.spec.annotations)
    except ConfigError:
        effects = "host"  # an unreadable declaration is treated as the most powerful
    return ToolGrantNeeds(target.model_name, effects, tuple(caps or ())), "discovered", None, None


class RefusedCalls:
    """Rows and spans of refused calls, for one run's `RunCore` (the call rules and the session use it)."""

    __slots__ = ("core",)

    def __init__(self, core: RunCore) -> None:
        self.core = core

    def refused(self, calls: Sequence[PlannedToolCall], error: PolicyError) -> None:
        """Spans and counts for a batch refused before any of its calls ran."""
        core = self.core
        for call in calls:
            missing = tool_id = effects = None
            if call.target is not None:
                try:
                    needs = needs_of(core, call)[0]
                except PolicyError:
                    continue
                tool_id, effects = needs.tool_id, needs.effects
                if error.code == "PERMISSION_DENIED":
                    missing = next(iter(core.rt.permissions.missing(needs.required())), None)
            telemetry.refused_tool(
                call.name,
                call.call_id,
                error.code,
                error.outcome,
                tool_id=tool_id,
                effects=effects,
                missing=missing,
                principal=core.principal,
                run_id=core.state.run_id,
            )

    def refused_plan(self, call: PlannedToolCall, step: int) -> CallPlan:
        """What the journal records of a refused call (a call to no known tool: see the module)."""
        digest, size = args_digest(call.arguments)
        try:
            if call.target is None:
                raise LookupError
            needs, kind, version, _tool = needs_of(self.core, call)
        except (LookupError, PolicyError):
            name = visible_text(call.name)[:UNKNOWN_NAME_CHARS] if isinstance(call.name, str) else "?"
            tool_id, version, kind, effects = name, None, "unknown", "none"
        else:
            tool_id, effects = needs.tool_id, needs.effects
        return CallPlan(
            run_id=self.core.state.run_id, call_id=call.call_id, step=step, tool_id=tool_id,
            tool_version=version, kind=kind, effects=effects, args_sha256=digest, args_bytes=size,
        )  # fmt: skip

    async def record(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """Spans, counts and a journal row (ended `not_started` with `error`'s code) per call."""
        self.refused(calls, error)
        await self.rows(calls, error, step)

    def event(self, call_id: str, tool_id: str, effects: str, code: str) -> None:
        """The `tool.refused` event of a call ended `not_started` before anything was sent (the
        console's live Calls page shows it): ids, effects and the code, never arguments."""
        data = {"call_id": call_id, "tool_id": tool_id, "effects": effects, "outcome": "not_started"}
        self.core.emit("tool.refused", dict(data, code=code))

    async def rows(self, calls: Sequence[PlannedToolCall], error: PolicyError, step: int) -> None:
        """A row per refused call of a batch, ended `not_started` with the refusal's code, and a
        `tool.refused` event per call (`event`)."""
        core = self.core
        for call in calls:
            plan = self.refused_plan(call, step)
            self.event(call.call_id, plan.tool_id, plan.effects, error.code)
            try:
                row = await core.journal.plan(plan)
            except PolicyError:
                log.warning("the evidence journal could not record a refused call")
                return
            await core.record_end(row, "not_started", error.code, 0)
