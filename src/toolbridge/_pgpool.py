"""A small pool of psycopg `AsyncConnection`s for code on an event loop: no thread, no background task.

```python
pool = AsyncPgPool(url, max_size=4, timeout_s=10, kwargs={"autocommit": True})
async with pool.connection() as conn:        # waits at most timeout_s for a free slot + connect
    await conn.execute("SELECT 1")
pool.close()                                 # sync; idle connections closed now, busy ones on return
```

Why not `psycopg_pool.AsyncConnectionPool`: it keeps its connections up with maintenance tasks
(a scheduler and workers) spawned on the loop that opened it, outside any task group. The
objects that own a pool here (a runtime's journal, a gateway's store) are created and closed by
synchronous code and may serve several event loops one after another (`anyio.run` twice, a
test per loop); such tasks would be cut off by a loop's end, or outlive the pool's owner. This
pool has no task of its own: its state is a list of idle connections and a count, a waiter
holds a slot only while it awaits, and everything it opened is closed by `close()` (idle
connections at once, busy ones when their holder gives them back).

Rules:

- At most `max_size` connections exist; a caller waits at most `timeout_s` for one (a free slot
  and, when no idle connection is ready, the connect itself): `PoolUnavailable` after that.
- A connection handed out is checked without a round trip: whatever the server sent while it
  sat idle (a termination notice from `pg_terminate_backend`, a closed socket) is read first,
  and a connection found dead is dropped for a fresh one.
- A connection given back in any state but idle (a statement cancelled or timed out mid-way,
  a transaction left open, a lost server) is closed, not reused: the server rolls back what it
  had not committed.
- Usable from one event loop at a time; when the running loop changes (a new `anyio.run`), the
  idle connections carry over and the slot count starts again on the new loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["AsyncPgPool", "PoolUnavailable"]


class PoolUnavailable(Exception):
    """No connection within the timeout, the pool is closed, or connecting failed (`__cause__`)."""


class AsyncPgPool:
    """A bounded pool of `psycopg.AsyncConnection`s (see the module docs).

    Args:
        conninfo: a libpq URL or conninfo string.
        max_size: most connections open at once.
        timeout_s: how long `connection()` may wait for a slot and a connect.
        kwargs: passed to `AsyncConnection.connect` (`autocommit`, `options`, `connect_timeout`).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int,
        timeout_s: float,
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._conninfo = conninfo
        self.max_size = max_size
        self.timeout_s = timeout_s
        self._kwargs = dict(kwargs or {})
        self._idle: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._busy: set[Any] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size(self) -> int:
        """Connections open now (idle and handed out)."""
        return len(self._idle) + len(self._busy)

    def _slots_here(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or loop is not self._loop:
            # A new loop: the old one's waiters are gone with it; connections still marked busy
            # belonged to its tasks and are closed if they ever come back.
            for conn in self._busy:
                _finish(conn)
            self._busy.clear()
            self._loop, self._slots = loop, asyncio.Semaphore(self.max_size)
        return self._slots

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A connection for the block; given back (or closed, see the module docs) after it."""
        conn = await self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    async def _acquire(self) -> Any:
        import psycopg

        if self._closed:
            raise PoolUnavailable("the pool is closed")
        slots = self._slots_here()
        try:
            with anyio.fail_after(self.timeout_s):
                await slots.acquire()
                try:
                    while self._idle:
                        conn = self._idle.pop()
                        if _usable(conn):
                            self._busy.add(conn)
                            return conn
                        _finish(conn)
                    conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs)
                except BaseException:
                    slots.release()
                    raise
        except TimeoutError:
            raise PoolUnavailable(f"no database connection within {self.timeout_s:g} s") from None
        except (psycopg.Error, OSError) as exc:
            raise PoolUnavailable("the database cannot be reached") from exc
        if self._closed:  # closed while connecting
            slots.release()
            _finish(conn)
            raise PoolUnavailable("the pool is closed")
        self._busy.add(conn)
        return conn

    def _release(self, conn: Any) -> None:
        from psycopg.pq import TransactionStatus

        if conn not in self._busy:  # handed out on a loop gone since, or after close()
            _finish(conn)
            return
        self._busy.discard(conn)
        if self._slots is not None:
            self._slots.release()
        if self._closed or conn.closed or conn.pgconn.transaction_status != TransactionStatus.IDLE:
            _finish(conn)
        else:
            self._idle.append(conn)

    def close(self) -> None:
        """Close idle connections now; connections in use are closed when given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            _finish(conn)


def _usable(conn: Any) -> bool:
    """True when an idle connection is still up, read without a round trip (see the module docs)."""
    from psycopg import OperationalError
    from psycopg.pq import ConnStatus, TransactionStatus

    pg = conn.pgconn
    if pg.status != ConnStatus.OK or pg.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        pg.consume_input()  # libpq's sockets are non-blocking: reads only what already arrived
    except OperationalError:
        return False
    return bool(pg.status == ConnStatus.OK and not pg.is_busy())


def _finish(conn: Any) -> None:
    """Close a connection at once, without awaiting (what `AsyncConnection.close` does, too)."""
    with contextlib.suppress(Exception):  # already gone
        conn.pgconn.finish()
