"""Leases, not liveness guesses: how a run left `running` by a dead process gets settled by any host.

A process that serves calls for long (every gateway) holds a **lease** in the journal: one row of
table `leases` (`toolbridge_leases` in PostgreSQL) keyed by its writer (host, pid, process start,
as recorded on each of its runs), with an expiry `LEASE_S` seconds ahead, renewed every third of
that while the process lives (`keep_leases`). When a writer's lease has expired, its runs still
`running` are settled by whoever looks first: every gateway's keeper (each tick), or
`toolbridge runs reap --journal FILE|URL`. Settling is one transaction per run, made only while
the lease is still expired, with the rules of reading back an interrupted run (`_journal`): a
call whose request was never sent becomes `not_started` (`INTERRUPTED`); one sent with effects
`outcome_unknown` (`OUTCOME_UNKNOWN`); one sent without effects `failed` (`INTERRUPTED`); the run
`outcome_unknown` when any of its calls is, else `failed` / `INTERRUPTED`.

A run whose writer never held a lease (an agent, a script, an older toolbridge) is never reaped:
it is read back as before (by its host only). `LEASE_S` is 30 s; the environment variable
`TOOLBRIDGE_LEASE_S` (1 to 3600) changes it for a process.

Batch drivers and Ray actors hold one too (`keep_lease` on their journal): a claimed batch item
is covered by its driver's batch lease until its run starts, then by its run's writer's lease
(`run_writer` reads it with the run's host and pid). A writer on the reader's own machine whose
process is gone (pid dead or reused) is proven dead: its lease may be ended at once (`expire`);
a writer on another machine only by its lease's expiry.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..errors import ToolbridgeError

if TYPE_CHECKING:
    from ._journal import JournalBackend, Writer
    from ._sql_dialect import Dialect

__all__ = [
    "LEASES_TABLE",
    "LeaseStatements",
    "keep_lease",
    "keep_leases",
    "lease_seconds",
    "writer_key",
]

log = logging.getLogger("toolbridge.runtime")

LEASE_S = 30.0
"""How long a lease lasts unless renewed (renewed every third of it)."""
REAP_AT_ONCE = 100
"""Runs one reaping pass settles at most."""

LEASES_TABLE = """
CREATE TABLE IF NOT EXISTS {leases} (
    writer TEXT PRIMARY KEY,
    expires_at {REAL} NOT NULL,
    renewed_at {REAL} NOT NULL
);
CREATE INDEX IF NOT EXISTS {runs}_running ON {runs} (status) WHERE status = 'running';
"""
"""One lease per writer process; the runs still running, found fast."""

_UNKNOWN = "EXISTS (SELECT 1 FROM {calls} c WHERE c.run_id = ? AND c.outcome = 'outcome_unknown')"
_WRITER_OF_RUN = "(r.host || '/' || CAST(r.pid AS TEXT) || '/' || COALESCE(r.proc_start, '-'))"


def lease_seconds() -> float:
    """`LEASE_S`, or `TOOLBRIDGE_LEASE_S` when set to a number from 1 to 3600."""
    raw = os.environ.get("TOOLBRIDGE_LEASE_S")
    if raw is None:
        return LEASE_S
    try:
        value = float(raw)
    except ValueError:
        return LEASE_S
    return value if 1 <= value <= 3600 else LEASE_S


def writer_key(writer: Writer) -> str:
    """The lease key of a writer, as `LeaseStatements` builds it from a run's row."""
    return f"{writer.host}/{writer.pid}/{writer.proc_start or '-'}"


@dataclass(frozen=True)
class LeaseStatements:
    """The lease statements in one dialect."""

    hold: str
    """(writer, expires_at, renewed_at): take or renew."""
    expired_runs: str
    """(now, limit) -> run ids still running under an expired lease."""
    settle_calls: str
    """(ended_at, run_id, now): the run's running calls, while its lease is expired."""
    settle_run: str
    """(run_id, ended_at, run_id, now) -> a row when the run was settled."""
    run_writer: str
    """(run_id) -> (host, pid, proc_start, expires_at or NULL): a run's writer and its lease."""
    expire: str
    """(now, writer, now): end a live lease at once (its writer is proven dead)."""

    @classmethod
    def of(cls, d: Dialect) -> LeaseStatements:
        expired = (
            "EXISTS (SELECT 1 FROM {runs} r JOIN {leases} l ON l.writer = "
            + _WRITER_OF_RUN
            + " WHERE r.run_id = ? AND l.expires_at < ?)"
        )
        return cls(
            hold=d.sql(
                "INSERT INTO {leases} (writer, expires_at, renewed_at) VALUES (?, ?, ?) "
                "ON CONFLICT (writer) DO UPDATE SET expires_at = excluded.expires_at, "
                "renewed_at = excluded.renewed_at"
            ),
            expired_runs=d.sql(
                "SELECT r.run_id FROM {runs} r JOIN {leases} l ON l.writer = "
                + _WRITER_OF_RUN
                + " WHERE r.status = 'running' AND l.expires_at < ? ORDER BY r.started_at LIMIT ?"
            ),
            settle_calls=d.sql(
                "UPDATE {calls} SET "
                "outcome = CASE WHEN request_sent = {FALSE} THEN 'not_started' "
                "WHEN effects <> 'none' THEN 'outcome_unknown' ELSE 'failed' END, "
                "error_code = CASE WHEN request_sent <> {FALSE} AND effects <> 'none' "
                "THEN 'OUTCOME_UNKNOWN' ELSE 'INTERRUPTED' END, ended_at = ? "
                "WHERE run_id = ? AND outcome = 'running' AND " + expired
            ),
            settle_run=d.sql(
                "UPDATE {runs} SET status = CASE WHEN " + _UNKNOWN + " THEN 'outcome_unknown' "
                "ELSE 'failed' END, error_code = CASE WHEN " + _UNKNOWN + " THEN 'OUTCOME_UNKNOWN' "
                "ELSE 'INTERRUPTED' END, ended_at = ? "
                "WHERE run_id = ? AND status = 'running' AND " + expired + " RETURNING status"
            ),
            run_writer=d.sql(
                "SELECT r.host, r.pid, r.proc_start, l.expires_at FROM {runs} r LEFT JOIN {leases} l "
                "ON l.writer = " + _WRITER_OF_RUN + " WHERE r.run_id = ?"
            ),
            expire=d.sql("UPDATE {leases} SET expires_at = ? WHERE writer = ? AND expires_at >= ?"),
        )


def settle_params(run_id: str, now: float) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The parameters of `settle_calls` and `settle_run` for one run."""
    return (now, run_id, run_id, now), (run_id, run_id, now, run_id, run_id, now)


class JournalHolder(Protocol):
    """What `keep_leases` needs of a runtime: its journal."""

    @property
    def journal(self) -> JournalBackend: ...


async def keep_leases(runtime: JournalHolder, *, stop: anyio.Event | None = None) -> None:
    """`keep_lease` on `runtime`'s journal (every gateway runs it)."""
    await keep_lease(runtime.journal, stop=stop)


async def keep_lease(
    journal: JournalBackend, *, lease: float | None = None, stop: anyio.Event | None = None
) -> None:
    """Hold this process's lease in `journal` while it lives, and settle the runs of writers
    whose lease expired (see the module docs). Runs until cancelled (or `stop` is set); a
    journal that cannot be written now is tried again at the next tick (logged once a minute).

    Args:
        lease: the lease's length (default `lease_seconds()`); renewed every third of it.
    """
    if journal.path == ":memory:" or journal.readonly:
        return
    lease = lease_seconds() if lease is None else lease
    key = writer_key(journal.writer)
    warned = -1e9
    while stop is None or not stop.is_set():
        now = time.time()
        try:
            await journal.ahold_lease(key, now + lease)
            settled = await journal.areap_expired(now)
            if settled:
                log.warning("settled %d run(s) of writers whose lease expired", len(settled))
        except (ToolbridgeError, NotImplementedError) as exc:
            if time.monotonic() - warned >= 60:
                warned = time.monotonic()
                log.warning(
                    "the journal lease could not be renewed: %s",
                    exc.code if isinstance(exc, ToolbridgeError) else exc,
                )
        await anyio.sleep(lease / 3)
