"""The SQLite journal backend (`durable` profile), and its read-only reader.

The writer opens (or creates) the file in WAL mode with `synchronous=FULL` and commits every
change at once, so a process killed mid-call leaves exactly what had happened. It refuses a file
that is an SQLite database of some other application (it never adds tables to one). A write
that fails (locked by another connection past `busy_timeout_ms`, disk full: `SQLITE_FULL`, file
gone) raises `JournalWriteError` and stores nothing of that write.

The reader (`Journal.open_existing`) never writes: it opens the file through a `mode=ro` URI
(falling back to `immutable=1` when SQLite cannot even read it that way, for example a WAL
journal on a read-only file system with no `-shm` file), never migrates, never changes the
journal mode, and refuses an empty file, a file that is not SQLite, or an SQLite file without
the journal's tables, with a `ConfigError` naming the file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._budgets import QUOTAS_TABLE, QuotaStatements, QuotaUsage, reserve_params, settle_params, usage_of
from ._journal import CallEnd, CallPlan, JournalBackend, JournalWriteError, RunRecord, Writer
from ._journal_sql import (
    JOURNAL_TABLES,
    SQLITE,
    Statements,
    end_run_writes,
    needs_calls,
    plan_call_params,
    run_record,
    start_run_params,
)
from ._leases import LEASES_TABLE, LeaseStatements
from ._leases import settle_params as lease_settle_params

__all__ = ["Journal", "SqliteJournal"]

_RUN_COLUMNS = frozenset({"run_id", "profile", "status", "started_at", "pid", "host", "proc_start"})
_CALL_COLUMNS = frozenset({"id", "run_id", "call_id", "tool_id", "effects", "request_sent", "outcome"})
_MAGIC = b"SQLite format 3\x00"
_SQL = Statements.of(SQLITE)
_QUOTAS = QuotaStatements.of(SQLITE)
_LEASES = LeaseStatements.of(SQLITE)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}


def _kind_of(db: sqlite3.Connection) -> str:
    """`journal`, `empty` (an SQLite file with no tables) or `foreign` (someone else's tables)."""
    tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return "empty"
    if {"runs", "calls"} <= tables and _columns(db, "runs") >= _RUN_COLUMNS:
        return "journal" if _columns(db, "calls") >= _CALL_COLUMNS else "foreign"
    return "foreign"


def _not_a_journal(path: str, why: str) -> ConfigError:
    return ConfigError(f"{path!r} is not a toolbridge journal: {why}", details={"journal": path})


class SqliteJournal(JournalBackend):
    """The SQLite evidence journal (writer).

    Args:
        path: a file path, or `":memory:"`.
        durable: fsync every commit (`synchronous=FULL`; files use WAL mode).
        busy_timeout_ms: how long a write waits for another connection's lock before it fails.

    Raises:
        ConfigError: (`ERR_CONFIG`) when the file cannot be opened, or is an SQLite database of
            another application.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, durable: bool = False, busy_timeout_ms: int = 5000
    ) -> None:
        self.path = str(path)
        self.durable = durable
        self.readonly = False
        self.writer = Writer.current()
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise ConfigError("busy_timeout_ms must be a non-negative integer")
        memory = self.path == ":memory:"
        try:
            if not memory:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"journal {self.path!r} cannot be opened: {exc}") from None
        try:
            self._db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            kind = _kind_of(self._db)
            if kind == "foreign":
                raise _not_a_journal(self.path, "it holds tables of another application")
            if not memory:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
            self._db.executescript(SQLITE.sql(JOURNAL_TABLES + QUOTAS_TABLE + LEASES_TABLE))
            if "principal" not in _columns(self._db, "runs"):  # a journal written before principals
                self._db.execute("ALTER TABLE runs ADD COLUMN principal TEXT")
            self._principal = True
        except ConfigError:
            self._db.close()
            raise
        except sqlite3.Error as exc:
            self._db.close()
            raise ConfigError(f"journal {self.path!r} cannot be opened as an SQLite journal: {exc}") from None

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str]) -> SqliteJournal:
        """Open an existing journal **read-only** (for reading it back; see the module docs).

        Raises:
            ConfigError: (`ERR_CONFIG`) when there is no such file, or it is empty, not SQLite, or
                not a journal.
        """
        shown = str(path)
        file = Path(path)
        if not file.exists():
            raise ConfigError(f"journal {shown!r} does not exist", details={"journal": shown})
        if not file.is_file():
            raise _not_a_journal(shown, "it is not a regular file")
        try:
            with file.open("rb") as f:
                magic = f.read(len(_MAGIC))
        except OSError as exc:
            raise ConfigError(f"journal {shown!r} cannot be read: {exc.strerror}") from None
        if not magic:
            raise _not_a_journal(shown, "the file is empty")
        if magic != _MAGIC:
            raise _not_a_journal(shown, "it is not an SQLite database")
        self = cls.__new__(cls)
        self.path = shown
        self.durable = False
        self.readonly = True
        self.writer = Writer.current()
        uri = file.resolve().as_uri()
        last: sqlite3.Error | None = None
        for mode in ("mode=ro", "immutable=1"):
            db: sqlite3.Connection | None = None
            try:
                db = sqlite3.connect(f"{uri}?{mode}", uri=True, isolation_level=None, check_same_thread=False)
                kind = _kind_of(db)
            except sqlite3.Error as exc:
                if db is not None:
                    db.close()
                last = exc
                continue
            if kind != "journal":
                db.close()
                why = "it has no tables" if kind == "empty" else "it holds tables of another application"
                raise _not_a_journal(shown, why)
            self._db = db
            try:  # a journal written before principals (a writer adds the column)
                self._principal = "principal" in _columns(db, "runs")
            except sqlite3.Error:
                self._principal = True  # the reads will say what is wrong
            return self
        raise ConfigError(f"journal {shown!r} cannot be read: {last}", details={"journal": shown})

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        # isolation_level=None: each statement is its own committed transaction.
        try:
            cur = self._db.execute(sql, params)
        except sqlite3.Error:
            raise JournalWriteError(self.path) from None
        return int(cur.lastrowid or 0)

    # -- writing -------------------------------------------------------------------------------

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
        usage = (input_tokens, output_tokens, model_calls)
        writes = end_run_writes(_SQL, run_id, outcome, error_code, cost_micros, usage, calls)
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in writes:
                    self._db.execute(sql, params)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error:
            raise JournalWriteError(self.path) from None

    def record_plan(self, plan: CallPlan) -> int:
        """Record a planned call (outcome `running`, nothing sent); returns its row id."""
        return self._write(_SQL.plan_call, plan_call_params(plan))

    def request_sent(self, row: int) -> None:
        """Record that the request is about to leave (committed before it is sent)."""
        self._write(_SQL.request_sent, (time.time(), row))

    def response_received(self, row: int) -> None:
        """Record that a response arrived."""
        self._write(_SQL.response_received, (row,))

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        """Record a call's end."""
        self._write(_SQL.end_call, (outcome, error_code, time.time(), cost_micros, row))

    # -- quotas (`_budgets`): one atomic statement each ---------------------------------------

    def reserve_quota(self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int) -> bool:
        params = reserve_params(principal, key, ceiling, max_calls, max_micros)
        try:
            return self._db.execute(_QUOTAS.reserve, params).fetchone() is not None
        except sqlite3.Error:
            raise JournalWriteError(self.path) from None

    def settle_quota(self, principal: str, key: str, reserved: int, actual: int, calls_back: int) -> None:
        self._write(_QUOTAS.settle, settle_params(principal, key, reserved, actual, calls_back))

    def quota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        rows = self._read(_QUOTAS.usage, (principal, key))
        return usage_of(rows[0] if rows else None)

    # -- leases (`_leases`) ---------------------------------------------------------------------

    def hold_lease(self, writer: str, until: float) -> None:
        self._write(_LEASES.hold, (writer, until, time.time()))

    def reap_expired(self, now: float, limit: int = 100) -> list[str]:
        settled: list[str] = []
        for (run_id,) in self._read(_LEASES.expired_runs, (now, limit)):
            calls, run = lease_settle_params(run_id, time.time())
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.execute(_LEASES.settle_calls, calls)
                    if self._db.execute(_LEASES.settle_run, run).fetchone() is not None:
                        settled.append(run_id)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error:
                raise JournalWriteError(self.path) from None
        return settled

    # -- reading -------------------------------------------------------------------------------

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise ConfigError(f"journal {self.path!r} cannot be read: {exc}") from None

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs (newest first), without their calls, with outcomes read back."""
        sql = _SQL.list_runs if self._principal else _SQL.list_runs_without_principal
        return [self._read_run(row, with_calls=False) for row in self._read(sql, (limit,))]

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        """One run with its calls, or `None` when the journal has no such run.

        Args:
            run_id: the run.
            active: the caller knows the run is still in progress (never read it as interrupted).
        """
        sql = _SQL.get_run if self._principal else _SQL.get_run_without_principal
        rows = self._read(sql, (run_id,))
        if not rows:
            return None
        return self._read_run(rows[0], with_calls=True, active=active)

    def _read_run(self, row: Any, *, with_calls: bool, active: bool = False) -> RunRecord:
        calls = self._read(_SQL.calls_of_run, (row[0],)) if needs_calls(row, with_calls=with_calls) else ()
        return run_record(row, calls, with_calls=with_calls, active=active)


Journal = SqliteJournal
"""The SQLite journal (the name the package has always exported)."""
