"""Approvals waiting for a person, as rows beside the journal (same SQLite file or PostgreSQL database).

A call that needs approval from a client that cannot be asked (no elicitation) is a **pending
approval** when the gateway has a `console:`: one row of table `toolbridge_approvals` in the
database of the gateway runtime's journal, so every console over that journal (the gateway's own
`/console/`, every replica's, `toolbridge console JOURNAL`) reads it, and any replica's operator
may decide it. Columns:

- `id` (random, 128 bits, URL-safe), `gateway`, `identity` (the caller), `server`, `tool`,
  `effects`, `arguments` (the call's arguments as JSON, so the operator sees every one in full;
  cleared once the row is decided: the journal keeps no arguments), `args_sha256`;
- `asked_at`, `expires_at` (epoch seconds; `expires_at` is `asked_at + approvalTimeoutMs`);
- `status`: `pending`, then exactly one of `approved`, `denied`, `timed_out`, `cancelled` (the
  call went away first);
- `decided_by` (the operator's name, or `gateway` for a timeout), `decided_at`, `reason`
  (the operator's, optional, at most 500 characters).

Deciding is one conditional update (`... WHERE id = ? AND status = 'pending'`): of two operators
deciding at once, or an operator and the timeout, exactly one wins; the loser is told it was
already decided. The table is created on first use by the writer; readers never create it.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from ..errors import ConfigError, bounded

__all__ = ["APPROVALS_TABLE", "MAX_REASON", "Approval", "ApprovalStore", "Status"]

APPROVALS_TABLE = "toolbridge_approvals"
MAX_REASON = 500
"""An operator's reason is cut to this many characters."""

Status = Literal["pending", "approved", "denied", "timed_out", "cancelled"]

_COLUMNS = (
    "id, gateway, identity, server, tool, effects, arguments, args_sha256, asked_at, expires_at, "
    "status, decided_by, decided_at, reason"
)
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {APPROVALS_TABLE} (
    id TEXT PRIMARY KEY,
    gateway TEXT NOT NULL,
    identity TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    effects TEXT NOT NULL,
    arguments TEXT,
    args_sha256 TEXT NOT NULL,
    asked_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL,
    decided_by TEXT,
    decided_at DOUBLE PRECISION,
    reason TEXT)"""
_INDEX = f"CREATE INDEX IF NOT EXISTS {APPROVALS_TABLE}_status ON {APPROVALS_TABLE} (status, asked_at)"
_STATUSES = frozenset({"pending", "approved", "denied", "timed_out", "cancelled"})
_PG_LOCK_KEY = 0x61707072  # serialises creating the table when replicas start together


@dataclass(frozen=True)
class Approval:
    """One approval row (see the module docstring)."""

    id: str
    gateway: str
    identity: str
    server: str
    tool: str
    effects: str
    arguments: dict[str, object] | None
    args_sha256: str
    asked_at: float
    expires_at: float
    status: Status
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None

    @classmethod
    def of_row(cls, row: Any) -> Approval:
        args: dict[str, object] | None = None
        if isinstance(row[6], str):
            try:
                loaded = json.loads(row[6])
            except ValueError:
                loaded = None
            args = loaded if isinstance(loaded, dict) else None
        status = str(row[10])
        return cls(
            id=str(row[0]),
            gateway=str(row[1]),
            identity=str(row[2]),
            server=str(row[3]),
            tool=str(row[4]),
            effects=str(row[5]),
            arguments=args,
            args_sha256=str(row[7]),
            asked_at=float(row[8]),
            expires_at=float(row[9]),
            status=status if status in _STATUSES else "denied",  # type: ignore[arg-type]
            decided_by=None if row[11] is None else str(row[11]),
            decided_at=None if row[12] is None else float(row[12]),
            reason=None if row[13] is None else str(row[13]),
        )


class ApprovalStore:
    """Approval rows in the journal's database (see the module docstring).

    `ApprovalStore.open(location)`: `location` is the journal's SQLite path (`":memory:"` for a
    journal in memory: rows then live in this process only), or its PostgreSQL URL. With
    `readonly=True` (`toolbridge console JOURNAL`) nothing is ever written or created: SQLite is
    opened through a `mode=ro` URI, PostgreSQL sessions are read-only transactions.
    """

    def __init__(self, location: str, *, readonly: bool = False, timeout_s: float = 10.0) -> None:
        from ..runtime import is_postgres_url

        self.location = location
        self.readonly = readonly
        self.timeout_s = timeout_s
        self._pg = is_postgres_url(location)
        self._db: sqlite3.Connection | None = None
        self._pool: Any = None
        self._ready = readonly
        self._lock = anyio.Lock()
        if self._pg:
            from .._pgpool import AsyncPgPool

            options = "-c statement_timeout=5000"
            if readonly:
                options += " -c default_transaction_read_only=on"
            self._pool = AsyncPgPool(
                location,
                max_size=2,
                timeout_s=timeout_s,
                kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout_s)), "options": options},
            )
        else:
            self._db = _sqlite(location, readonly=readonly)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._pool is not None:
            self._pool.close()

    # ------------------------------------------------------------------------------ plumbing

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self._pg else text

    async def _execute(self, sql: str, params: tuple[object, ...] = (), *, fetch: bool = False) -> Any:
        """One statement; the rows when `fetch`, else how many rows it changed.

        Raises:
            ConfigError: the database cannot be reached or refuses (its message bounded).
        """
        sql = self._sql(sql)
        if self._pg:
            return await self._pg_execute(sql, params, fetch)
        db = self._db
        if db is None:
            raise ConfigError("approvals: the store is closed")
        async with self._lock:
            try:
                cur = db.execute(sql, params)
                if fetch:
                    return cur.fetchall()
                db.commit()
                return cur.rowcount
            except sqlite3.Error as exc:
                if fetch and "no such table" in str(exc):
                    return []
                raise ConfigError(f"approvals: {bounded(str(exc), 200)}") from None

    async def _pg_execute(self, sql: str, params: tuple[object, ...], fetch: bool) -> Any:
        import psycopg

        from .._pgpool import PoolUnavailable

        try:
            with anyio.fail_after(2 * self.timeout_s):
                async with self._pool.connection() as conn:
                    cur = await conn.execute(sql, params)
                    return await cur.fetchall() if fetch else cur.rowcount
        except psycopg.errors.UndefinedTable:
            if fetch:
                return []
            raise ConfigError("approvals: the table is missing") from None
        except TimeoutError:
            raise ConfigError(f"approvals: no answer within {2 * self.timeout_s:g} s") from None
        except PoolUnavailable as exc:
            raise ConfigError(f"approvals: {bounded(str(exc), 200)}") from None
        except psycopg.Error as exc:
            raise ConfigError(f"approvals: {bounded(type(exc).__name__, 100)}") from None

    async def setup(self) -> None:
        """Create the table when missing (the writer's first use; never for a reader)."""
        if self._ready:
            return
        if self._pg:
            import psycopg

            from .._pgpool import PoolUnavailable

            try:
                with anyio.fail_after(2 * self.timeout_s):
                    async with self._pool.connection() as conn, conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
                        await conn.execute(_SCHEMA)
                        await conn.execute(_INDEX)
            except (TimeoutError, PoolUnavailable, psycopg.Error) as exc:
                raise ConfigError(f"approvals: the table cannot be created ({type(exc).__name__})") from None
        else:
            await self._execute(_SCHEMA)
            await self._execute(_INDEX)
        self._ready = True

    # ------------------------------------------------------------------------------ writing

    async def ask(
        self,
        *,
        gateway: str,
        identity: str,
        server: str,
        tool: str,
        effects: str,
        arguments: Mapping[str, object],
        args_sha256: str,
        timeout_s: float,
    ) -> Approval:
        """A new pending approval (its row written before anyone is told)."""
        await self.setup()
        now = time.time()
        row = (
            secrets.token_urlsafe(16),
            gateway,
            identity,
            server,
            tool,
            effects,
            json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str),
            args_sha256,
            now,
            now + timeout_s,
            "pending",
        )
        await self._execute(
            f"INSERT INTO {APPROVALS_TABLE} (id, gateway, identity, server, tool, effects, arguments, "
            "args_sha256, asked_at, expires_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        return Approval.of_row((*row, None, None, None))

    async def decide(self, approval_id: str, *, by: str, approve: bool, reason: str | None = None) -> bool:
        """Decide a pending approval once: True when this decision is the one that counts, False
        when it was already decided (or timed out, or never existed)."""
        return await self._settle(approval_id, "approved" if approve else "denied", by, reason)

    async def expire(self, approval_id: str) -> bool:
        """Mark a pending approval `timed_out` (False: someone decided it first)."""
        return await self._settle(approval_id, "timed_out", "gateway", None)

    async def withdraw(self, approval_id: str) -> bool:
        """Mark a pending approval `cancelled` (its call went away before anyone decided)."""
        return await self._settle(approval_id, "cancelled", "gateway", None)

    async def _settle(self, approval_id: str, status: Status, by: str, reason: str | None) -> bool:
        if self.readonly:
            raise ConfigError("approvals: this console only reads")
        await self.setup()
        text = (reason or "").strip()[:MAX_REASON] or None
        changed = await self._execute(
            f"UPDATE {APPROVALS_TABLE} SET status = ?, decided_by = ?, decided_at = ?, reason = ?, "
            "arguments = NULL WHERE id = ? AND status = 'pending'",
            (status, by, time.time(), text, approval_id),
        )
        return bool(changed == 1)

    # ------------------------------------------------------------------------------ reading

    async def get(self, approval_id: str) -> Approval | None:
        rows = await self._execute(
            f"SELECT {_COLUMNS} FROM {APPROVALS_TABLE} WHERE id = ?", (approval_id,), fetch=True
        )
        return Approval.of_row(rows[0]) if rows else None

    async def pending(self, limit: int = 200) -> list[Approval]:
        """Pending approvals, oldest first."""
        rows = await self._execute(
            f"SELECT {_COLUMNS} FROM {APPROVALS_TABLE} WHERE status = 'pending' ORDER BY asked_at LIMIT ?",
            (limit,),
            fetch=True,
        )
        return [Approval.of_row(r) for r in rows]

    async def recent(self, limit: int = 50) -> list[Approval]:
        """Decided approvals, newest first."""
        rows = await self._execute(
            f"SELECT {_COLUMNS} FROM {APPROVALS_TABLE} WHERE status <> 'pending' "
            "ORDER BY decided_at DESC LIMIT ?",
            (limit,),
            fetch=True,
        )
        return [Approval.of_row(r) for r in rows]


def _sqlite(location: str, *, readonly: bool) -> sqlite3.Connection:
    try:
        if readonly:
            from pathlib import Path

            uri = Path(location).resolve().as_uri() + "?mode=ro"
            db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        else:
            db = sqlite3.connect(location, check_same_thread=False)
            db.execute("PRAGMA busy_timeout = 5000")
    except sqlite3.Error as exc:
        raise ConfigError(f"approvals: {location!r} cannot be opened ({bounded(str(exc), 200)})") from None
    return db
