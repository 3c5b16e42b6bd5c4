"""`DeadlineWatch`: cancel scopes' deadlines under one timer per event loop.

Each test runs real scopes on a real asyncio loop: a scope is cancelled at its deadline and not
before, a disarmed one never, an earlier deadline armed later still wins, a moved deadline
holds, a past one cancels at once, many calls leave no timers behind, and the watch does not
keep a finished loop alive.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
import weakref

import anyio

from toolbridge._deadlines import DeadlineWatch, deadline_watch


async def _sleep_under(watch: DeadlineWatch, deadline: float, sleep: float) -> tuple[bool, float]:
    """Sleep `sleep` s in a scope armed for `deadline`; (cancelled, seconds taken)."""
    start = time.monotonic()
    with anyio.CancelScope() as scope:
        watch.arm(scope, deadline)
        try:
            await anyio.sleep(sleep)
        finally:
            watch.disarm(scope)
    return scope.cancelled_caught, time.monotonic() - start


async def test_a_scope_is_cancelled_at_its_deadline_and_not_before() -> None:
    watch = deadline_watch()
    cancelled, took = await _sleep_under(watch, anyio.current_time() + 0.2, 10)
    assert cancelled
    assert 0.19 <= took < 5
    cancelled, took = await _sleep_under(watch, anyio.current_time() + 5, 0.05)
    assert not cancelled
    assert len(watch) == 0


async def test_a_disarmed_scope_is_never_cancelled() -> None:
    watch = deadline_watch()
    with anyio.CancelScope() as scope:
        watch.arm(scope, anyio.current_time() + 0.05)
        watch.disarm(scope)
        watch.disarm(scope)  # idempotent
        await anyio.sleep(0.2)  # the timer fires meanwhile and finds nothing due
    assert not scope.cancel_called


async def test_each_scope_ends_at_its_own_deadline_whatever_the_order() -> None:
    watch = deadline_watch()
    now = anyio.current_time()
    ends: dict[str, float] = {}

    async def one(name: str, after: float) -> None:
        cancelled, took = await _sleep_under(watch, now + after, 10)
        assert cancelled
        ends[name] = took

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "late", 0.6)  # armed first: the timer is set for it
        await anyio.sleep(0.01)
        tg.start_soon(one, "early", 0.15)  # earlier: the timer is moved
        tg.start_soon(one, "middle", 0.35)
    assert ends["early"] < ends["middle"] < ends["late"]
    assert ends["early"] < 0.5
    assert len(watch) == 0


async def test_move_postpones_an_armed_deadline_only() -> None:
    watch = deadline_watch()
    start = anyio.current_time()
    with anyio.CancelScope() as scope:
        watch.arm(scope, start + 0.1)
        watch.move(scope, start + 0.4)
        try:
            await anyio.sleep(10)
        finally:
            watch.disarm(scope)
    assert scope.cancelled_caught
    assert anyio.current_time() - start >= 0.39
    with anyio.CancelScope() as other:
        watch.move(other, anyio.current_time() + 0.01)  # never armed: nothing happens
        await anyio.sleep(0.1)
    assert not other.cancel_called


async def test_a_past_deadline_cancels_at_once_and_no_deadline_never() -> None:
    watch = deadline_watch()
    with anyio.CancelScope() as scope:
        watch.arm(scope, anyio.current_time() - 1)
        assert scope.cancel_called  # before any checkpoint, as entering such a scope does
        await anyio.sleep(10)
    assert scope.cancelled_caught
    cancelled, _ = await _sleep_under(watch, math.inf, 0.01)
    assert not cancelled
    assert len(watch) == 0


async def test_many_calls_leave_no_timers_behind() -> None:
    loop = asyncio.get_running_loop()
    watch = deadline_watch()
    before = len(loop._scheduled)  # type: ignore[attr-defined]
    for _ in range(500):
        await _sleep_under(watch, anyio.current_time() + 300, 0)
    # anyio's own deadline would leave up to hundreds of cancelled timers in the heap here
    assert len(loop._scheduled) <= before + 1  # type: ignore[attr-defined]
    assert len(watch) == 0
    assert deadline_watch() is watch


def test_the_watch_does_not_keep_a_loop_alive() -> None:
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def use() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        watch = deadline_watch()
        await _sleep_under(watch, anyio.current_time() + 300, 0)  # leaves the timer pending

    asyncio.run(use())
    asyncio.run(use())  # a second loop gets its own watch
    gc.collect()
    assert all(ref() is None for ref in loops)
