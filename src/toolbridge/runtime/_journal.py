"""The evidence journal: one record per run and one per tool call, behind a small backend interface.

Every tool call a governed run plans is recorded with what a person needs to reconcile it later:
the run id, the call id, the tool id and version, the SHA-256 of the canonical JSON of the
arguments (never the arguments themselves), whether the request was sent, whether a response
arrived, the call's outcome and error code, its times and its cost. Nothing a tool, server or
provider said is stored: codes only.

Backends (each in its own module):

- `MemoryJournal` (`_journal_memory`): the `ephemeral` profile; plain dicts, nothing survives
  the process.
- `Journal` / `SqliteJournal` (`_journal_sqlite`): the `durable` profile; an SQLite file in WAL
  mode with `synchronous=FULL`, every change committed at once. `Journal.open_existing(path)`
  opens one **read-only** for readers (`Runtime.inspect` of another process's file, `toolbridge
  runs`): never created, migrated or switched to WAL.

## The backend interface (`JournalBackend`)

A backend (a PostgreSQL one, say) subclasses `JournalBackend` and implements:

- `path`: a label for messages (a file path, a DSN without its password, `:memory:`).
- `start_run(run_id, *, agent, profile, principal)`: insert a run with status `running`, with
  the writer's pid, host and process start time (`self.writer` holds them).
- `record_plan(plan: CallPlan) -> int`: insert a call with outcome `running`, nothing sent;
  return a handle (`row`) unique in this backend. `CallPlan` holds what is recorded of a planned
  call, by name: run and call ids, step, tool id and version, kind, effects, and the digest and
  size of the arguments. (`plan_call(run_id, call_id, *, step, tool_id, ...)`, the same with the
  fields as keywords, is the base class's: a backend implements `record_plan` only.)
- `request_sent(row)`: set `request_sent` and `sent_at`, **durably before it returns**: the
  request leaves only after this.
- `response_received(row)`: set `response_received`.
- `end_call(row, *, outcome, error_code, cost_micros)`: set the call's end.
- `end_run(run_id, *, outcome, error_code, cost_micros, input_tokens, output_tokens,
  model_calls, calls=())`: set the run's end **and**, in the same transaction, each `CallEnd`
  of `calls` (call ends an earlier write failed to record): all or nothing.
- `get_run(run_id, *, active=False) -> RunRecord | None`: one run with its calls in planning
  order, passed through `read_back(record, alive=...)`.
- `list_runs(limit) -> list[RunRecord]`: newest first, without calls, read back the same way.
- `close()`: release everything.

## The async interface

The same writes, to be awaited on the event loop: `astart_run` (returns False, writing
nothing, when the journal already holds the run id), `arecord_plan`, `arequest_sent`,
`aresponse_received`, `aend_call`, `aend_run`. Their defaults call the sync methods (cheap for
the memory and SQLite backends). A backend whose writes are network round trips
(`PostgresJournal`) sets `is_async = True` and implements them on the loop. The runtime writes
through one `JournalPort` (`_journal_port`), whose methods are awaited the same way for every
backend: it awaits the `a*` methods of an `is_async` backend and calls the plain sync methods of
every other one (no second coroutine under the port on the in-memory path), and shields a
write made while a call or run is being cancelled (a call's end, the run's end) from that
cancellation, bounded by the backend's own timeouts.

Every write either succeeds completely or raises `JournalWriteError` (a `PolicyError`, code
`JOURNAL_UNAVAILABLE`) and leaves the stored state as it was before the write; the runtime
relies on that to keep its result and the journal in agreement (see `_runtime`). Reads raise
`ConfigError`.

## Reading back

A run still marked `running` whose writer is gone (its pid is dead, or was reused by another
program) is read as interrupted. Each of its calls with the request sent and no recorded end
becomes `outcome_unknown` when the tool has effects, `failed` (`INTERRUPTED`) when it has none;
the run becomes `outcome_unknown` when any of those calls had effects, else `failed` /
`INTERRUPTED`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import PolicyError

__all__ = [
    "CallEnd",
    "CallPlan",
    "CallRecord",
    "JournalBackend",
    "JournalWriteError",
    "QuotaUsage",
    "RunRecord",
    "Writer",
    "dumps_record",
    "read_back",
]

JOURNAL_UNAVAILABLE = "JOURNAL_UNAVAILABLE"


class JournalWriteError(PolicyError):
    """A journal write failed (locked past the busy timeout, disk full, file gone).

    Nothing of that write was stored. The runtime never sends a request it could not record.
    """

    def __init__(self, path: str) -> None:
        super().__init__(
            "the evidence journal could not be written", code=JOURNAL_UNAVAILABLE, outcome="failed"
        )
        self.details["journal"] = path


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
        kind: `declared` (a Python tool), `mcp` (a declared MCP tool), `discovered`, or `unknown`
            (a refused call to no known tool: `tool_id` is the name asked for).
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
        agent: a short description of the agent (its model id), or of the session.
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
        principal: who the run acted for (`runtime.session(principal=...)`), if given.
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
    principal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form."""
        out = {k: v for k, v in self.__dict__.items() if k != "calls"}
        out["calls"] = [c.to_dict() for c in self.calls]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CallPlan:
    """One planned tool call as the journal records it: never its arguments, only the SHA-256
    of their canonical JSON and its size."""

    run_id: str
    call_id: str
    step: int | None
    tool_id: str
    tool_version: str | None
    kind: str
    """`declared`, `discovered`, `operation` or `unknown` (a call to no known tool)."""
    effects: str
    args_sha256: str
    args_bytes: int


@dataclass(frozen=True)
class CallEnd:
    """The end of one call, written with the run's end when its own write had failed."""

    row: int
    outcome: str
    error_code: str | None
    cost_micros: int


def _proc_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux), to detect pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class QuotaUsage:
    """A principal's counters in one window."""

    calls: int
    spent_micros: int
    reserved_micros: int


@dataclass(frozen=True)
class Writer:
    """The process that writes a journal: recorded with each run to tell later if it died."""

    pid: int
    host: str
    proc_start: str | None

    @classmethod
    def current(cls) -> Writer:
        pid = os.getpid()
        return cls(pid, socket.gethostname(), _proc_start(pid))


def process_alive(pid: int | None, host: str | None, proc_start: str | None) -> bool:
    """True unless the process that wrote a run is known to be gone."""
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


class JournalBackend:
    """Where the evidence goes; see the module docs for the contract of each method."""

    path: str = ""
    writer: Writer
    readonly: bool = False
    """True for a backend opened only to read (a SQLite file of another process)."""
    is_async: ClassVar[bool] = False
    """True when the `a*` methods are the backend's own (its writes wait on the network)."""

    def start_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> None:
        raise NotImplementedError

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
        raise NotImplementedError

    def record_plan(self, plan: CallPlan) -> int:
        raise NotImplementedError

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
        """`record_plan` with the plan's fields as keywords (for tools and tests that write rows)."""
        return self.record_plan(
            CallPlan(
                run_id=run_id,
                call_id=call_id,
                step=step,
                tool_id=tool_id,
                tool_version=tool_version,
                kind=kind,
                effects=effects,
                args_sha256=args_sha256,
                args_bytes=args_bytes,
            )
        )

    def request_sent(self, row: int) -> None:
        raise NotImplementedError

    def response_received(self, row: int) -> None:
        raise NotImplementedError

    def end_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        raise NotImplementedError

    def get_run(self, run_id: str, *, active: bool = False) -> RunRecord | None:
        raise NotImplementedError

    def list_runs(self, limit: int = 100) -> list[RunRecord]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- the async interface (see the module docs); defaults: the sync methods ------------------

    async def astart_run(
        self, run_id: str, *, agent: str | None, profile: str, principal: str | None = None
    ) -> bool:
        from ..errors import ConfigError

        try:
            if self.get_run(run_id) is not None:
                return False
        except ConfigError:
            pass  # unreadable now: the insert tells (a duplicate id fails it too)
        self.start_run(run_id, agent=agent, profile=profile, principal=principal)
        return True

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
        self.end_run(
            run_id,
            outcome=outcome,
            error_code=error_code,
            cost_micros=cost_micros,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model_calls=model_calls,
            calls=calls,
        )

    async def arecord_plan(self, plan: CallPlan) -> int:
        return self.record_plan(plan)

    async def arequest_sent(self, row: int) -> None:
        self.request_sent(row)

    async def aresponse_received(self, row: int) -> None:
        self.response_received(row)

    async def aend_call(self, row: int, *, outcome: str, error_code: str | None, cost_micros: int) -> None:
        self.end_call(row, outcome=outcome, error_code=error_code, cost_micros=cost_micros)

    # -- quotas per principal (`_budgets`): one atomic statement each ----------------------------

    def reserve_quota(self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int) -> bool:
        """Count one call and reserve `ceiling` in `principal`'s window `key` when both still fit
        under `max_calls` and `max_micros`; False (nothing changed) otherwise."""
        raise NotImplementedError

    def settle_quota(self, principal: str, key: str, reserved: int, actual: int, calls_back: int) -> None:
        """Charge `actual`, release `reserved`, give `calls_back` calls back."""
        raise NotImplementedError

    def quota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        """`principal`'s counters in window `key`, or None."""
        raise NotImplementedError

    async def areserve_quota(
        self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int
    ) -> bool:
        return self.reserve_quota(principal, key, ceiling, max_calls, max_micros)

    async def asettle_quota(
        self, principal: str, key: str, reserved: int, actual: int, calls_back: int
    ) -> None:
        self.settle_quota(principal, key, reserved, actual, calls_back)

    async def aquota_usage(self, principal: str, key: str) -> QuotaUsage | None:
        return self.quota_usage(principal, key)

    # -- leases (`_leases`) -----------------------------------------------------------------------

    def hold_lease(self, writer: str, until: float) -> None:
        """Take or renew the lease of `writer` (a `_leases.writer_key`) until `until`."""
        raise NotImplementedError

    def reap_expired(self, now: float, limit: int = 100) -> list[str]:
        """Settle the runs still running under a lease expired at `now` (each in one
        transaction); return their ids."""
        raise NotImplementedError

    async def ahold_lease(self, writer: str, until: float) -> None:
        self.hold_lease(writer, until)

    async def areap_expired(self, now: float, limit: int = 100) -> list[str]:
        return self.reap_expired(now, limit)


def read_back(record: RunRecord, *, alive: bool) -> RunRecord:
    """`record` as it must be read: derived from its calls when its writer died mid-run."""
    if record.outcome == "running" and not alive:
        _read_back_interrupted(record)
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
