"""What a session and an operation need of their runtime: `RuntimeHost`, and its `OpenRuns`.

The session (`_session`), its rules (`_state`, `_calls`, `_refusals`, `_run_rules`) and
`Operation` see the runtime only through `RuntimeHost`: its fixed configuration (profile,
permissions, limits, guards), its `JournalPort` (every write), and its `OpenRuns` (the event
bus of the runs open now, and the sessions `inspect` and `cancel` find). They never import
`_runtime` (no import loop) and never write the runtime's private state; `Runtime` is the one
`RuntimeHost`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol

from ._events import EventBus
from ._guards import EmitFn, Guards
from ._journal_port import JournalPort
from ._limits import Limits
from ._permissions import Permissions

__all__ = ["OpenRuns", "RuntimeHost"]


class OpenRuns:
    """The runs and sessions open in one runtime: their events, and how to cancel a session."""

    __slots__ = ("_cancels", "bus")

    def __init__(self) -> None:
        self.bus = EventBus()
        self._cancels: dict[str, Callable[[], None]] = {}

    def emitter(self, run_id: str) -> EmitFn:
        """Emit an event of `run_id`: `(type, data)`, one call into the bus."""
        return functools.partial(self.bus.emit, run_id)

    def forget(self, run_id: str) -> None:
        """The run has ended (or never started): drop what the bus keeps for it."""
        self.bus.forget(run_id)

    def opened(self, run_id: str, cancel: Callable[[], None]) -> None:
        """A session is open (its start is journaled); `cancel()` ends it `cancelled`."""
        self._cancels[run_id] = cancel

    def closed(self, run_id: str) -> None:
        """The session is ending: `inspect` reads it as a finished run from now on."""
        self._cancels.pop(run_id, None)

    def is_open(self, run_id: str) -> bool:
        return run_id in self._cancels

    def canceller(self, run_id: str) -> Callable[[], None] | None:
        """How to cancel the open session `run_id`, or None."""
        return self._cancels.get(run_id)


class RuntimeHost(Protocol):
    """The runtime as its sessions and operations see it (see the module docs)."""

    profile: str
    permissions: Permissions
    limits: Limits
    guards: Guards
    journal_port: JournalPort
    open_runs: OpenRuns
