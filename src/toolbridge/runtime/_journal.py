"""The evidence journal: one row per run and one per tool call, in SQLite.

Every tool call a governed run plans is recorded with what a person needs to reconcile it later:
the run id, the call id, the tool id and version, the SHA-256 of the canonical JSON of the
arguments (never the arguments themselves), whether the request was sent, whether a response
arrived, the call's outcome and error code, its times and its cost. Nothing a tool, server or
provider said is stored: codes only.

Both profiles use this class. The `ephemeral` profile keeps it in memory (`:memory:`); the
`durable` profile writes a file in WAL mode with `synchronous=FULL` and commits every change at
once. The order of writes is the point: the row saying "request sent" is committed **before** the
request is sent, and "response received" right after the response arrives, so a process killed in
between leaves a record that says exactly that.

A write that fails (disk full, file removed) raises `PolicyError` (`TOOL_FAILED`): the runtime
stops the run instead of making a call it could not record.

Reading back (`Journal.get_run`, used by `Runtime.inspect` and `toolbridge runs show`): a run
still marked `running` whose process is gone (its pid is dead, or was reused by another program)
is read as interrupted. Each of its calls with the request sent and no response becomes
`outcome_unknown` when the tool has effects, `failed` (`INTERRUPTED`) when it has none; the run
becomes `outcome_unknown` when any of those calls had effects, else `failed` / `INTERRUPTED`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, PolicyError

__all__ = ["CallRecord", "Journal", "RunRecord"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    agent TEXT,
    profile TEXT NOT NULL,
    status TEXT NOT NULL,
    error_code TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    host TEXT,
    proc_start TEXT
);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    step INTEGER,
    tool_id TEXT NOT NULL,
    tool_version TEXT,
    kind TEXT NOT NULL,
    effects TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    args_bytes INTEGER NOT NULL DEFAULT 0,
    request_sent INTEGER NOT NULL DEFAULT 0,
    response_received INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL,
    error_code TEXT,
    planned_at REAL NOT NULL,
    sent_at REAL,
    ended_at REAL,
    cost_micros INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS calls_by_run ON calls(run_id, id);
"""


@dataclass
class CallRecord:
    """The evidence of one tool call.

    Attributes:
        run_id: the run.
        call_id: the call's id (the model's, or one the agent made); with `run_id` a stable key
            for reconciling with the remote system.
        step: the model turn that asked for it.
        tool_id: the tool's id (declared id, or the model-facing name of a discovered tool).
        tool_version: the declared version (`None` for discovered tools).
        kind: `declared` (a Python tool), `mcp` (a declared MCP tool) or `discovered`.
        effects: `none`, `read`, `write` or `host`.
        args_sha256: hex SHA-256 of the canonical JSON of the arguments.
        args_bytes: size of that canonical JSON.
        request_sent: the request left toolbridge (for Python tools: `execute` was started).
        response_received: a response came back (valid or not).
        outcome: `not_started`, `running`, `succeeded`, `failed`, `blocked`, `cancelled` or
            `outcome_unknown`.
        error_code: the code when the call did not succeed.
        planned_at / sent_at / ended_at: epoch seconds.
        cost_micros: what the call was charged.
    """

    run_id: str
    call_id: str
    step: int | None
    tool_id: str
    tool_version: str | None
    kind: str
    effects: str
    args_sha256: str
    args_bytes: int
    request_sent: bool
    response_received: bool
    outcome: str
    error_code: str | None
    planned_at: float
    sent_at: float | None
    ended_at: float | None
    cost_micros: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form."""
        return dict(self.__dict__)


@dataclass
class RunRecord:
    """A run and the evidence of its tool calls.

    Attributes:
        run_id: the run.
        agent: a short description of the agent (its model id).
        profile: `ephemeral` or `durable`.
        outcome: the outcome, `running` while it runs (read back as interrupted when its
            process is gone, see the module docs).
        error_code: the code of a non-success outcome.
        started_at / ended_at: epoch seconds.
        cost_micros: what the run spent.
        usage: token usage (`input_tokens`, `output_tokens`) and `model_calls`.
        pid: the process that ran it.
        calls: the evidence, in the order the calls were planned.
        interrupted: True when the outcome was derived because the process died.
    """

    run_id: str
    agent: str | None
    profile: str
    outcome: str
    error_code: str | None
    started_at: float
    ended_at: float | None
    cost_micros: int
    usage: dict[str, int]
    pid: int | None
    calls: list[CallRecord] = field(default_factory=list)
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form."""
        out = {k: v for k, v in self.__dict__.items() if k != "calls"}
        out["calls"] = [c.to_dict() for c in self.calls]
        return out


def _proc_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux), to detect pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _process_alive(pid: int | None, host: str | None, proc_start: str | None) -> bool:
    if pid is None:
        return False
    if host is not None and host != socket.gethostname():
        return True  # another machine: we cannot tell, so never claim it died
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if proc_start is not None:
        now = _proc_start(pid)
        if now is not None and now != proc_start:
            return False  # the pid was reused by another process
    return True


class Journal:
    """An SQLite evidence journal.

    Args:
        path: a file path (durable) or `":memory:"` (ephemeral).
        durable: fsync every commit (`synchronous=FULL`, WAL mode).

    Raises:
        ConfigError: (`ERR_CONFIG`) when the file cannot be opened or is not a journal.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = False) -> None:
        self.path = str(path)
        self.durable = durable
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(f"journal {self.path!r} cannot be opened as an SQLite journal: {exc}") from exc
        self._pid = os.getpid()
        self._host = socket.gethostname()
        self._proc_start = _proc_start(self._pid)

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str]) -> Journal:
        """Open a journal file that must already exist (for reading it back).

        Raises:
            ConfigError: (`ERR_CONFIG`) when there is no such file or it is not a journal.
        """
        if not Path(path).is_file():
            raise ConfigError(f"journal {str(path)!r} does not exist")
        journal = cls(path)
        return journal

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        # isolation_level=None: each statement is its own committed transaction.
        try:
            cur = self._db.execute(sql, params)
        except sqlite3.Error:
            # No evidence, no call: the runtime stops the run rather than act unrecorded.
            raise PolicyError(
                "the evidence journal could not be written", code="TOOL_FAILED", outcome="failed"
            ) from None
        return int(cur.lastrowid or 0)

    # -- writing -------------------------------------------------------------------------------

    def start_run(self, run_id: str, *, agent: str | None, profile: str) -> None:
        """Record a run as started (status `running`)."""
        self._write(
            "INSERT INTO runs (run_id, agent, profile, status, started_at, pid, host, proc_start) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?)",
            (run_id, agent, profile, time.time(), self._pid, self._host, self._proc_start),
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
    ) -> None:
        """Record a run's end."""
        self._write(
            "UPDATE runs SET status=?, error_code=?, ended_at=?, cost_micros=?, input_tokens=?, "
            "output_tokens=?, model_calls=? WHERE run_id=?",
            (outcome, error_code, time.time(), cost_micros, input_tokens, output_tokens, model_calls, run_id),
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
        return self._write(
            "INSERT INTO calls (run_id, call_id, step, tool_id, tool_version, kind, effects, args_sha256, "
            "args_bytes, outcome, planned_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
            (
                run_id,
                call_id,
                step,
                tool_id,
                tool_version,
                kind,
                effects,
                args_sha256,
                args_bytes,
                time.time(),
            ),
        )

    def request_sent(self, row: int) -> None:
        """Record that the request is about to leave (committed before it is sent)."""
        self._write("UPDATE calls SET request_sent=1, sent_at=? WHERE id=?", (time.time(), row))

    def response_received(self, row: int) -> None:
        """Record that a response arrived."""
        self._write("UPDATE calls SET response_received=1 WHERE id=?", (row,))

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        """Record a call's end."""
        self._write(
            "UPDATE calls SET outcome=?, error_code=?, ended_at=?, cost_micros=? WHERE id=?",
            (outcome, error_code, time.time(), cost_micros, row),
        )

    # -- reading -------------------------------------------------------------------------------

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs (newest first), without their calls, with outcomes read back."""
        rows = self._db.execute("SELECT * FROM runs ORDER BY started_at DESC LIMIT ?", (limit,)).fetchall()
        return [self._read_run(row, with_calls=False) for row in rows]

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        """One run with its calls, or `None` when the journal has no such run.

        Args:
            run_id: the run.
            active: the caller knows the run is still in progress (never read it as interrupted).
        """
        row = self._db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            return None
        return self._read_run(row, with_calls=True, active=active)

    def _read_run(self, row: sqlite3.Row, *, with_calls: bool, active: bool = False) -> RunRecord:
        # An ended run's outcome is stored; the calls of a `running` one may decide it (see
        # `_read_back_interrupted`), so they are read for it even when the caller drops them.
        read_calls = with_calls or row["status"] == "running"
        calls = [
            CallRecord(
                run_id=c["run_id"],
                call_id=c["call_id"],
                step=c["step"],
                tool_id=c["tool_id"],
                tool_version=c["tool_version"],
                kind=c["kind"],
                effects=c["effects"],
                args_sha256=c["args_sha256"],
                args_bytes=c["args_bytes"],
                request_sent=bool(c["request_sent"]),
                response_received=bool(c["response_received"]),
                outcome=c["outcome"],
                error_code=c["error_code"],
                planned_at=c["planned_at"],
                sent_at=c["sent_at"],
                ended_at=c["ended_at"],
                cost_micros=c["cost_micros"],
            )
            for c in (
                self._db.execute("SELECT * FROM calls WHERE run_id=? ORDER BY id", (row["run_id"],))
                if read_calls
                else ()
            )
        ]
        record = RunRecord(
            run_id=row["run_id"],
            agent=row["agent"],
            profile=row["profile"],
            outcome=row["status"],
            error_code=row["error_code"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            cost_micros=row["cost_micros"],
            usage={
                "input_tokens": row["input_tokens"],
                "output_tokens": row["output_tokens"],
                "model_calls": row["model_calls"],
            },
            pid=row["pid"],
            calls=calls,
        )
        if (
            record.outcome == "running"
            and not active
            and not _process_alive(row["pid"], row["host"], row["proc_start"])
        ):
            _read_back_interrupted(record)
        if not with_calls:
            record.calls = []
        return record


def _read_back_interrupted(record: RunRecord) -> None:
    """Derive the outcome of a run whose process died (see the module docs)."""
    record.interrupted = True
    unknown = False
    for call in record.calls:
        if call.outcome != "running":
            continue
        if not call.request_sent:
            call.outcome = "not_started"
            call.error_code = "INTERRUPTED"
        elif call.effects != "none":
            # a request with effects was sent: the remote side may have acted (also when a
            # response arrived, since the run died before accepting it)
            call.outcome = "outcome_unknown"
            call.error_code = "OUTCOME_UNKNOWN"
            unknown = True
        else:
            call.outcome = "failed"
            call.error_code = "INTERRUPTED"
    if unknown:
        record.outcome, record.error_code = "outcome_unknown", "OUTCOME_UNKNOWN"
    else:
        record.outcome, record.error_code = "failed", "INTERRUPTED"


def dumps_record(record: RunRecord) -> str:
    """JSON text of a run record (for the CLI)."""
    return json.dumps(record.to_dict(), indent=2, sort_keys=True)
