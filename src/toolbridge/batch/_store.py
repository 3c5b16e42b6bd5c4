"""Where a batch keeps its items and its budget: beside the journal, in the same database.

One row per input item: `pending` (not run, or to be run again), `claimed` (a run was started
for it: `run_id`, `attempt`, the budget `reserved` for it), `ended` (its output line is stored in
`result`), `unknown` (its run is `outcome_unknown`: never run again; listed by `batch status`),
`skipped` (the batch budget had no room for it: run again on the next resume).

One row per batch (`batches`): the digest of the inputs it started with (a second batch over the
same inputs is refused unless asked for) and the **lease** of the driver running it: an owner
token, its host, pid and process start, and `lease_until`, renewed by the driver's heartbeat.
A batch is held while its lease has not expired and its owner is not known dead (an owner on
this machine whose process is gone holds nothing). Only the holder claims items: the claim
statement checks the lease in the same `UPDATE`, so a driver that lost its lease claims nothing.

The batch budget is the shared budget `batch:<id>` (`toolbridge_budgets` on PostgreSQL, a
`budgets` table in the SQLite file): reserved with one atomic `UPDATE ... WHERE room >= n`, so
two workers never spend the same micro-unit.

The tables and the budget statements are the journal's (`runtime._journal_sql`), written once
for both databases; the item statements below are templates filled in the same way.

The SQLite store opens its own connection to the journal's file (WAL; several processes on one
machine may share it). The PostgreSQL store uses the journal's connection pool (migration 2 made
its table).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from ..errors import ConfigError
from ..runtime import PostgresJournal
from ..runtime.journal import (
    BATCH_ITEMS_TABLE,
    BATCHES_TABLE,
    BUDGETS_TABLE,
    POSTGRES,
    SQLITE,
    Dialect,
    JournalBackend,
    LeaseStatements,
    Statements,
    Writer,
    budget_dict,
    process_alive,
    writer_key,
)

__all__ = ["BatchRow", "BatchStore", "Item", "Lease", "RunWriter", "StoredItem", "open_store"]

_R = TypeVar("_R")
_Steps = Generator[tuple[str, tuple[object, ...]], list[Any], _R]
"""A change written as statements: yields `(sql, params)`, receives each one's rows."""


@dataclass(frozen=True)
class Item:
    """One valid input line."""

    key: str  # the id as JSON text: the key in the store
    id: str | int  # the id as given (a string or an integer; the item's digest when none was given)
    line: int
    input: str
    sha256: str


@dataclass
class StoredItem:
    key: str
    line: int
    state: str
    run_id: str | None
    attempt: int
    reserved: int
    result: dict[str, object] | None
    input_sha256: str


@dataclass(frozen=True)
class Lease:
    """A driver's claim to run a batch: a fresh token, and the process holding it."""

    token: str
    host: str
    pid: int
    start: str | None

    @classmethod
    def mine(cls) -> Lease:
        writer = Writer.current()
        return cls(uuid.uuid4().hex, writer.host, writer.pid, writer.proc_start)


@dataclass
class BatchRow:
    """A batch: the inputs it started with and its lease (`owner` is `None` when released)."""

    batch_id: str
    inputs_sha256: str
    created_at: float
    owner: str | None
    owner_host: str | None
    owner_pid: int | None
    owner_start: str | None
    lease_until: float | None

    def lapsed(self, now: float) -> bool:
        """Released, or expired: every process of its driver had a full lease period to stop."""
        return self.owner is None or self.lease_until is None or self.lease_until < now

    def held(self, now: float) -> bool:
        """Whether its driver may still be running: the lease is unexpired, the owner not known dead."""
        if self.owner is None or self.lease_until is None or self.lease_until < now:
            return False
        if self.owner_host == socket.gethostname():
            return process_alive(self.owner_pid, self.owner_host, self.owner_start)
        return True  # another machine: only the lease's expiry says it is gone


@dataclass
class RunWriter:
    """The process that wrote a run, and its lease in the journal (`runtime._leases`).

    `lease_until` is `None` when that process never held a lease (an older toolbridge): only
    its host can then judge it, by its pid.
    """

    host: str | None
    pid: int | None
    start: str | None
    lease_until: float | None

    @property
    def key(self) -> str:
        return writer_key(Writer(self.pid or 0, self.host or "", self.start))

    def proven_dead(self) -> bool:
        """On this machine, and its process is gone (pid dead, or reused by another program)."""
        return self.host == socket.gethostname() and not process_alive(self.pid, self.host, self.start)


_BATCH_COLUMNS = "batch_id, inputs_sha256, created_at, owner, owner_host, owner_pid, owner_start, lease_until"


class BatchStore:
    """The items of batches, in SQL written once (`_journal_sql`) for the store's dialect."""

    dialect: Dialect = SQLITE
    statements: Statements = Statements.of(SQLITE)
    _reserved: dict[tuple[str, str], int]  # (batch, item) -> reserved, for items this store claimed
    lease: Lease | None = None  # set once this store's driver holds a batch's lease: claims check it
    prior: BatchRow | None = None  # the batch's row before `acquire` took its lease

    # -- the SQL seam: each returns rows (or None) and commits at once ----------------------------

    def _exec(
        self, sql: str, params: tuple[object, ...], *, many: Sequence[tuple[object, ...]] | None = None
    ) -> list[Any]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _q(self, template: str) -> str:
        return self.dialect.sql(template)

    # -- items ----------------------------------------------------------------------------------

    def add_items(self, batch_id: str, items: list[Item]) -> list[str]:
        """Register items not yet known; return the keys of known items whose input changed."""
        now = time.time()
        rows = [(batch_id, it.key, it.line, it.sha256, "pending", now) for it in items]
        for start in range(0, len(rows), 500):
            self._exec(
                self._q(
                    "INSERT INTO {batch_items} (batch_id, item_id, line, input_sha256, state, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (batch_id, item_id) DO NOTHING"
                ),
                (),
                many=rows[start : start + 500],
            )
        known = {s.key: s.input_sha256 for s in self.items(batch_id)}
        return [it.key for it in items if known.get(it.key, it.sha256) != it.sha256]

    def items(self, batch_id: str, state: str | None = None) -> list[StoredItem]:
        sql = (
            "SELECT item_id, line, state, run_id, attempt, reserved_micros, result, input_sha256 "
            "FROM {batch_items} WHERE batch_id = ?"
        )
        params: tuple[object, ...] = (batch_id,)
        if state is not None:
            sql += " AND state = ?"
            params += (state,)
        rows = self._exec(self._q(sql + " ORDER BY line"), params)
        return [
            StoredItem(
                key=str(r[0]),
                line=int(r[1]),
                state=str(r[2]),
                run_id=r[3],
                attempt=int(r[4]),
                reserved=int(r[5]),
                result=json.loads(r[6]) if r[6] else None,
                input_sha256=str(r[7]),
            )
            for r in rows
        ]

    def has_batch(self, batch_id: str) -> bool:
        return bool(
            self._exec(self._q("SELECT 1 FROM {batch_items} WHERE batch_id = ? LIMIT 1"), (batch_id,))
        )

    # -- batches and leases ----------------------------------------------------------------------

    def batch(self, batch_id: str) -> BatchRow | None:
        """The batch's row; `None` when there is none (a batch started before leases, or no batch)."""
        try:
            rows = self._exec(
                self._q(f"SELECT {_BATCH_COLUMNS} FROM {{batches}} WHERE batch_id = ?"), (batch_id,)
            )
        except Exception:  # a read-only journal written before batches had a row (no such table)
            return None
        return BatchRow(*rows[0]) if rows else None

    def batches_with_inputs(self, inputs_sha256: str) -> list[str]:
        rows = self._exec(
            self._q("SELECT batch_id FROM {batches} WHERE inputs_sha256 = ? ORDER BY created_at"),
            (inputs_sha256,),
        )
        return [str(r[0]) for r in rows]

    def create_batch(self, batch_id: str, inputs_sha256: str, lease: Lease, lease_s: float) -> bool:
        """Record a new batch held by `lease`; `False` when the id is taken."""
        now = time.time()
        got = self._exec(
            self._q(
                f"INSERT INTO {{batches}} ({_BATCH_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (batch_id) DO NOTHING RETURNING 1"
            ),
            (batch_id, inputs_sha256, now, lease.token, lease.host, lease.pid, lease.start, now + lease_s),
        )
        if got:
            self.lease = lease
        return bool(got)

    def acquire(self, batch_id: str, lease: Lease, lease_s: float) -> BatchRow | None:
        """Take the batch's lease unless a driver holds it: `None` when taken, else the holder's row.

        Once taken, `prior` is the row as it was (who held it; released, lapsed, or its owner dead).
        """
        prior = self.batch(batch_id)
        if prior is None:
            raise ConfigError(f"no batch {batch_id!r}", code="ERR_BATCH_UNKNOWN")
        now = time.time()
        if prior.held(now):
            return prior
        owner_is = "owner IS NULL" if prior.owner is None else "owner = ?"
        got = self._exec(
            self._q(
                "UPDATE {batches} SET owner = ?, owner_host = ?, owner_pid = ?, owner_start = ?, "
                f"lease_until = ? WHERE batch_id = ? AND {owner_is} RETURNING 1"
            ),
            (lease.token, lease.host, lease.pid, lease.start, now + lease_s, batch_id)
            + (() if prior.owner is None else (prior.owner,)),
        )
        if not got:  # another driver took it in between
            return self.batch(batch_id) or prior
        self.lease = lease
        self.prior = prior
        return None

    def renew(self, batch_id: str, lease_s: float) -> bool:
        """Extend this store's lease; `False` when it was lost (another driver took the batch)."""
        if self.lease is None:
            return False
        got = self._exec(
            self._q("UPDATE {batches} SET lease_until = ? WHERE batch_id = ? AND owner = ? RETURNING 1"),
            (time.time() + lease_s, batch_id, self.lease.token),
        )
        return bool(got)

    def release_lease(self, batch_id: str) -> None:
        """Give the lease up (the driver is stopping): the batch is at once free to resume."""
        if self.lease is None:
            return
        self._exec(
            self._q("UPDATE {batches} SET owner = NULL, lease_until = NULL WHERE batch_id = ? AND owner = ?"),
            (batch_id, self.lease.token),
        )
        self.lease = None

    def run_host(self, run_id: str) -> str | None:
        """The host of the process that wrote a run (from the journal's runs table)."""
        rows = self._exec(self._q("SELECT host FROM {runs} WHERE run_id = ?"), (run_id,))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def run_writer(self, run_id: str) -> RunWriter | None:
        """The writer of a run and its lease; `None` when the journal has no such run."""
        try:
            rows = self._exec(LeaseStatements.of(self.dialect).run_writer, (run_id,))
        except Exception:  # a journal from before leases (no such table), read-only
            rows = self._exec(
                self._q("SELECT host, pid, proc_start, NULL FROM {runs} WHERE run_id = ?"), (run_id,)
            )
        if not rows:
            return None
        host, pid, start, until = rows[0]
        return RunWriter(
            host, None if pid is None else int(pid), start, None if until is None else float(until)
        )

    def end_lease(self, writer: RunWriter) -> None:
        """End the lease of a writer proven dead (`RunWriter.proven_dead`), so that its runs are
        settled at once instead of when the lease would have expired."""
        now = time.time()
        self._exec(LeaseStatements.of(self.dialect).expire, (now - 1, writer.key, now - 1))
        writer.lease_until = now - 1

    # Each change of an item is written once, as steps: a generator yielding `(sql, params)`
    # and receiving the statement's rows; `_drive` runs it on the sync connection, `_adrive`
    # awaits each statement (the PostgreSQL store: on the event loop, never holding it).

    def claim(self, batch_id: str, key: str, run_id: str, attempt: int, reserve: int) -> str:
        """Claim a pending (or skipped) item for `run_id`, reserving `reserve` of the batch budget.

        Returns `claimed`, `budget` (no room: the item is marked `skipped`) or `taken` (another
        driver holds it, or it ended).
        """
        return self._drive(self._claim(batch_id, key, run_id, attempt, reserve))

    async def aclaim(self, batch_id: str, key: str, run_id: str, attempt: int, reserve: int) -> str:
        """`claim`, awaited."""
        return await self._adrive(self._claim(batch_id, key, run_id, attempt, reserve))

    def finish(self, batch_id: str, key: str, state: str, result: dict[str, object], cost: int) -> None:
        """End a claimed item with its output line; settle its reservation against `cost`."""
        self._drive(self._end(batch_id, key, state, result, cost))

    async def afinish(
        self, batch_id: str, key: str, state: str, result: dict[str, object], cost: int
    ) -> None:
        """`finish`, awaited."""
        await self._adrive(self._end(batch_id, key, state, result, cost))

    def release(self, batch_id: str, key: str) -> None:
        """Put a claimed item back to `pending` (its run never sent anything); free its reservation."""
        self._drive(self._end(batch_id, key, "pending", None, 0))

    def _claim(self, batch_id: str, key: str, run_id: str, attempt: int, reserve: int) -> _Steps[str]:
        # two statements without a batch budget (is there one? claim), three with one (is there
        # one? reserve; claim): a budget row exists from the batch's start, never goes away
        budget = _budget_id(batch_id)
        has_budget = yield self.statements.get_budget, (budget,)
        reserved = 0
        if has_budget:
            rows = yield self.statements.reserve_budget, (reserve, budget, reserve)
            if not rows:
                yield (
                    self._q(
                        "UPDATE {batch_items} SET state='skipped', updated_at=? "
                        "WHERE batch_id=? AND item_id=?"
                    ),
                    (time.time(), batch_id, key),
                )
                return "budget"
            reserved = reserve
        fence, fenced = "", cast(tuple[str, ...], ())
        if self.lease is not None:  # only the lease's holder claims
            fence = " AND EXISTS (SELECT 1 FROM {batches} WHERE batch_id=? AND owner=?)"
            fenced = (batch_id, self.lease.token)
        got = yield (
            self._q(
                "UPDATE {batch_items} SET state='claimed', run_id=?, attempt=?, reserved_micros=?, "
                "updated_at=? WHERE batch_id=? AND item_id=? AND state IN ('pending', 'skipped')"
                + fence
                + " RETURNING 1"
            ),
            (run_id, attempt, reserved, time.time(), batch_id, key, *fenced),
        )
        if not got:
            if reserved:
                yield self.statements.settle_budget, (reserved, reserved, 0, budget)
            return "taken"
        self._reserved[(batch_id, key)] = reserved  # so `_end` need not read it back
        return "claimed"

    def _end(
        self, batch_id: str, key: str, state: str, result: dict[str, object] | None, cost: int
    ) -> _Steps[None]:
        """`finish` (with a result) or `release` (`pending`, no result): settle the reservation.

        The reservation is known when this store claimed the item (nothing else changes a
        claimed item's reservation); settling is skipped when nothing was reserved and nothing
        spent (no batch budget, or a free run): it would change nothing. So a claimed-and-ended
        run without a budget costs three statements in all.
        """
        known = self._reserved.pop((batch_id, key), None)
        if known is None:  # claimed by another store (an earlier driver)
            rows = yield (
                self._q("SELECT reserved_micros FROM {batch_items} WHERE batch_id=? AND item_id=?"),
                (batch_id, key),
            )
            known = int(rows[0][0]) if rows else 0
        reserved = known
        if result is None:
            yield (
                self._q(
                    "UPDATE {batch_items} SET state=?, reserved_micros=0, updated_at=? "
                    "WHERE batch_id=? AND item_id=?"
                ),
                (state, time.time(), batch_id, key),
            )
        else:
            yield (
                self._q(
                    "UPDATE {batch_items} SET state=?, result=?, reserved_micros=0, updated_at=? "
                    "WHERE batch_id=? AND item_id=?"
                ),
                (state, json.dumps(result, sort_keys=True), time.time(), batch_id, key),
            )
        amount = max(0, cost)
        if reserved or amount:
            yield self.statements.settle_budget, (reserved, reserved, amount, _budget_id(batch_id))

    def _drive(self, steps: _Steps[_R]) -> _R:
        try:
            sql, params = next(steps)
            while True:
                sql, params = steps.send(self._exec(sql, params))
        except StopIteration as done:
            return cast(_R, done.value)

    async def _adrive(self, steps: _Steps[_R]) -> _R:
        try:
            sql, params = next(steps)
            while True:
                sql, params = steps.send(await self._aexec(sql, params))
        except StopIteration as done:
            return cast(_R, done.value)

    async def _aexec(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        """One statement, awaited; by default the sync one (an SQLite file is local)."""
        return self._exec(sql, params)

    # -- the batch budget ------------------------------------------------------------------------

    def open_budget(self, batch_id: str, max_micros: int | None) -> None:
        if max_micros is None:
            return
        self._exec(self.statements.open_budget, (_budget_id(batch_id), max_micros))

    def budget(self, batch_id: str) -> dict[str, int] | None:
        rows = self._exec(self.statements.get_budget, (_budget_id(batch_id),))
        return budget_dict(rows[0] if rows else None)


def _budget_id(batch_id: str) -> str:
    return f"batch:{batch_id}"


class SqliteBatchStore(BatchStore):
    def __init__(self, path: str, *, reader: bool = False) -> None:
        self._reserved: dict[tuple[str, str], int] = {}
        self.path = path
        try:
            if reader:
                uri = Path(path).resolve().as_uri() + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
                tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if "batch_items" not in tables:
                    self._db.close()
                    raise ConfigError(f"the journal {path!r} holds no batch", code="ERR_BATCH_CONFIG")
                return
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.executescript(SQLITE.sql(BATCH_ITEMS_TABLE + BUDGETS_TABLE + BATCHES_TABLE))
        except sqlite3.Error as exc:
            raise ConfigError(f"the batch store in {path!r} cannot be opened: {exc}") from None

    def _exec(
        self, sql: str, params: tuple[object, ...], *, many: Sequence[tuple[object, ...]] | None = None
    ) -> list[Any]:
        try:
            if many is not None:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(sql, many)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                return []
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise ConfigError(f"the batch store in {self.path!r} failed: {exc}") from None

    def close(self) -> None:
        self._db.close()


class PostgresBatchStore(BatchStore):
    dialect = POSTGRES
    statements = Statements.of(POSTGRES)

    def __init__(self, journal: PostgresJournal) -> None:
        self._reserved: dict[tuple[str, str], int] = {}
        self.journal = journal

    def _exec(
        self, sql: str, params: tuple[object, ...], *, many: Sequence[tuple[object, ...]] | None = None
    ) -> list[Any]:
        with self.journal._conn(write=True) as conn:
            if many is not None:
                with conn.cursor() as cur:
                    cur.executemany(sql, many)
                return []
            cur = conn.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    async def _aexec(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        async with self.journal._aconn() as conn:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall()) if cur.description else []

    def close(self) -> None:
        """The journal owns the pools."""


def open_store(journal: JournalBackend, *, reader: bool = False) -> BatchStore:
    """The batch store beside `journal` (an SQLite file or a PostgreSQL database)."""
    if isinstance(journal, PostgresJournal):
        return PostgresBatchStore(journal)
    if journal.path in ("", ":memory:"):
        raise ConfigError("a batch needs a durable journal (an SQLite file or a PostgreSQL URL)")
    return SqliteBatchStore(journal.path, reader=reader)
