"""The PostgreSQL journal backend: the same evidence as SQLite, shared by many processes and machines.

`create_runtime("durable", journal="postgresql://user:secret@host:5432/db")` (or a manifest
`Runtime`'s `journal:` holding such a URL, secrets allowed) writes the journal to PostgreSQL
through psycopg 3 and a psycopg-pool connection pool (the optional extra `toolbridge[postgres]`,
imported only when a PostgreSQL journal is opened).

Same records and meaning as the SQLite journal (`_journal` documents the backend interface):
each write is its own committed transaction (autocommit), so "request sent" is durable in the
database before the request leaves; a run's end and the call ends it carries are one
transaction; a run still `running` whose writer died reads back as `outcome_unknown` or
`failed` / `INTERRUPTED`. Every row carries the writer's host and pid; a run written on another
machine is never claimed dead by a reader (the batch driver, which knows when a worker died,
reads such runs back itself).

**Schema and migrations.** The tables are `toolbridge_schema` (one row per applied version),
`toolbridge_runs`, `toolbridge_calls`, `toolbridge_budgets` (shared budgets) and, from version
2, `toolbridge_batch_items` (resumable batches). `migrate(url)` applies what is missing, under
a transaction-level advisory lock so that writers starting together migrate once; a writer
(`PostgresJournal(url)`) runs it on first use unless `migrate=False`. A reader
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

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigError
from ..redact import redact_value
from ._journal import (
    CallEnd,
    CallRecord,
    JournalBackend,
    JournalWriteError,
    RunRecord,
    Writer,
    process_alive,
    read_back,
)

__all__ = ["MIGRATIONS", "PostgresJournal", "is_postgres_url", "migrate", "redact_url"]

_SCHEMES = ("postgresql://", "postgres://")
_LOCK_KEY = 0x7462_6A6F  # advisory lock id for migrations ("tbjo")

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
CREATE TABLE toolbridge_runs (
    run_id TEXT PRIMARY KEY,
    agent TEXT,
    profile TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    cost_micros BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    model_calls BIGINT NOT NULL DEFAULT 0,
    pid INTEGER,
    host TEXT,
    proc_start TEXT,
    principal TEXT
);
CREATE INDEX toolbridge_runs_by_start ON toolbridge_runs (started_at DESC);
CREATE TABLE toolbridge_calls (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES toolbridge_runs (run_id),
    call_id TEXT NOT NULL,
    step INTEGER,
    tool_id TEXT NOT NULL,
    tool_version TEXT,
    kind TEXT NOT NULL,
    effects TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    args_bytes BIGINT NOT NULL DEFAULT 0,
    request_sent BOOLEAN NOT NULL DEFAULT FALSE,
    response_received BOOLEAN NOT NULL DEFAULT FALSE,
    outcome TEXT NOT NULL,
    error_code TEXT,
    planned_at DOUBLE PRECISION NOT NULL,
    sent_at DOUBLE PRECISION,
    ended_at DOUBLE PRECISION,
    cost_micros BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX toolbridge_calls_by_run ON toolbridge_calls (run_id, id);
CREATE TABLE toolbridge_budgets (
    budget_id TEXT PRIMARY KEY,
    max_micros BIGINT NOT NULL CHECK (max_micros >= 0),
    spent_micros BIGINT NOT NULL DEFAULT 0,
    reserved_micros BIGINT NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0)
);
""",
    ),
    (
        2,
        """
CREATE TABLE toolbridge_batch_items (
    batch_id TEXT NOT NULL,
    item_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    input_sha256 TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    reserved_micros BIGINT NOT NULL DEFAULT 0,
    result TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (batch_id, item_id)
);
CREATE INDEX toolbridge_batch_items_by_state ON toolbridge_batch_items (batch_id, state);
""",
    ),
)
"""Schema versions in order: (version, SQL). Never edit one that shipped; append a new one."""

LATEST = MIGRATIONS[-1][0]


def is_postgres_url(value: object) -> bool:
    """True when `value` is a string naming a PostgreSQL database (`postgresql://...`)."""
    return isinstance(value, str) and value.lower().startswith(_SCHEMES)


def _parts(url: str) -> dict[str, str]:
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "a PostgreSQL journal needs psycopg and psycopg-pool (install toolbridge[postgres])"
        ) from exc
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
    import psycopg

    _parts(url)
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

    Args:
        url: `postgresql://user:password@host:port/dbname` (libpq parameters such as
            `?sslmode=require` are passed on).
        migrate: apply missing schema versions now (the default for writers).
        pool_size: most connections this process keeps open.
        connect_timeout_s: how long opening a connection, or waiting for a free pooled one, may
            take before a write fails with `JournalWriteError`.
        statement_timeout_ms: how long one statement may run, waiting for locks included
            (PostgreSQL's `statement_timeout`), before the write fails with `JournalWriteError`
            (the SQLite journal's busy timeout, 5 s by default).

    Raises:
        ConfigError: (`ERR_CONFIG`) when psycopg is not installed, the URL cannot be parsed, the
            database cannot be reached, or (readers) it holds no journal.
    """

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
        from psycopg_pool import ConnectionPool

        self._url = url
        self.path = redact_url(url)
        self.readonly = _readonly
        self.writer = Writer.current()
        self._timeout = float(connect_timeout_s)
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
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout_s)),
            "options": f"-c statement_timeout={statement_timeout_ms}" + (f" {options}" if options else ""),
        }
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs=kwargs,
            timeout=self._timeout,
            open=False,
            name="toolbridge-journal",
        )
        try:
            self._pool.open(wait=True, timeout=self._timeout)
        except Exception as exc:
            self._pool.close()
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
        """Close every pooled connection."""
        self._pool.close()

    # -- plumbing --------------------------------------------------------------------------------

    @contextmanager
    def _conn(self, *, write: bool) -> Iterator[Any]:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except (psycopg.Error, PoolTimeout, OSError) as exc:
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

    # -- writing ---------------------------------------------------------------------------------

    def start_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> None:
        """Record a run as started (status `running`)."""
        w = self.writer
        self._write(
            "INSERT INTO toolbridge_runs (run_id, agent, profile, status, started_at, pid, host, proc_start, "
            "principal) VALUES (%s, %s, %s, 'running', %s, %s, %s, %s, %s)",
            (
                run_id,
                redact_value(agent),
                profile,
                time.time(),
                w.pid,
                w.host,
                w.proc_start,
                redact_value(principal),
            ),
        )

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
        now = time.time()
        with self._conn(write=True) as conn, conn.transaction():
            for end in calls:
                conn.execute(
                    "UPDATE toolbridge_calls SET outcome=%s, error_code=%s, ended_at=%s, cost_micros=%s "
                    "WHERE id=%s",
                    (end.outcome, end.error_code, now, end.cost_micros, end.row),
                )
            conn.execute(
                "UPDATE toolbridge_runs SET status=%s, error_code=%s, ended_at=%s, cost_micros=%s, "
                "input_tokens=%s, output_tokens=%s, model_calls=%s WHERE run_id=%s",
                (outcome, error_code, now, cost_micros, input_tokens, output_tokens, model_calls, run_id),
            )

    def plan_call(
        self,
        run_id: str,
        call_id: str,
        *,
        step: int | None,
        tool_id: str,
        tool_version: str | None,
        kind: str,
        effects: str,
        args_sha256: str,
        args_bytes: int,
    ) -> int:
        """Record a planned call (outcome `running`, nothing sent); returns its row id."""
        row = self._write(
            "INSERT INTO toolbridge_calls (run_id, call_id, step, tool_id, tool_version, kind, effects, "
            "args_sha256, args_bytes, outcome, planned_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'running', %s) RETURNING id",
            (
                run_id,
                call_id,
                step,
                redact_value(tool_id),  # names are free text: registered secrets never stored
                redact_value(tool_version),
                kind,
                effects,
                args_sha256,
                args_bytes,
                time.time(),
            ),
        )
        return int(row[0])

    def request_sent(self, row: int) -> None:
        """Record that the request is about to leave (committed before it is sent)."""
        self._write(
            "UPDATE toolbridge_calls SET request_sent=TRUE, sent_at=%s WHERE id=%s", (time.time(), row)
        )

    def response_received(self, row: int) -> None:
        """Record that a response arrived."""
        self._write("UPDATE toolbridge_calls SET response_received=TRUE WHERE id=%s", (row,))

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        """Record a call's end."""
        self._write(
            "UPDATE toolbridge_calls SET outcome=%s, error_code=%s, ended_at=%s, cost_micros=%s WHERE id=%s",
            (outcome, error_code, time.time(), cost_micros, row),
        )

    # -- shared budgets --------------------------------------------------------------------------

    def open_shared(self, budget_id: str, max_micros: int) -> None:
        """Create the shared budget `budget_id`, or set its maximum (what is spent stays)."""
        self._write(
            "INSERT INTO toolbridge_budgets (budget_id, max_micros) VALUES (%s, %s) "
            "ON CONFLICT (budget_id) DO UPDATE SET max_micros = EXCLUDED.max_micros",
            (budget_id, max_micros),
        )

    def reserve_shared(self, budget_id: str, amount: int) -> bool:
        """Reserve `amount` of a shared budget, atomically; False (nothing reserved) when it does not fit."""
        row = self._write(
            "UPDATE toolbridge_budgets SET reserved_micros = reserved_micros + %s "
            "WHERE budget_id = %s AND max_micros - spent_micros - reserved_micros >= %s RETURNING 1",
            (max(0, amount), budget_id, max(0, amount)),
        )
        return row is not None

    def settle_shared(self, budget_id: str, reserved: int, actual: int) -> None:
        """Charge `actual` against a shared budget and release the `reserved` amount, in one statement."""
        self._write(
            "UPDATE toolbridge_budgets SET reserved_micros = GREATEST(0, reserved_micros - %s), "
            "spent_micros = spent_micros + %s WHERE budget_id = %s",
            (max(0, reserved), max(0, actual), budget_id),
        )

    def shared(self, budget_id: str) -> dict[str, int] | None:
        """`{"max_micros", "spent_micros", "reserved_micros"}` of a shared budget, or None."""
        with self._conn(write=False) as conn:
            row = conn.execute(
                "SELECT max_micros, spent_micros, reserved_micros FROM toolbridge_budgets WHERE budget_id=%s",
                (budget_id,),
            ).fetchone()
        if row is None:
            return None
        return {"max_micros": int(row[0]), "spent_micros": int(row[1]), "reserved_micros": int(row[2])}

    # -- reading ---------------------------------------------------------------------------------

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs (newest first), without their calls, with outcomes read back."""
        with self._conn(write=False) as conn:
            rows = conn.execute(
                f"SELECT {_RUN_FIELDS} FROM toolbridge_runs ORDER BY started_at DESC LIMIT %s",
                (max(0, limit),),
            ).fetchall()
            return [self._record(conn, row, with_calls=False) for row in rows]

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        """One run with its calls, or `None` when the journal has no such run."""
        with self._conn(write=False) as conn:
            row = conn.execute(
                f"SELECT {_RUN_FIELDS} FROM toolbridge_runs WHERE run_id=%s", (run_id,)
            ).fetchone()
            if row is None:
                return None
            return self._record(conn, row, with_calls=True, active=active)

    def _record(self, conn: Any, row: Sequence[Any], *, with_calls: bool, active: bool = False) -> RunRecord:
        r = dict(zip(_RUN_NAMES, row, strict=True))
        read_calls = with_calls or r["status"] == "running"
        calls: list[CallRecord] = []
        if read_calls:
            for c in conn.execute(
                f"SELECT {_CALL_FIELDS} FROM toolbridge_calls WHERE run_id=%s ORDER BY id", (r["run_id"],)
            ).fetchall():
                d = dict(zip(_CALL_NAMES, c, strict=True))
                calls.append(
                    CallRecord(
                        **{k: d[k] for k in _CALL_NAMES if k != "id"},
                    )
                )
        record = RunRecord(
            run_id=r["run_id"],
            agent=r["agent"],
            profile=r["profile"],
            outcome=r["status"],
            error_code=r["error_code"],
            started_at=r["started_at"],
            ended_at=r["ended_at"],
            cost_micros=int(r["cost_micros"]),
            usage={
                "input_tokens": int(r["input_tokens"]),
                "output_tokens": int(r["output_tokens"]),
                "model_calls": int(r["model_calls"]),
            },
            pid=r["pid"],
            calls=calls,
            principal=r["principal"],
        )
        alive = active or record.outcome != "running" or process_alive(r["pid"], r["host"], r["proc_start"])
        read_back(record, alive=alive)
        if not with_calls:
            record.calls = []
        return record


_RUN_NAMES = (
    "run_id",
    "agent",
    "profile",
    "status",
    "error_code",
    "started_at",
    "ended_at",
    "cost_micros",
    "input_tokens",
    "output_tokens",
    "model_calls",
    "pid",
    "host",
    "proc_start",
    "principal",
)
_CALL_NAMES = (
    "id",
    "run_id",
    "call_id",
    "step",
    "tool_id",
    "tool_version",
    "kind",
    "effects",
    "args_sha256",
    "args_bytes",
    "request_sent",
    "response_received",
    "outcome",
    "error_code",
    "planned_at",
    "sent_at",
    "ended_at",
    "cost_micros",
)
_RUN_FIELDS = ", ".join(_RUN_NAMES)
_CALL_FIELDS = ", ".join(_CALL_NAMES)
