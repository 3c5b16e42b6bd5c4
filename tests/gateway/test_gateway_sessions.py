"""`IdentitySessions`: per-identity upstream connections are bounded, reused, evicted when idle,
and never taken from an identity with a call in flight."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

from toolbridge.gateway._sessions import IdentitySessions


class Conn:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


def maker(made: list[Conn]) -> Callable[[], Awaitable[Conn]]:
    async def make() -> Conn:
        made.append(Conn(len(made)))
        return made[-1]

    return make


async def test_bounded_reused_evicted_and_closed() -> None:
    made: list[Conn] = []
    make = maker(made)
    pool = IdentitySessions(make, max_sessions=2, idle_s=3600)
    a = await pool.acquire("alice")
    assert await pool.acquire("alice") is a  # one connection per identity
    b = await pool.acquire("bob")
    assert a is not b and pool.opened == 2
    # both busy: carol goes over the shared connection (None), nobody is evicted
    assert await pool.acquire("carol") is None
    pool.release("alice")
    pool.release("alice")
    c = await pool.acquire("carol")  # alice's idle connection makes room
    assert c is made[2] and pool.opened == 3
    await anyio.lowlevel.checkpoint()
    assert made[0].closed and not made[1].closed
    pool.release("bob")
    pool.release("carol")
    await pool.aclose()
    assert all(m.closed for m in made)


async def test_an_idle_connection_is_closed_at_the_next_call() -> None:
    made: list[Conn] = []
    make = maker(made)
    pool = IdentitySessions(make, max_sessions=4, idle_s=0.0)
    await pool.acquire("alice")
    pool.release("alice")
    await pool.acquire("bob")  # alice has been idle for idle_s
    await anyio.lowlevel.checkpoint()
    assert made[0].closed
    pool.release("bob")
    await pool.aclose()
