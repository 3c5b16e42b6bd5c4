"""The PostgreSQL journal backend: the same evidence as SQLite, shared by many processes and machines.

`create_runtime("durable", journal="postgresql://user:secret@host:5432/db")` (or a manifest
`Runtime`'s `journal:` holding such a URL, secrets allowed) writes the journal to PostgreSQL
through psycopg 3 (the optional extra `toolbridge[postgres]`, imported only when a PostgreSQL
journal is opened).

**On the event loop.** A governed session awaits the writes (`is_async`, the `a*` methods of
`_journal`) on psycopg's `AsyncConnection`, through `toolbridge._pgpool` (no thread, no
background task): a round trip never holds the loop. Every wait is bounded: a pooled connection
and a connect by `connect_timeout_s`, a statement by `statement_timeout_ms` on the server and 2 s
more on the client. A write that fails in any way (timeout, connection lost mid-statement, pool
exhausted) is `JournalWriteError`, and the runtime's rules apply (nothing is sent unrecorded).
A statement cut off by a cancellation is cancelled on the server and its connection closed.
The sync methods (`inspect`, `toolbridge runs`, the batch store, budgets from threads) use a
psycopg-pool `ConnectionPool` opened on first use. `close()` closes both.

Same records and meaning as the SQLite journal (`_journal` documents the backend interface):
each write is its own committed transaction (autocommit), so "request sent" is durable in the
database before the request leaves; a run's end and the call ends it carries are one
transaction; a run still `running` whose writer died reads back as `outcome_unknown` or
`failed` / `INTERRUPTED`. Every row carries the writer's host and pid; a run written on another
machine is never claimed dead by a reader (the batch driver, which knows when a worker died,
reads such runs back itself).

**Schema and migrations.** The SQL is written once for both databases (`_journal_sql`). The
tables are `toolbridge_schema` (one row per applied version), `toolbridge_runs`,
`toolbridge_calls`, `toolbridge_budgets` (shared budgets), from version 2
`toolbridge_batch_items` (resumable batches), from version 3 `toolbridge_batches`, and from
version 4 `toolbridge_quotas` (cumulative quotas per principal, `_budgets`), from version 5
`toolbridge_leases` (writers' leases, `_leases`). `migrate(url)`
applies what is missing, under a transaction-level advisory lock so that writers starting
together migrate once; a writer (`PostgresJournal(url)`) runs it on first use unless `migrate=False`. A reader
(`PostgresJournal.open_existing(url)`, `toolbridge runs --journal postgresql://...`) never
writes: its sessions are `default_transaction_read_only`, it never migrates, and it refuses a
database without the journal's tables. A database migrated by a newer toolbridge is refused.

**Shared budgets.** `reserve_shared(budget_id, n)` is one atomic `UPDATE ... WHERE max - spent -
reserved >= n`: two workers can never reserve the same micro-unit; `settle_shared` charges the
actual amount and releases the rest in one statement.

**Secrets.** The URL may hold a password. It is never shown: `path` (used in every message) is
`postgresql://HOST:PORT/DB`, and driver messages are cut to their first line with the password
removed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

from .._extras import require
from .._pgpool import AsyncPgPool, PoolUnavailable
from ..errors import ConfigError
from ._budgets import QuotaStatements, QuotaUsage, reserve_params, settle_params, usage_of
from ._journal import CallEnd, CallPlan, JournalBackend, JournalWriteError, RunRecord, Writer
from ._journal_sql import MIGRATIONS as _TEMPLATES
from ._journal_sql import (
    POSTGRES,
    Statements,
    budget_dict,
    end_run_writes,
    needs_calls,
    plan_call_params,
    run_record,
    start_run_params,
)
from ._leases import LeaseStatements
from ._leases import settle_params as lease_settle_params

__all__ = ["MIGRATIONS", "PostgresJournal", "is_postgres_url", "migrate", "redact_url"]

_SCHEMES = ("postgresql://", "postgres://")
_LOCK_KEY = 0x7462_6A6F  # advisory lock id for migrations ("tbjo")

MIGRATIONS: tuple[tuple[int, str], ...] = tuple((v, POSTGRES.sql(t)) for v, t in _TEMPLATES)
"""Schema versions in order: (version, SQL), from `_journal_sql.MIGRATIONS`. Never edit one that
shipped; append a new one."""
_SQL = Statements.of(POSTGRES)
_QUOTAS = QuotaStatements.of(POSTGRES)
_LEASES = LeaseStatements.of(POSTGRES)

LATEST = MIGRATIONS[-1][0]


def is_postgres_url(value: object) -> bool:
    """True when `value` is a string naming a PostgreSQL database (`postgresql://...`)."""
    return isinstance(value, str) and value.lower().startswith(_SCHEMES)


def _parts(url: str) -> dict[str, str]:
    require("postgres", "psycopg_pool", "a PostgreSQL journal")
    conninfo_to_dict = require("postgres", "psycopg.conninfo", "a PostgreSQL journal").conninfo_to_dict
    try:
        return {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    except Exception:
        raise ConfigError(
            "the PostgreSQL journal URL cannot be parsed (postgresql://user:pass@host:port/db)"
        ) from None


def redact_url(url: str) -> str:
    """`postgresql://HOST:PORT/DB` for messages: never the user's password (nor the user)."""
    try:
        parts = _parts(url)
    except ConfigError:
        return "postgresql://?"
    host, port, db = (
        _printable(parts.get(k, d)) for k, d in (("host", "localhost"), ("port", "5432"), ("dbname", ""))
    )
    return f"postgresql://{host}:{port}/{db}"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text[:100])


def _reason(exc: BaseException, url: str) -> str:
    """The first line of a driver message, with the password (if any) cut out."""
    text = _printable((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])
    try:
        password = _parts(url).get("password")
    except ConfigError:
        password = None
    if password:
        text = text.replace(password, "***")
    return text


def _connect_error(url: str, exc: BaseException) -> ConfigError:
    shown = redact_url(url)
    return ConfigError(f"journal {shown} cannot be opened: {_reason(exc, url)}", details={"journal": shown})


def migrate(url: str, *, connect_timeout_s: float = 10.0) -> int:
    """Apply the missing schema versions to the database at `url`; return the version it is at.

    Safe to run from many processes at once (an advisory lock serialises them).

    Raises:
        ConfigError: (`ERR_CONFIG`) when the database cannot be reached, or is at a version newer
            than this toolbridge knows.
    """
    _parts(url)  # psycopg present (or one line naming the extra), URL parseable
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, int(connect_timeout_s))) as conn:
            return _migrate(conn, url)
    except ConfigError:
        raise
    except (psycopg.Error, OSError, UnicodeError, ValueError) as exc:
        raise _connect_error(url, exc) from None


def _migrate(conn: Any, url: str) -> int:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS toolbridge_schema "
            "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM toolbridge_schema").fetchone()
        current = int(row[0]) if row else 0
        if current > LATEST:
            raise _too_new(url, current)
        for version, sql in MIGRATIONS:
            if version > current:
                conn.execute(sql)
                conn.execute(
                    "INSERT INTO toolbridge_schema (version, applied_at) VALUES (%s, %s)",
                    (version, time.time()),
                )
                current = version
    return current


def _too_new(url: str, version: int) -> ConfigError:
    shown = redact_url(url)
    return ConfigError(
        f"journal {shown} has schema version {version}, newer than this toolbridge knows ({LATEST}); "
        "upgrade toolbridge",
        details={"journal": shown},
    )


class PostgresJournal(JournalBackend):
    """The PostgreSQL evidence journal (writer); `open_existing` opens a read-only reader.

    A governed session awaits its writes on the event loop (`is_async`): they go through a pool
    of psycopg `AsyncConnection`s (`toolbridge._pgpool`), so a database round trip never holds
    the loop. The sync methods (`Runtime.inspect`, `toolbridge runs`, the batch store, shared
    budgets from threads) use a small psycopg-pool `ConnectionPool`, opened on first use.

    Args:
        url: `postgresql://user:password@host:port/dbname` (libpq parameters such as
            `?sslmode=require` are passed on).
        migrate: apply missing schema versions now (the default for writers).
        pool_size: most connections this process keeps open, per pool.
        connect_timeout_s: how long opening a connection, or waiting for a free pooled one, may
            take before a write fails with `JournalWriteError`.
        statement_timeout_ms: how long one statement may run, waiting for locks included
            (PostgreSQL's `statement_timeout`), before the write fails with `JournalWriteError`
            (the SQLite journal's busy timeout, 5 s by default). The async writes are also cut
            on the client 2 s after it, should the server never answer (a lost network).

    Raises:
        ConfigError: (`ERR_CONFIG`) when psycopg is not installed, the URL cannot be parsed, the
            database cannot be reached, or (readers) it holds no journal.
    """

    is_async = True

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        pool_size: int = 4,
        connect_timeout_s: float = 10.0,
        statement_timeout_ms: int = 5000,
        _readonly: bool = False,
    ) -> None:
        if not is_postgres_url(url):
            raise ConfigError("a PostgreSQL journal URL starts with postgresql://")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError("pool_size must be a positive integer")
        if (
            isinstance(statement_timeout_ms, bool)
            or not isinstance(statement_timeout_ms, int)
            or statement_timeout_ms < 1
        ):
            raise ConfigError("statement_timeout_ms must be a positive integer")
        _parts(url)  # psycopg present, URL parseable
        import psycopg

        self._url = url
        self.path = redact_url(url)
        self.readonly = _readonly
        self.writer = Writer.current()
        self._timeout = float(connect_timeout_s)
        self._statement_s = statement_timeout_ms / 1000 + 2.0
        self._pool_size = pool_size
        options = "-c default_transaction_read_only=on" if _readonly else None
        try:
            extra: dict[str, Any] = {"options": options} if options else {}
            with psycopg.connect(url, connect_timeout=max(1, int(connect_timeout_s)), **extra) as conn:
                if _readonly:
                    self._check_reader(conn)
                elif migrate:
                    _migrate(conn, url)
                else:
                    self._check_version(conn)
        except ConfigError:
            raise
        except (psycopg.Error, OSError, UnicodeError, ValueError) as exc:
            raise _connect_error(url, exc) from None
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout_s)),
            "options": f"-c statement_timeout={statement_timeout_ms}" + (f" {options}" if options else ""),
        }
        self._apool = AsyncPgPool(url, max_size=pool_size, timeout_s=self._timeout, kwargs=self._kwargs)
        self._failures = (psycopg.Error, PoolUnavailable, OSError, TimeoutError)
        self._sync_pool: Any = None
        self._sync_lock = threading.Lock()
        self._closed = False
        if _readonly:  # a reader is used from sync code: its pool is opened now
            try:
                self._pool  # noqa: B018 - opens it
            except Exception as exc:
                raise _connect_error(url, exc) from None

    @classmethod
    def open_existing(cls, url: str, *, connect_timeout_s: float = 10.0) -> PostgresJournal:
        """Open an existing journal **read-only**: no migration, no write, ever.

        Raises:
            ConfigError: (`ERR_CONFIG`) when the database cannot be reached or holds no journal.
        """
        return cls(url, migrate=False, pool_size=2, connect_timeout_s=connect_timeout_s, _readonly=True)

    def _version(self, conn: Any) -> int | None:
        row = conn.execute("SELECT to_regclass('toolbridge_schema') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return None
        got = conn.execute("SELECT COALESCE(MAX(version), 0) FROM toolbridge_schema").fetchone()
        return int(got[0]) if got else 0

    def _check_reader(self, conn: Any) -> None:
        version = self._version(conn)
        conn.rollback()
        if not version:
            raise ConfigError(
                f"{self.path} is not a toolbridge journal: it has no toolbridge tables",
                details={"journal": self.path},
            )
        if version > LATEST:
            raise _too_new(self._url, version)

    def _check_version(self, conn: Any) -> None:
        version = self._version(conn)
        if version is None or version < LATEST:
            raise ConfigError(
                f"journal {self.path} needs migrating "
                "(run `toolbridge journal migrate` or open it as a writer)",
                details={"journal": self.path},
            )
        if version > LATEST:
            raise _too_new(self._url, version)

    def close(self) -> None:
        """Close every pooled connection (busy async ones as soon as their write ends)."""
        self._closed = True
        self._apool.close()
        with self._sync_lock:
            pool, self._sync_pool = self._sync_pool, None
        if pool is not None:
            pool.close()

    # -- plumbing --------------------------------------------------------------------------------

    @property
    def _pool(self) -> Any:
        """The sync `ConnectionPool`, opened on first use."""
        from psycopg_pool import ConnectionPool, PoolClosed

        with self._sync_lock:
            if self._closed:
                raise PoolClosed(f"journal {self.path} is closed")
            if self._sync_pool is None:
                pool = ConnectionPool(
                    self._url,
                    min_size=1,
                    max_size=self._pool_size,
                    kwargs=self._kwargs,
                    timeout=self._timeout,
                    open=False,
                    name="toolbridge-journal",
                )
                try:
                    pool.open(wait=True, timeout=self._timeout)
                except BaseException:
                    pool.close()
                    raise
                self._sync_pool = pool
            return self._sync_pool

    @contextmanager
    def _conn(self, *, write: bool) -> Iterator[Any]:
        import psycopg
        from psycopg_pool import PoolClosed, PoolTimeout

        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except (psycopg.Error, PoolTimeout, PoolClosed, OSError) as exc:
            if write:
                raise JournalWriteError(self.path) from None
            raise ConfigError(
                f"journal {self.path} cannot be read: {_reason(exc, self._url)}",
                details={"journal": self.path},
            ) from None

    def _write(self, sql: str, params: Sequence[Any]) -> Any:
        if self.readonly:
            raise JournalWriteError(self.path)
        with self._conn(write=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchone() if cur.description else None

    @asynccontextmanager
    async def _aconn(self) -> AsyncIterator[Any]:
        """A connection of the async pool for one transaction, cut after the statement timeout.

        A failure of any kind (no connection in time, the server gone or the connection killed
        mid-statement, the statement timeout) is `JournalWriteError`; the connection is then
        closed, not reused, and a statement cut off is cancelled on the server (`_pgpool`).
        """
        if self.readonly:
            raise JournalWriteError(self.path)
        try:
            async with self._apool.connection() as conn:
                with anyio.fail_after(self._statement_s):
                    yield conn
        except self._failures:
            raise JournalWriteError(self.path) from None

    async def _awrite(self, sql: str, params: Sequence[Any]) -> Any:
        """One statement in its own transaction (`_aconn`, without its extra layer)."""
        if self.readonly:
            raise JournalWriteError(self.path)
        try:
            async with self._apool.connection() as conn:
                with anyio.fail_after(self._statement_s):
                    cur = await conn.execute(sql, params)
                    return await cur.fetchone() if cur.description else None
        except self._failures:
            raise JournalWriteError(self.path) from None

    # -- writing (sync) --------------------------------------------------------------------------

    def start_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> None:
        """Record a run as started (status `running`)."""
        self._write(_SQL.start_run, start_run_params(self.writer, run_id, agent, profile, principal))

    def end_run(
        self,
        run_id: str,
        *,
        outcome: str,
        error_code: str | None,
        cost_micros: int,
        input_tokens: int,
        output_tokens: int,
        model_calls: int,
        calls: Sequence[CallEnd] = (),
    ) -> None:
        """Record a run's end, with the call ends given, in one transaction."""
        if self.readonly:
            raise JournalWriteError(self.path)
        usage = (input_tokens, output_tokens, model_calls)
        writes = end_run_writes(_SQL, run_id, outcome, error_code, cost_micros, usage, calls)
        with self._conn(write=True) as conn, conn.transaction():
            for sql, params in writes:
                conn.execute(sql, params)

    def record_plan(self, plan: CallPlan) -> int:
        """Record a planned call (outcome `running`, nothing sent); returns its row id."""
        params = plan_call_params(plan)
        return int(self._write(_SQL.plan_call, params)[0])

    def request_sent(self, row: int) -> None:
        """Record that the request is about to leave (committed before it is sent)."""
        self._write(_SQL.request_sent, (time.time(), row))

    def response_received(self, row: int) -> None:
        """Record that a response arrived."""
        self._write(_SQL.response_received, (row,))

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        """Record a call's end."""
        self._write(_SQL.end_call, (outcome, error_code, time.time(), cost_micros, row))

    # -- writing (async: what a governed session awaits) -----------------------------------------

    async def astart_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> bool:
        """Record a run as started; False (nothing written) when the journal already has it."""
        params = start_run_params(self.writer, run_id, agent, profile, principal)
        return await self._awrite(_SQL.start_new_run, params) is not None

    async def aend_run(
        self,
        run_id: str,
        *,
        outcome: str,
        error_code: str | None,
        cost_micros: int,
        input_tokens: int,
        output_tokens: int,
        model_calls: int,
        calls: Sequence[CallEnd] = (),
    ) -> None:
        """Record a run's end, with the call ends given, in one transaction."""
        usage = (input_tokens, output_tokens, model_calls)
        writes = end_run_writes(_SQL, run_id, outcome, error_code, cost_micros, usage, calls)
        async with self._aconn() as conn, conn.transaction():
            for sql, params in writes:
                await conn.execute(sql, params)

    async def arecord_plan(self, plan: CallPlan) -> int:
        """Record a planned call (outcome `running`, nothing sent); returns its row id."""
        params = plan_call_params(plan)
        return int((await self._awrite(_SQL.plan_call, params))[0])

    async def arequest_sent(self, row: int) -> None:
        """Record that the request is about to leave (committed before it is sent)."""
        await self._awrite(_SQL.request_sent, (time.time(), row))

    async def aresponse_received(self, row: int) -> None:
        """Record that a response arrived."""
        await self._awrite(_SQL.response_received, (row,))

    async def aend_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        """Record a call's end."""
        await self._awrite(_SQL.end_call, (outcome, error_code, time.time(), cost_micros, row))

    # -- shared budgets --------------------------------------------------------------------------

    def open_shared(self, budget_id: str, max_micros: int) -> None:
        """Create the shared budget `budget_id`, or set its maximum (what is spent stays)."""
        self._write(_SQL.open_budget, (budget_id, max_micros))

    def reserve_shared(self, budget_id: str, amount: int) -> bool:
        """Reserve `amount` of a shared budget, atomically; False (nothing reserved) when it does not fit."""
        amount = max(0, amount)
        return self._write(_SQL.reserve_budget, (amount, budget_id, amount)) is not None

    def settle_shared(self, budget_id: str, reserved: int, actual: int) -> None:
        """Charge `actual` against a shared budget and release the `reserved` amount, in one statement."""
        reserved = max(0, reserved)
        self._write(_SQL.settle_budget, (reserved, reserved, max(0, actual), budget_id))

    async def areserve_shared(self, budget_id: str, amount: int) -> bool:
        """`reserve_shared`, awaited on the event loop."""
        amount = max(0, amount)
        return await self._awrite(_SQL.reserve_budget, (amount, budget_id, amount)) is not None

    async def asettle_shared(self, budget_id: str, reserved: int, actual: int) -> None:
        """`settle_shared`, awaited on the event loop."""
        reserved = max(0, reserved)
        await self._awrite(_SQL.settle_budget, (reserved, reserved, max(0, actual), budget_id))

    def shared(self, budget_id: str) -> dict[str, int] | None:
        """`{"max_micros", "spent_micros", "reserved_micros"}` of a shared budget, or None."""
        with self._conn(write=False) as conn:
            return budget_dict(conn.execute(_SQL.get_budget, (budget_id,)).fetchone())

    # -- quotas per principal (`_budgets`) -------------------------------------------------------

    def reserve_quota(self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int) -> bool:
        params = reserve_params(principal, key, ceiling, max_calls, max_micros)
        return self._write(_QUOTAS.reserve, params) is not None

    def settle_quota(self, principal: str, key: str, reserved: int, actual: int, calls_back: int) -> None:
        self._write(_QUOTAS.settle, settle_params(principal, key, reserved, actual, calls_back))

    def quota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        with self._conn(write=False) as conn:
            return usage_of(conn.execute(_QUOTAS.usage, (principal, key)).fetchone())

    async def areserve_quota(
        self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int
    ) -> bool:
        params = reserve_params(principal, key, ceiling, max_calls, max_micros)
        return await self._awrite(_QUOTAS.reserve, params) is not None

    async def asettle_quota(
        self, principal: str, key: str, reserved: int, actual: int, calls_back: int
    ) -> None:
        await self._awrite(_QUOTAS.settle, settle_params(principal, key, reserved, actual, calls_back))

    async def aquota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        return usage_of(await self._awrite(_QUOTAS.usage, (principal, key)))

    # -- leases (`_leases`) -----------------------------------------------------------------------

    def hold_lease(self, writer: str, until: float) -> None:
        self._write(_LEASES.hold, (writer, until, time.time()))

    def reap_expired(self, now: float, limit: int = 100) -> list[str]:
        if self.readonly:
            raise JournalWriteError(self.path)
        settled: list[str] = []
        with self._conn(write=True) as conn:
            for (run_id,) in conn.execute(_LEASES.expired_runs, (now, limit)).fetchall():
                calls, run = lease_settle_params(run_id, time.time())
                with conn.transaction():
                    conn.execute(_LEASES.settle_calls, calls)
                    if conn.execute(_LEASES.settle_run, run).fetchone() is not None:
                        settled.append(run_id)
        return settled

    async def ahold_lease(self, writer: str, until: float) -> None:
        await self._awrite(_LEASES.hold, (writer, until, time.time()))

    async def areap_expired(self, now: float, limit: int = 100) -> list[str]:
        settled: list[str] = []
        async with self._aconn() as conn:
            cur = await conn.execute(_LEASES.expired_runs, (now, limit))
            for (run_id,) in await cur.fetchall():
                calls, run = lease_settle_params(run_id, time.time())
                async with conn.transaction():
                    await conn.execute(_LEASES.settle_calls, calls)
                    done = await conn.execute(_LEASES.settle_run, run)
                    if await done.fetchone() is not None:
                        settled.append(run_id)
        return settled

    # -- reading ---------------------------------------------------------------------------------

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs (newest first), without their calls, with outcomes read back."""
        with self._conn(write=False) as conn:
            rows = conn.execute(_SQL.list_runs, (max(0, limit),)).fetchall()
            return [self._record(conn, row, with_calls=False) for row in rows]

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        """One run with its calls, or `None` when the journal has no such run."""
        with self._conn(write=False) as conn:
            row = conn.execute(_SQL.get_run, (run_id,)).fetchone()
            if row is None:
                return None
            return self._record(conn, row, with_calls=True, active=active)

    def _record(self, conn: Any, row: Sequence[Any], *, with_calls: bool, active: bool = False) -> RunRecord:
        calls = (
            conn.execute(_SQL.calls_of_run, (row[0],)).fetchall()
            if needs_calls(row, with_calls=with_calls)
            else ()
        )
        return run_record(row, calls, with_calls=with_calls, active=active)
