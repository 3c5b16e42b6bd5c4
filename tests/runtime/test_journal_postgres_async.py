"""The PostgreSQL journal on the event loop (a real server: TOOLBRIDGE_TEST_POSTGRES_URL).

Slow statements are made on the server itself: a trigger that sleeps in `pg_sleep` whenever a
call's "request sent" is recorded. The loop's responsiveness is measured with a ticker task
(the longest gap between its ticks), never with a threshold on a whole call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
import pytest
from rt_helpers import Empty, Message

from toolbridge._pgpool import AsyncPgPool, PoolUnavailable
from toolbridge.runtime import PostgresJournal, create_runtime, define_tool
from toolbridge.runtime._journal import JournalWriteError

ALLOW = {"allow": ["tool:w", "effect:write"]}


def _tool(executed: list[int]) -> Any:
    async def write(inp: Empty, ctx: Any) -> Message:
        executed.append(1)
        return Message(content="done")

    return define_tool("w", "1", "", Empty, Message, "write", [], execute=write)


def _slow_request_sent(url: str, seconds: float) -> None:
    """Every "request sent" write now sleeps `seconds` on the server (0 removes the trigger)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER IF EXISTS slow_sent ON toolbridge_calls")
        if seconds <= 0:
            return
        conn.execute(
            "CREATE OR REPLACE FUNCTION slow_sent() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.request_sent AND NOT OLD.request_sent THEN PERFORM pg_sleep({seconds}); END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        conn.execute(
            "CREATE TRIGGER slow_sent BEFORE UPDATE ON toolbridge_calls "
            "FOR EACH ROW EXECUTE FUNCTION slow_sent()"
        )


async def _sleeping_backends(url: str) -> list[int]:
    """Backends of this database now sleeping in the trigger."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event = 'PgSleep'"
        )
        return [int(r[0]) for r in await cur.fetchall()]


async def _other_backends(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else -1


async def _wait_sleeping(url: str) -> list[int]:
    with anyio.fail_after(20):
        while not (pids := await _sleeping_backends(url)):  # noqa: ASYNC110 - polls the server
            await anyio.sleep(0.02)
    return pids


@asynccontextmanager
async def _ticker() -> AsyncIterator[list[float]]:
    """Ticks every 5 ms on the loop; yields [longest gap between ticks (s), ticks]."""
    stats = [0.0, 0.0]
    async with anyio.create_task_group() as tg:

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await anyio.sleep(0.005)
                now = time.perf_counter()
                stats[0] = max(stats[0], now - last)
                stats[1] += 1
                last = now

        tg.start_soon(tick)
        try:
            yield stats
        finally:
            tg.cancel_scope.cancel()


async def _calls_on_one_loop(runtime: Any, tool: Any, n: int) -> list[Any]:
    results: list[Any] = [None] * n

    async def one(i: int) -> None:
        async with runtime.session(tools=[tool], principal=f"p{i}") as session:
            await session.call_tool("w", {})
        results[i] = session.result()

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return results


class _SyncPostgres(PostgresJournal):
    """The same journal through its sync methods only: what the session did before."""

    is_async = False


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_slow_statements_never_block_the_loop(postgres_url: str, kind: str) -> None:
    """32 governed calls on one loop, each "request sent" taking 0.8 s on the server.

    The async journal keeps the loop ticking (longest gap far below one statement); the same
    journal through its sync methods (the control) holds the loop for each statement.
    """
    executed: list[int] = []
    opener = PostgresJournal if kind == "async" else _SyncPostgres
    journal = opener(postgres_url, pool_size=8)
    _slow_request_sent(postgres_url, 0.8)
    runtime = create_runtime("durable", ALLOW, journal=journal)
    n = 32 if kind == "async" else 4
    try:
        async with _ticker() as stats:
            started = time.perf_counter()
            with anyio.fail_after(60):
                results = await _calls_on_one_loop(runtime, _tool(executed), n)
            took = time.perf_counter() - started
    finally:
        _slow_request_sent(postgres_url, 0)
    assert [r.outcome for r in results] == ["succeeded"] * n and len(executed) == n
    gap, ticks = stats
    if kind == "async":
        # 32 sleeps of 0.8 s over 8 connections: >= 3.2 s, during which the loop kept ticking
        assert took >= 3.2
        assert gap < 0.4, f"the loop stood still for {gap:.3f} s"
        assert ticks >= took / 0.05
    else:
        assert gap >= 0.7, f"the sync control never held the loop ({gap:.3f} s)"
    for r in results:
        record = runtime.inspect(r.run_id)
        assert record.outcome == "succeeded" and record.calls[0].request_sent
    runtime.close()


async def test_a_connection_killed_mid_write_fails_the_call_and_nothing_is_sent(postgres_url: str) -> None:
    executed: list[int] = []
    journal = PostgresJournal(postgres_url, pool_size=2, statement_timeout_ms=30_000)
    runtime = create_runtime("durable", ALLOW, journal=journal)
    tool = _tool(executed)
    async with runtime.session(tools=[tool]) as session:
        await session.call_tool("w", {})  # the pool is warm; its connections sit idle
        # killed while idle: the next write notices without a round trip and reconnects
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        await anyio.sleep(0.2)
        await session.call_tool("w", {})
        assert len(executed) == 2
        # killed while "request sent" is being written: the call fails, the tool never runs
        _slow_request_sent(postgres_url, 20)
        async with anyio.create_task_group() as tg:
            failure: list[BaseException] = []

            async def third() -> None:
                try:
                    await session.call_tool("w", {})
                except Exception as exc:
                    failure.append(exc)

            tg.start_soon(third)
            (pid,) = await _wait_sleeping(postgres_url)
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _slow_request_sent(postgres_url, 0)
    assert len(executed) == 2
    assert [getattr(e, "code", None) for e in failure] == ["JOURNAL_UNAVAILABLE"]
    result = session.result()
    assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    record = runtime.inspect(session.run_id)
    assert (record.outcome, record.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    last = record.calls[-1]
    assert (last.request_sent, last.outcome, last.error_code) == (False, "not_started", "JOURNAL_UNAVAILABLE")
    assert [c.outcome for c in record.calls[:2]] == ["succeeded", "succeeded"]
    runtime.close()


async def test_an_exhausted_pool_fails_the_call_after_its_timeout(postgres_url: str) -> None:
    executed: list[int] = []
    journal = PostgresJournal(postgres_url, pool_size=1, connect_timeout_s=1)
    runtime = create_runtime("durable", ALLOW, journal=journal)
    # another user holds the only connection
    async with runtime.session(tools=[_tool(executed)]) as session, journal._apool.connection():
        began = time.perf_counter()
        with pytest.raises(Exception) as info:
            await session.call_tool("w", {})
        waited = time.perf_counter() - began
    assert getattr(info.value, "code", None) == "JOURNAL_UNAVAILABLE" and executed == []
    assert 0.9 <= waited < 10
    assert session.result().error_code == "JOURNAL_UNAVAILABLE"
    record = runtime.inspect(session.run_id)
    assert (record.outcome, record.error_code, record.calls) == ("failed", "JOURNAL_UNAVAILABLE", [])
    runtime.close()


async def test_the_pool_waits_at_most_its_timeout_and_closes_what_it_opened(postgres_url: str) -> None:
    pool = AsyncPgPool(postgres_url, max_size=2, timeout_s=0.5, kwargs={"autocommit": True})
    async with pool.connection() as a, pool.connection() as b:
        assert a is not b and pool.size == 2
        began = time.perf_counter()
        with pytest.raises(PoolUnavailable):
            async with pool.connection():
                pass
        assert 0.4 <= time.perf_counter() - began < 5
    assert pool.size == 2  # given back, idle
    async with pool.connection() as again:
        assert again in (a, b)
        pool.close()  # closed while one is in use: the idle one goes now, this one on return
        assert pool.size == 1
    assert pool.size == 0 and a.closed and b.closed
    with pytest.raises(PoolUnavailable):
        async with pool.connection():
            pass
    with anyio.fail_after(10):
        while await _other_backends(postgres_url):  # noqa: ASYNC110 - polls the server
            await anyio.sleep(0.05)
    # nothing listens on port 1: connecting fails within the timeout, as PoolUnavailable
    bad = AsyncPgPool("postgresql://u@127.0.0.1:1/x", max_size=1, timeout_s=2, kwargs={"connect_timeout": 1})
    with pytest.raises(PoolUnavailable):
        async with bad.connection():
            pass
    assert bad.size == 0


async def test_a_call_cancelled_while_its_request_is_recorded_is_never_sent(postgres_url: str) -> None:
    executed: list[int] = []
    journal = PostgresJournal(postgres_url, pool_size=2, statement_timeout_ms=30_000)
    runtime = create_runtime("durable", ALLOW, journal=journal)
    _slow_request_sent(postgres_url, 20)
    try:
        async with anyio.create_task_group() as tg:
            sessions: list[Any] = []

            async def call() -> None:
                async with runtime.session(tools=[_tool(executed)]) as session:
                    sessions.append(session)
                    await session.call_tool("w", {})

            tg.start_soon(call)
            await _wait_sleeping(postgres_url)
            began = time.perf_counter()
            tg.cancel_scope.cancel()
        cancelled_in = time.perf_counter() - began
    finally:
        _slow_request_sent(postgres_url, 0)
    assert executed == [] and cancelled_in < 5  # not the 20 s the statement would have taken
    (session,) = sessions
    assert session.result().outcome == "cancelled"
    record = runtime.inspect(session.run_id)
    assert record.outcome == "cancelled"
    (c,) = record.calls
    assert (c.outcome, c.error_code) == ("not_started", "CANCELLED")
    assert journal._apool.busy == 0  # every connection given back (or closed)
    with anyio.fail_after(10):  # the server stopped the cancelled statement
        while await _sleeping_backends(postgres_url):  # noqa: ASYNC110 - polls the server
            await anyio.sleep(0.05)
    runtime.close()
    assert journal._apool.size == 0
    with anyio.fail_after(10):  # closed: nothing of the journal stays connected
        while await _other_backends(postgres_url):  # noqa: ASYNC110 - polls the server
            await anyio.sleep(0.05)
    with pytest.raises(JournalWriteError):
        await journal.arequest_sent(1)


def test_one_journal_serves_one_event_loop_after_another(postgres_url: str) -> None:
    """A runtime outlives `anyio.run`: the next loop reuses the idle connections."""
    executed: list[int] = []
    runtime = create_runtime("durable", ALLOW, journal=postgres_url)
    tool = _tool(executed)

    async def one() -> str:
        async with runtime.session(tools=[tool]) as session:
            await session.call_tool("w", {})
        return session.run_id

    ids = [anyio.run(one) for _ in range(3)]
    assert len(executed) == 3
    assert [runtime.inspect(i).outcome for i in ids] == ["succeeded"] * 3
    runtime.close()


async def test_a_duplicate_run_id_is_refused_by_the_insert_itself(postgres_url: str) -> None:
    runtime = create_runtime("durable", ALLOW, journal=postgres_url)
    async with runtime.session(run_id="run_same") as s:
        assert s.run_id == "run_same"
    with pytest.raises(Exception, match="already in the journal"):
        async with runtime.session(run_id="run_same"):
            pass
    assert runtime.inspect("run_same").outcome == "succeeded"
    runtime.close()


async def test_shared_budgets_reserve_and_settle_on_the_loop(postgres_url: str) -> None:
    journal = PostgresJournal(postgres_url, pool_size=4)
    journal.open_shared("gw", 100)
    granted: list[int] = []

    async def spend() -> None:
        for _ in range(10):
            if await journal.areserve_shared("gw", 7):
                granted.append(7)
                await journal.asettle_shared("gw", 7, 5)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(spend)
    state = journal.shared("gw")
    assert state == {"max_micros": 100, "spent_micros": 5 * len(granted), "reserved_micros": 0}
    assert 100 - state["spent_micros"] < 7 or len(granted) == 40
    journal.close()
