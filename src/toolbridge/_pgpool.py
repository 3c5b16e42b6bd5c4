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
  had not committed. A statement cut off mid-way is also cancelled on the server (from a
  connection of its own, bounded), so it stops holding its locks.
- Usable from one event loop at a time; when the running loop changes (a new `anyio.run`), the
  idle connections carry over and the slot count starts again on the new loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ._extras import require

__all__ = ["AsyncPgPool", "PoolUnavailable", "autocommit_pool", "create_schema"]

_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (plain ints: no psycopg import at module level)
_ACTIVE = 1  # psycopg.pq.TransactionStatus.ACTIVE (a statement in progress)
_CONN_OK = 0  # psycopg.pq.ConnStatus.OK


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
        psycopg = require("postgres", "psycopg", "a PostgreSQL connection")
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._psycopg = psycopg
        self._conninfo = conninfo
        self.max_size = max_size
        self.timeout_s = timeout_s
        self._kwargs = dict(kwargs or {})
        self._idle: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._busy: dict[Any, int] = {}  # connection -> its backend's pid
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size(self) -> int:
        """Connections open now (idle and handed out)."""
        return len(self._idle) + len(self._busy)

    @property
    def busy(self) -> int:
        """Connections handed out now."""
        return len(self._busy)

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
        except BaseException:
            if conn.closed or conn.pgconn.transaction_status == _ACTIVE:
                # cut off mid-statement: stop it on the server
                await self._cancel_backend(self._busy.get(conn, 0))
            raise
        finally:
            self._release(conn)

    async def _cancel_backend(self, pid: int) -> None:
        """Ask the server to stop what backend `pid` runs (a statement left behind by a cancelled
        or timed-out caller, which would hold its locks until it ends).

        On a connection of its own (the caller's may be closed already), shielded from the
        caller's cancellation, for at most `min(timeout_s, 5)` seconds; best effort.
        """
        psycopg = self._psycopg
        if not pid:
            return
        with anyio.move_on_after(min(self.timeout_s, 5.0), shield=True):
            try:
                async with await psycopg.AsyncConnection.connect(self._conninfo, **self._kwargs) as other:
                    await other.execute(
                        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                        "WHERE pid = %s AND datname = current_database() AND state = 'active'",
                        (pid,),
                    )
            except (psycopg.Error, OSError):
                pass  # the server is gone too: nothing runs there any more

    def _take_idle(self) -> Any | None:
        """An idle connection still usable, marked busy (dead ones met on the way are closed)."""
        while self._idle:
            conn = self._idle.pop()
            if _usable(conn):
                self._busy[conn] = conn.pgconn.backend_pid
                return conn
            _finish(conn)
        return None

    async def _acquire(self) -> Any:
        if self._closed:
            raise PoolUnavailable("the pool is closed")
        slots = self._slots_here()
        if not slots.locked():  # a free slot: taken at once (no wait, so no timeout needed)
            await slots.acquire()
            try:
                idle = self._take_idle()
            except BaseException:
                slots.release()
                raise
            if idle is not None:
                return idle
            slots.release()
        return await self._acquire_waiting(slots)

    async def _acquire_waiting(self, slots: asyncio.Semaphore) -> Any:
        """Wait for a slot and take an idle connection or open one, within `timeout_s`."""
        psycopg = self._psycopg
        try:
            with anyio.fail_after(self.timeout_s):
                await slots.acquire()
                try:
                    idle = self._take_idle()
                    if idle is not None:
                        return idle
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
        self._busy[conn] = conn.pgconn.backend_pid
        return conn

    def _release(self, conn: Any) -> None:
        if self._busy.pop(conn, None) is None:  # handed out on a loop gone since
            _finish(conn)
            return
        if self._slots is not None:
            self._slots.release()
        if self._closed or conn.pgconn.transaction_status != _IDLE:  # also a closed connection
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
    pg = conn.pgconn
    if pg.status != _CONN_OK or pg.transaction_status != _IDLE:
        return False
    try:
        # libpq's sockets are non-blocking: this reads only what already arrived. A terminated
        # backend sent its FATAL message, then closed: the first read takes the message, the
        # second meets the end of the stream.
        pg.consume_input()
        pg.consume_input()
    except Exception:  # psycopg.OperationalError: the connection is gone
        return False
    return bool(pg.status == _CONN_OK and not pg.is_busy())


def _finish(conn: Any) -> None:
    """Close a connection at once, without awaiting (what `AsyncConnection.close` does, too)."""
    with contextlib.suppress(Exception):  # already gone
        conn.pgconn.finish()


def autocommit_pool(url: str, *, max_size: int, timeout_s: float, statement_timeout_ms: int) -> AsyncPgPool:
    """A pool of autocommit connections, each made within `timeout_s`, whose statements the
    server stops after `statement_timeout_ms` (the gateway's small shared tables use these)."""
    return AsyncPgPool(
        url,
        max_size=max_size,
        timeout_s=timeout_s,
        kwargs={
            "autocommit": True,
            "connect_timeout": max(1, int(timeout_s)),
            "options": f"-c statement_timeout={statement_timeout_ms}",
        },
    )


async def create_schema(conn: Any, lock_key: int, statements: Sequence[str]) -> None:
    """Run `statements` (`CREATE ... IF NOT EXISTS`) in one transaction of `conn` under the
    transaction-scoped advisory lock `lock_key`, so processes starting together do not race."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        for statement in statements:
            await conn.execute(statement)
