"""Run events: a small synchronous publish/subscribe channel carrying metadata only.

Event types come in start/end pairs: `run.started`/`run.completed`, `step.started`/
`step.completed`, `model.started`/`model.completed`, `tool.started`/`tool.completed`,
`guard.started`/`guard.completed`. Each event has the run id, a sequence number that grows by one
per event within its run, a wall-clock timestamp, its type, and a `data` mapping of metadata:
ids, names, timings, sizes, codes. Never content: no prompts, arguments, results, outputs, or any
text a tool, server or provider produced.

Subscribers are plain callables invoked in order, in the publishing task. A subscriber that
raises is logged and skipped; it cannot break a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..redact import redact_metadata

__all__ = ["Event", "EventBus"]

log = logging.getLogger("toolbridge.runtime")


@dataclass(frozen=True)
class Event:
    """One run event.

    Attributes:
        run_id: the run it belongs to.
        sequence: 1, 2, 3, … within the run.
        timestamp: seconds since the epoch.
        type: for example `tool.completed`.
        data: metadata (ids, names, timings, sizes, codes).
    """

    run_id: str
    sequence: int
    timestamp: float
    type: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form."""
        return {
            "run_id": self.run_id,
            "sequence": self.sequence,
            "timestamp": self.timestamp,
            "type": self.type,
            "data": dict(self.data),
        }


Subscriber = Callable[[Event], object]


class EventBus:
    """Delivers events to subscribers, numbering them per run."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._sequence: dict[str, int] = {}

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it (safe to call twice)."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def emit(self, run_id: str, type_: str, data: Mapping[str, Any]) -> Event | None:
        """Number and deliver one event (`None`, and nothing built, with no subscriber)."""
        seq = self._sequence.get(run_id, 0) + 1
        self._sequence[run_id] = seq
        if not self._subscribers:
            return None
        event = Event(run_id, seq, time.time(), type_, redact_metadata(data))  # secrets scrubbed
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception as exc:  # a subscriber must not break a run
                log.warning("event subscriber %r raised %s", callback, type(exc).__name__)
        return event

    def forget(self, run_id: str) -> None:
        """Drop the sequence counter of a finished run."""
        self._sequence.pop(run_id, None)
