"""Deadlines of cancel scopes under one timer per event loop, instead of one timer per scope.

`anyio.CancelScope(deadline=...)` schedules an event-loop timer for every scope it enters and
cancels it on exit; the cancelled timer stays in the loop's heap until the heap is cleaned, so a
busy client (a 300 s deadline per call) and the runtime (a 30 s tool timeout per call) keep a
heap of hundreds of dead timers, and every new timer is pushed through it. That is about 20
Python calls per scope, on the path of every tool call.

`DeadlineWatch` keeps the deadlines of the scopes it was given in a dict and one timer for the
earliest of them. Entering a call is a dict write (the timer is moved only when the new deadline
is the earliest, which deadlines of "now + a constant" never are while a timer is pending);
leaving it is a dict delete. When the timer fires, every scope past its deadline is cancelled,
exactly as anyio's own deadline does (`scope.cancel()` from a loop callback), and the timer is
set again for the earliest deadline left. A deadline already past when armed cancels the scope
at once, as entering a scope with such a deadline does.

Usage (the scope must be entered, and disarmed before it exits):

    watch = deadline_watch()
    with watch.scope_class() as scope:  # anyio.CancelScope(), without the backend lookup
        watch.arm(scope, deadline)
        try:
            ...
        finally:
            watch.disarm(scope)
    if scope.cancelled_caught: ...  # the deadline passed
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Final

import anyio

__all__ = ["DeadlineWatch", "deadline_watch", "takes_deadline"]

_NEVER: Final = math.inf

_TAKES_DEADLINE: dict[str, weakref.WeakKeyDictionary[type, bool]] = {}
"""`takes_deadline`'s answers, by `module` then by class."""


def takes_deadline(obj: object, module: str = "toolbridge.clients.") -> bool:
    """Whether a caller may hand its deadline to `obj.call_tool` (`deadline=`, event-loop time)
    instead of entering a cancel scope of its own: only when that method is toolbridge's own code
    (its module starts with `module`: a client's, or `toolbridge.bridge` for `McpToolProvider`)
    and the class says it takes one (`accepts_deadline`). A subclass that overrides `call_tool`,
    or an instance whose `call_tool` was replaced (a user's own wrapper, which might not take the
    keyword, or not pass it on), keeps the caller's scope, so the caller's timeout always holds.
    Decided once per class and module; the instance is looked at on every call."""
    if "call_tool" in getattr(obj, "__dict__", ()):
        return False
    cls = type(obj)
    answers = _TAKES_DEADLINE.get(module)
    if answers is None:
        answers = _TAKES_DEADLINE[module] = weakref.WeakKeyDictionary()
    known = answers.get(cls)
    if known is None:
        method = getattr(cls, "call_tool", None)
        known = getattr(cls, "accepts_deadline", False) is True and str(
            getattr(method, "__module__", "")
        ).startswith(module)
        answers[cls] = known
    return known


class DeadlineWatch:
    """The deadlines of one event loop's cancel scopes, under a single timer (see the module)."""

    __slots__ = ("__weakref__", "_deadlines", "_loop", "_timer_at", "scope_class")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, scope_class: type[anyio.CancelScope] | None = None
    ) -> None:
        # Nothing here may hold the loop (its timer heap holds this watch, and so does the
        # registry of watches, by the loop as a weak key): the loop weakly, and no timer handle.
        self._loop = weakref.ref(loop)
        self._deadlines: dict[anyio.CancelScope, float] = {}
        self._timer_at = _NEVER
        """When the live timer fires (a timer set for another time is stale and does nothing)."""
        self.scope_class = scope_class or type(anyio.CancelScope())  # made in the running loop
        """The loop's concrete `anyio.CancelScope` class: `scope_class()` is what
        `anyio.CancelScope()` returns in this loop, without anyio's backend lookup (about five
        Python calls) at every call."""

    def __len__(self) -> int:
        """How many scopes are watched now."""
        return len(self._deadlines)

    def arm(self, scope: anyio.CancelScope, deadline: float) -> None:
        """Cancel `scope` (entered, in this loop) at `deadline` (loop time) unless disarmed first.

        An infinite deadline is no deadline; a past one cancels the scope now.
        """
        if deadline == _NEVER:
            return
        loop = self._loop()
        if loop is None:  # pragma: no cover - only called from a running loop
            return
        if deadline <= loop.time():
            scope.cancel()
            return
        self._deadlines[scope] = deadline
        if deadline < self._timer_at:
            self._schedule(loop, deadline)

    def move(self, scope: anyio.CancelScope, deadline: float) -> None:
        """Give an armed scope a new deadline (a disarmed one stays disarmed)."""
        if scope in self._deadlines:
            del self._deadlines[scope]
            self.arm(scope, deadline)

    def disarm(self, scope: anyio.CancelScope) -> None:
        """Forget `scope` (idempotent); its deadline can no longer cancel it."""
        self._deadlines.pop(scope, None)

    def _schedule(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        # A timer set earlier for a later time is left to fire as a no-op (rare: only a deadline
        # earlier than every other one moves the timer).
        self._timer_at = when
        loop.call_at(when, self._fire, when)

    def _fire(self, when: float) -> None:
        if when != self._timer_at:
            return  # stale: the timer was set again, for an earlier time
        self._timer_at = _NEVER
        loop = self._loop()
        if loop is None or not self._deadlines:  # pragma: no cover - a loop that is gone runs nothing
            return
        now = loop.time()
        due = [scope for scope, deadline in self._deadlines.items() if deadline <= now]
        for scope in due:
            del self._deadlines[scope]
        if self._deadlines:
            self._schedule(loop, min(self._deadlines.values()))
        for scope in due:
            scope.cancel()


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DeadlineWatch] = weakref.WeakKeyDictionary()
_last: DeadlineWatch | None = None
"""The watch used last (most programs run one loop): found without the dictionary lookup."""


def deadline_watch() -> DeadlineWatch:
    """The running event loop's `DeadlineWatch` (made on first use, gone with the loop)."""
    global _last
    loop = asyncio.get_running_loop()
    last = _last
    if last is not None and last._loop() is loop:
        return last
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = DeadlineWatch(loop, type(anyio.CancelScope()))
    _last = watch
    return watch
