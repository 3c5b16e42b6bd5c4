"""The journal's SQL, written once for SQLite and PostgreSQL: tables, statements, records.

Every table and statement is a template: `{runs}`, `{calls}`, `{budgets}`, `{batch_items}`,
`{batches}`, `{quotas}` (`_budgets`), `{leases}` (`_leases`) are the dialect's table names
(PostgreSQL prefixes them `toolbridge_`, as its tables share a database with others), `{REAL}`,
`{BIGINT}`, `{BOOL}`, `{ID}`, `{TRUE}`, `{FALSE}`, `{RETURNING_ID}` the dialect's types and
idioms, and `?` the parameter placeholder. `Dialect.sql` fills them in. The SQLite journal and
batch store create what is missing (`IF NOT EXISTS`) each time they open a file; PostgreSQL
applies `MIGRATIONS` in order, once each, recorded in `toolbridge_schema`.

**Changing the schema.** A shipped migration is never edited (databases already hold it): a
change appends a template to `MIGRATIONS` (for example `ALTER TABLE {runs} ADD COLUMN ...`),
which PostgreSQL applies as the next version; the SQLite journal adds a missing column when it
opens a file (as it does for `principal`). The statements and the record builder below are then
the one place that reads or writes the new column for both databases.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..redact import redact_value
from ._budgets import QUOTAS_TABLE
from ._journal import CallEnd, CallPlan, CallRecord, RunRecord, Writer, process_alive, read_back
from ._leases import LEASES_TABLE
from ._sql_dialect import POSTGRES, SQLITE, Dialect

__all__ = [
    "MIGRATIONS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Statements",
    "plan_call_params",
    "run_record",
    "start_run_params",
]


# -- tables ----------------------------------------------------------------------------------------

JOURNAL_TABLES = """
CREATE TABLE IF NOT EXISTS {runs} (
    run_id TEXT PRIMARY KEY,
    agent TEXT,
    profile TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    started_at {REAL} NOT NULL,
    ended_at {REAL},
    cost_micros {BIGINT} NOT NULL DEFAULT 0,
    input_tokens {BIGINT} NOT NULL DEFAULT 0,
    output_tokens {BIGINT} NOT NULL DEFAULT 0,
    model_calls {BIGINT} NOT NULL DEFAULT 0,
    pid INTEGER,
    host TEXT,
    proc_start TEXT,
    principal TEXT
);
CREATE INDEX IF NOT EXISTS {runs}_by_start ON {runs} (started_at DESC);
CREATE TABLE IF NOT EXISTS {calls} (
    id {ID},
    run_id TEXT NOT NULL REFERENCES {runs} (run_id),
    call_id TEXT NOT NULL,
    step INTEGER,
    tool_id TEXT NOT NULL,
    tool_version TEXT,
    kind TEXT NOT NULL,
    effects TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    args_bytes {BIGINT} NOT NULL DEFAULT 0,
    request_sent {BOOL} NOT NULL DEFAULT {FALSE},
    response_received {BOOL} NOT NULL DEFAULT {FALSE},
    outcome TEXT NOT NULL,
    error_code TEXT,
    planned_at {REAL} NOT NULL,
    sent_at {REAL},
    ended_at {REAL},
    cost_micros {BIGINT} NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS {calls}_by_run ON {calls} (run_id, id);
"""
"""Runs and the evidence of their calls."""

BUDGETS_TABLE = """
CREATE TABLE IF NOT EXISTS {budgets} (
    budget_id TEXT PRIMARY KEY,
    max_micros {BIGINT} NOT NULL CHECK (max_micros >= 0),
    spent_micros {BIGINT} NOT NULL DEFAULT 0,
    reserved_micros {BIGINT} NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0)
);
"""
"""Shared budgets (a batch's, a gateway's): reserved and settled in the database."""

BATCH_ITEMS_TABLE = """
CREATE TABLE IF NOT EXISTS {batch_items} (
    batch_id TEXT NOT NULL,
    item_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    input_sha256 TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    reserved_micros {BIGINT} NOT NULL DEFAULT 0,
    result TEXT,
    updated_at {REAL} NOT NULL,
    PRIMARY KEY (batch_id, item_id)
);
CREATE INDEX IF NOT EXISTS {batch_items}_by_state ON {batch_items} (batch_id, state);
"""
"""The items of resumable batches (`toolbridge.batch`)."""

BATCHES_TABLE = """
CREATE TABLE IF NOT EXISTS {batches} (
    batch_id TEXT PRIMARY KEY,
    inputs_sha256 TEXT NOT NULL,
    created_at {REAL} NOT NULL,
    owner TEXT,
    owner_host TEXT,
    owner_pid INTEGER,
    owner_start TEXT,
    lease_until {REAL}
);
CREATE INDEX IF NOT EXISTS {batches}_by_inputs ON {batches} (inputs_sha256);
"""
"""Resumable batches (`toolbridge.batch`): what inputs each started with, and the lease of the
driver running it (`owner`, its host, pid and process start, the lease's expiry)."""

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, JOURNAL_TABLES + BUDGETS_TABLE),
    (2, BATCH_ITEMS_TABLE),
    (3, BATCHES_TABLE),
    (4, QUOTAS_TABLE),
    (5, LEASES_TABLE),
)
"""Schema versions in order: (version, template). Never edit one that shipped; append."""

# -- statements ------------------------------------------------------------------------------------

RUN_NAMES = (
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
CALL_NAMES = (
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
_RUN_FIELDS = ", ".join(RUN_NAMES)
_CALL_FIELDS = ", ".join(CALL_NAMES)
_INSERT_RUN = (
    "INSERT INTO {runs} (run_id, agent, profile, status, started_at, pid, host, proc_start, principal) "
    "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Statements:
    """Every statement of the journal and of shared budgets, in one dialect."""

    start_run: str
    start_new_run: str  # returns a row only when the run id was not there yet
    end_run: str
    plan_call: str
    request_sent: str
    response_received: str
    end_call: str
    get_run: str
    get_run_without_principal: str  # an SQLite journal written before principals
    list_runs: str
    list_runs_without_principal: str
    calls_of_run: str
    open_budget: str
    reserve_budget: str  # returns a row only when the amount fitted (and was reserved)
    settle_budget: str
    get_budget: str

    @classmethod
    def of(cls, d: Dialect) -> Statements:
        old_fields = _RUN_FIELDS.replace("principal", "NULL AS principal")
        return cls(
            start_run=d.sql(_INSERT_RUN),
            start_new_run=d.sql(_INSERT_RUN + " ON CONFLICT (run_id) DO NOTHING RETURNING 1"),
            end_run=d.sql(
                "UPDATE {runs} SET status=?, error_code=?, ended_at=?, cost_micros=?, input_tokens=?, "
                "output_tokens=?, model_calls=? WHERE run_id=?"
            ),
            plan_call=d.sql(
                "INSERT INTO {calls} (run_id, call_id, step, tool_id, tool_version, kind, effects, "
                "args_sha256, args_bytes, outcome, planned_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?){RETURNING_ID}"
            ),
            request_sent=d.sql("UPDATE {calls} SET request_sent={TRUE}, sent_at=? WHERE id=?"),
            response_received=d.sql("UPDATE {calls} SET response_received={TRUE} WHERE id=?"),
            end_call=d.sql(
                "UPDATE {calls} SET outcome=?, error_code=?, ended_at=?, cost_micros=? WHERE id=?"
            ),
            get_run=d.sql(f"SELECT {_RUN_FIELDS} FROM {{runs}} WHERE run_id=?"),
            get_run_without_principal=d.sql(f"SELECT {old_fields} FROM {{runs}} WHERE run_id=?"),
            list_runs=d.sql(f"SELECT {_RUN_FIELDS} FROM {{runs}} ORDER BY started_at DESC LIMIT ?"),
            list_runs_without_principal=d.sql(
                f"SELECT {old_fields} FROM {{runs}} ORDER BY started_at DESC LIMIT ?"
            ),
            calls_of_run=d.sql(f"SELECT {_CALL_FIELDS} FROM {{calls}} WHERE run_id=? ORDER BY id"),
            open_budget=d.sql(
                "INSERT INTO {budgets} (budget_id, max_micros) VALUES (?, ?) "
                "ON CONFLICT (budget_id) DO UPDATE SET max_micros = excluded.max_micros"
            ),
            reserve_budget=d.sql(
                "UPDATE {budgets} SET reserved_micros = reserved_micros + ? "
                "WHERE budget_id = ? AND max_micros - spent_micros - reserved_micros >= ? RETURNING 1"
            ),
            settle_budget=d.sql(
                "UPDATE {budgets} SET reserved_micros = CASE WHEN reserved_micros > ? "
                "THEN reserved_micros - ? ELSE 0 END, spent_micros = spent_micros + ? WHERE budget_id = ?"
            ),
            get_budget=d.sql(
                "SELECT max_micros, spent_micros, reserved_micros FROM {budgets} WHERE budget_id = ?"
            ),
        )


# -- parameters and records ------------------------------------------------------------------------


def start_run_params(
    writer: Writer, run_id: str, agent: str | None, profile: str, principal: str | None
) -> tuple[Any, ...]:
    """The parameters of `start_run` (free text scrubbed of registered secrets)."""
    return (
        run_id,
        redact_value(agent),
        profile,
        time.time(),
        writer.pid,
        writer.host,
        writer.proc_start,
        redact_value(principal),
    )


def plan_call_params(plan: CallPlan) -> tuple[Any, ...]:
    """The parameters of the `plan_call` statement (names are free text: registered secrets never stored)."""
    return (
        plan.run_id,
        plan.call_id,
        plan.step,
        redact_value(plan.tool_id),
        redact_value(plan.tool_version),
        plan.kind,
        plan.effects,
        plan.args_sha256,
        plan.args_bytes,
        time.time(),
    )


def end_run_writes(
    sql: Statements,
    run_id: str,
    outcome: str,
    error_code: str | None,
    cost_micros: int,
    usage: tuple[int, int, int],
    calls: Sequence[CallEnd],
) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements of a run's end, to run in one transaction: each call end, then the run's.

    `usage` is (input tokens, output tokens, model calls).
    """
    now = time.time()
    writes: list[tuple[str, tuple[Any, ...]]] = [
        (sql.end_call, (e.outcome, e.error_code, now, e.cost_micros, e.row)) for e in calls
    ]
    writes.append((sql.end_run, (outcome, error_code, now, cost_micros, *usage, run_id)))
    return writes


def budget_dict(row: Sequence[Any] | None) -> dict[str, int] | None:
    if row is None:
        return None
    return {"max_micros": int(row[0]), "spent_micros": int(row[1]), "reserved_micros": int(row[2])}


def run_record(
    row: Sequence[Any], calls: Iterable[Sequence[Any]], *, with_calls: bool, active: bool = False
) -> RunRecord:
    """A run read back (`get_run`/`list_runs` fields in order) with its calls (`calls_of_run`).

    `calls` are read only when they are kept or the run is still `running` (they may decide its
    outcome: `read_back`); the caller passes `()` otherwise.
    """
    r = dict(zip(RUN_NAMES, row, strict=True))
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
        calls=[_call_record(c) for c in calls],
        principal=r["principal"],
    )
    alive = active or record.outcome != "running" or process_alive(r["pid"], r["host"], r["proc_start"])
    read_back(record, alive=alive)
    if not with_calls:
        record.calls = []
    return record


def _call_record(row: Sequence[Any]) -> CallRecord:
    c = dict(zip(CALL_NAMES, row, strict=True))
    c["request_sent"] = bool(c["request_sent"])
    c["response_received"] = bool(c["response_received"])
    c["args_bytes"] = int(c["args_bytes"])
    c["cost_micros"] = int(c["cost_micros"])
    return CallRecord(**c)


def needs_calls(row: Sequence[Any], *, with_calls: bool) -> bool:
    """Whether `run_record` needs the run's calls: kept, or the run is still `running`."""
    return with_calls or row[RUN_NAMES.index("status")] == "running"
