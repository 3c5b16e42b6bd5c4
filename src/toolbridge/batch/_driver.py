"""The batch driver: inputs in, one output line per item out, resumable, on one process or on Ray.

See `toolbridge.batch` for the rules; this module holds `run_batch` and `batch_status`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import stat
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..errors import ConfigError
from ..runtime import Journal, PostgresJournal, is_postgres_url
from ..runtime.journal import JournalBackend, keep_lease, lease_seconds, read_back, writer_key
from ._files import OutFile, check_out_path, same_file
from ._inputs import DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_LINES, InputError, read_inputs
from ._lease import hold, unknown_batch, with_heartbeat
from ._store import BatchStore, Item, StoredItem, open_store

__all__ = [
    "BatchSummary",
    "WorkerLost",
    "batch_status",
    "camel_usage",
    "check_batch_id",
    "open_journal",
    "run_batch",
]

_log = logging.getLogger("toolbridge.batch")

LEASE_S = 30.0
"""How long a driver's lease on its batch, and a worker's lease in the journal, last without a
heartbeat (renewed every third of it), unless `TOOLBRIDGE_LEASE_S` says otherwise."""
DEFAULT_CONCURRENCY = 8
"""Runs in flight at once (per actor in Ray mode) unless `--concurrency` says otherwise."""
_BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A batch id: 1 to 64 ASCII letters, digits, `_`, `.`, `-`, starting with a letter or digit (whole match)."""


def check_batch_id(batch_id: object) -> str:
    """`batch_id` when it is a valid batch id.

    Raises:
        ConfigError: (`ERR_BATCH_CONFIG`) anything else (a newline, a control character, too long).
    """
    if not isinstance(batch_id, str) or not _BATCH_ID.fullmatch(batch_id):
        raise ConfigError(
            "--batch-id: 1 to 64 ASCII letters, digits, '_', '.' or '-', starting with a letter or digit",
            code="ERR_BATCH_CONFIG",
        )
    return batch_id


class WorkerLost(Exception):
    """The process running an item died (a Ray actor was killed): its run's writer is gone.

    `dead=False`: the worker could not be reached, and may still be running the item.
    """

    def __init__(self, message: str, *, dead: bool = True) -> None:
        super().__init__(message)
        self.dead = dead


@dataclass
class BatchSummary:
    """What a batch did (the `--json` summary).

    Attributes:
        batch_id: the batch (rerun with it to resume).
        items: valid input items; input_errors: lines that could not run.
        succeeded / failed / unknown / skipped / in_doubt: items by state after this run
            (`failed` counts every ended item that did not succeed; `skipped`: no room in the
            batch budget; `in_doubt`: claimed by a driver whose lease is live, or by a run whose
            process is alive on this machine: it may really still be running; `interrupted`:
            claimed by a driver that is gone (`batch status` only): the next resume decides them).
        ran: runs started by this invocation; elapsed_s and runs_per_s for them.
        cost_micros: what the batch's ended runs cost.
        unknown_items: `{id, line, runId}` of every `outcome_unknown` item, for reconciliation.
        in_doubt_items: the same for items whose run may still be running.
        interrupted_items: the same for items of a stopped driver, not decided yet.
        pending: items not run yet (a worker failed unexpectedly): the next resume runs them.
        out / journal: where the output and the evidence are (the journal without a password).
        mode: `local` or `ray`.
    """

    batch_id: str
    items: int = 0
    input_errors: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    skipped: int = 0
    in_doubt: int = 0
    interrupted: int = 0
    pending: int = 0
    ran: int = 0
    elapsed_s: float = 0.0
    runs_per_s: float = 0.0
    cost_micros: int = 0
    unknown_items: list[dict[str, object]] = field(default_factory=list)
    in_doubt_items: list[dict[str, object]] = field(default_factory=list)
    interrupted_items: list[dict[str, object]] = field(default_factory=list)
    out: str = ""
    journal: str = ""
    mode: str = "local"

    def to_dict(self) -> dict[str, object]:
        """camelCase keys, as the CLI's `--json`."""
        return {
            "batchId": self.batch_id,
            "items": self.items,
            "inputErrors": self.input_errors,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "unknown": self.unknown,
            "skipped": self.skipped,
            "inDoubt": self.in_doubt,
            "interrupted": self.interrupted,
            "pending": self.pending,
            "ran": self.ran,
            "elapsedS": round(self.elapsed_s, 3),
            "runsPerS": round(self.runs_per_s, 2),
            "costMicros": self.cost_micros,
            "unknownItems": self.unknown_items,
            "inDoubtItems": self.in_doubt_items,
            "interruptedItems": self.interrupted_items,
            "out": self.out,
            "journal": self.journal,
            "mode": self.mode,
        }


def open_journal(spec: str, *, reader: bool = False) -> JournalBackend:
    """The batch journal: a PostgreSQL URL or an SQLite file (a writer migrates/creates it)."""
    if is_postgres_url(spec):
        return PostgresJournal.open_existing(spec) if reader else PostgresJournal(spec)
    return Journal.open_existing(spec) if reader else Journal(spec, durable=True)


def _journal_spec(manifest: Any, journal: str | os.PathLike[str] | None, out: Path) -> str:
    if journal is not None:
        return str(journal)
    doc = manifest.runtime_doc
    if doc is not None and doc.profile == "durable" and doc.journal is not None:
        return str(manifest.runtime_journal())
    return str(out) + ".journal.sqlite"


def _check_journal_path(spec: str, out: Path) -> None:
    """An SQLite journal is a regular file or a new path, and never the output file."""
    if is_postgres_url(spec):
        return
    if same_file(spec, out):
        raise ConfigError(f"--journal {spec} is the --out file", code="ERR_BATCH_CONFIG")
    try:
        mode = os.stat(spec).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(
            f"--journal {spec} cannot be checked: {exc.strerror}", code="ERR_BATCH_CONFIG"
        ) from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"--journal {spec} is not a regular file", code="ERR_BATCH_CONFIG")


def _run_id(batch_id: str, key: str, attempt: int) -> str:
    return f"{batch_id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}-{attempt}"


def reconcile(
    store: BatchStore, journal: JournalBackend, batch_id: str, stored: StoredItem, *, writer_dead: bool
) -> str:
    """Decide a claimed item whose run did not report back: `pending`, `ended`, `unknown` or `claimed`.

    A run still running is decided by its writer's lease (`runtime._leases`): while the lease is
    live the item stays `claimed` (its run may really still be running, on any machine); once it
    expired (or its writer is proven dead on this machine, which ends the lease at once), the run
    is settled in the journal as every reaper settles it, then decided. A writer that never held a
    lease (an older toolbridge) is judged as before: by its pid on its own machine, or
    `writer_dead` (the caller saw its process die).

    A run never started, or interrupted (or cancelled) before any request with effects left, is
    run again. A run that sent a request with effects is never run again: interrupted with that
    call in flight it is `outcome_unknown`; interrupted after it ended it keeps the read-back
    outcome (`failed` / `INTERRUPTED`); a run that ended (the driver died before storing its
    line) keeps its outcome. Such lines are marked `recovered` and have no text.
    """
    record = journal.get_run(stored.run_id) if stored.run_id else None
    if record is None:
        store.release(batch_id, stored.key)
        return "pending"
    died = record.interrupted
    if record.outcome == "running" or record.interrupted:
        writer = store.run_writer(record.run_id)
        if writer is not None and writer.lease_until is not None:
            now = time.time()
            if writer.lease_until >= now and writer.proven_dead():
                store.end_lease(writer)
            if writer.lease_until >= now:
                return "claimed"  # its writer's lease is live: it may still be running
            journal.reap_expired(now)  # settled in the journal, as any reaper would
            record = journal.get_run(record.run_id) or record
            if record.outcome == "running":
                return "claimed"  # the lease was renewed meanwhile
            died = True
        elif record.outcome == "running":
            # still running as read back: its writer is alive on this machine, or on another one
            if not writer_dead or store.run_host(record.run_id) == socket.gethostname():
                return "claimed"
            read_back(record, alive=False)
            died = True
    # a request with effects that left (answered or not) may have acted: such a run is never
    # run again; one that sent only effect-free requests, or none, is
    acted = any(c.request_sent and c.effects != "none" for c in record.calls)
    # settled by a reaper before (`runs reap`, another driver): `INTERRUPTED` is never a live run's
    died = died or record.error_code == "INTERRUPTED"
    rerun = not acted and (died or record.outcome == "cancelled")
    if rerun:
        store.release(batch_id, stored.key)
        return "pending"
    unknown = record.outcome == "outcome_unknown"
    line = {
        "id": json.loads(stored.key),
        "line": stored.line,
        "outcome": record.outcome,
        "text": None,
        "output": None,
        "errorCode": record.error_code,
        "error": "the run's process died; its outcome comes from the journal" if died else None,
        "usage": camel_usage(record.usage),
        "costMicros": record.cost_micros,
        "runId": stored.run_id,
        "recovered": True,
    }
    cost = max(record.cost_micros, stored.reserved) if unknown else record.cost_micros
    state = "unknown" if unknown else "ended"
    store.finish(batch_id, stored.key, state, line, cost)
    return state


class _Out:
    """The output file: rebuilt from the store at start (exactly one line per ended item), then appended."""

    def __init__(self, path: Path, lines: list[dict[str, object]]) -> None:
        from ..content import json_text

        self._json = json_text
        ordered = sorted(lines, key=lambda x: _count(x, "line"))
        self._file = OutFile(path, (self._json(line, sort_keys=True) for line in ordered))

    def write(self, line: dict[str, object]) -> None:
        self._file.write(self._json(line, sort_keys=True))

    def close(self) -> None:
        self._file.close()


def camel_usage(usage: object) -> dict[str, object] | None:
    """A run's usage with camelCase keys (`model_calls` -> `modelCalls`), as every output key
    (None when it is not an object)."""
    if not isinstance(usage, Mapping):
        return None
    return {_camel(str(k)): v for k, v in usage.items()}


def _count(line: Mapping[str, object], key: str) -> int:
    """A line's whole-number field `key` (0 when missing or not a number)."""
    value = line.get(key)
    return int(value) if isinstance(value, int | float) else 0


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


Runner = Callable[[Item, str], Awaitable[dict[str, object]]]


class _Progress:
    """Done / failed / unknown / runs per second / cost on a terminal (rich, when installed)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.counts = {"succeeded": 0, "failed": 0, "unknown": 0, "cost": 0}
        self.started = time.monotonic()
        self._bar: Any = None
        if enabled:
            try:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )
            except ModuleNotFoundError:
                return
            self._bar = Progress(
                TextColumn("batch"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=Console(file=sys.stderr),
                transient=False,
            )
            self._task = self._bar.add_task("batch", total=total, status="")
            self._bar.start()

    def done(self, line: dict[str, object]) -> None:
        outcome = line.get("outcome")
        key = (
            "succeeded" if outcome == "succeeded" else "unknown" if outcome == "outcome_unknown" else "failed"
        )
        self.counts[key] += 1
        self.counts["cost"] += _count(line, "costMicros")
        if self._bar is not None:
            n = self.counts["succeeded"] + self.counts["failed"] + self.counts["unknown"]
            rate = n / max(1e-6, time.monotonic() - self.started)
            status = (
                f"ok {self.counts['succeeded']}  failed {self.counts['failed']}"
                f"  unknown {self.counts['unknown']}"
                f"  {rate:.1f} runs/s  cost {self.counts['cost']} µUSD"
            )
            self._bar.update(self._task, completed=n, status=status)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


async def run_batch(
    manifest: str | os.PathLike[str],
    *,
    inputs: str | os.PathLike[str],
    out: str | os.PathLike[str],
    agent: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    ray: bool | str | None = None,
    batch_id: str | None = None,
    new: bool = False,
    rerun: bool = False,
    journal: str | os.PathLike[str] | None = None,
    budget_micros: int | None = None,
    server_limits: Mapping[str, int] | None = None,
    secrets: Mapping[str, str] | None = None,
    actors: int = 2,
    actor_cpus: float = 1.0,
    progress: bool | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_lines: int = DEFAULT_MAX_LINES,
    on_batch_id: Callable[[str], None] | None = None,
    lease_s: float | None = None,
) -> BatchSummary:
    """Run a manifest's agent once per input line; write one output line per item.

    Args:
        manifest: the manifest (it needs a `Runtime` document: batches run governed).
        inputs: a JSON Lines file (see `toolbridge.batch`).
        out: the output JSON Lines file (rewritten from the batch's store, then appended).
        agent: the agent's name (default: the manifest's only agent).
        concurrency: runs in flight at once (per actor in Ray mode; default 8).
        ray: `None`/`False` local mode; `True` starts a local Ray cluster; a string is the
            address of a running one (`ray start --head`).
        batch_id: resume this batch; it must be in the journal (default: a new batch, its id
            given to `on_batch_id` first).
        new: start a new batch named `batch_id` (refused when the journal holds it).
        rerun: start a new batch although the journal holds one over the same inputs.
        journal: an SQLite file or a PostgreSQL URL (default: the manifest's durable journal,
            else `OUT.journal.sqlite`). Ray mode on several machines needs PostgreSQL.
        budget_micros: a batch-wide budget: each run reserves its runtime's `max_cost_micros`
            from it before it starts, and settles what it spent.
        server_limits: client document name -> calls in flight at most, across the batch.
        secrets: explicit secret values for the manifest.
        actors: Ray actors (Ray mode).
        actor_cpus: the CPUs each Ray actor asks Ray for (default 1: an actor runs its
            manifest's servers and its runs' work, about one core at full load); Ray places an
            actor only where that much is free, so `actors * actor_cpus` must fit the cluster.
            0 reserves nothing (actors share cores with everything else).
        progress: a progress bar on stderr (default: when stderr is a terminal).
        max_line_bytes: longest input line (1 MiB).
        max_lines: most input lines (1,000,000).
        on_batch_id: told the batch id once the batch is held, before anything runs.
        lease_s: how long the driver's lease on the batch, and each worker's lease in the
            journal, last without a heartbeat (default `TOOLBRIDGE_LEASE_S`, else 30 s).

    Raises:
        ConfigError: a bad manifest, option, input file or journal (`ERR_BATCH_CONFIG`,
            `ERR_BATCH_OUTPUT`, `ERR_INVALID_INPUT`, `ERR_CONFIG`, the manifest's codes); an
            unknown batch id (`ERR_BATCH_UNKNOWN`); a new batch whose id or inputs the journal
            already holds (`ERR_BATCH_EXISTS`); a batch another driver holds (`ERR_BATCH_BUSY`).
    """
    from ..manifest import load_manifest

    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 10_000:
        raise ConfigError("--concurrency must be an integer from 1 to 10000", code="ERR_BATCH_CONFIG")
    if isinstance(actors, bool) or not isinstance(actors, int) or not 1 <= actors <= 1024:
        raise ConfigError("actors must be an integer from 1 to 1024", code="ERR_BATCH_CONFIG")
    if isinstance(actor_cpus, bool) or not isinstance(actor_cpus, int | float) or not 0 <= actor_cpus <= 1024:
        raise ConfigError("--actor-cpus must be a number from 0 to 1024", code="ERR_BATCH_CONFIG")
    if budget_micros is not None and (
        isinstance(budget_micros, bool) or not isinstance(budget_micros, int) or budget_micros < 0
    ):
        raise ConfigError("--budget-micros must be a non-negative integer", code="ERR_BATCH_CONFIG")
    limits = dict(server_limits or {})
    for name, cap in limits.items():
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(
                f"--server-limit {name}: the cap must be a positive integer", code="ERR_BATCH_CONFIG"
            )
    generated = batch_id is None
    if batch_id is None:
        batch_id = f"b{time.strftime('%Y%m%d')}-{uuid.uuid4().hex[:10]}"
    else:
        check_batch_id(batch_id)
    if lease_s is None:
        lease_s = lease_seconds()
    if not (isinstance(lease_s, int | float) and 1.0 <= lease_s <= 3600.0):
        raise ConfigError("lease_s must be from 1 to 3600 seconds", code="ERR_BATCH_CONFIG")
    for name, bound in (("max_line_bytes", max_line_bytes), ("max_lines", max_lines)):
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ConfigError(f"{name} must be a positive integer", code="ERR_BATCH_CONFIG")
    loaded = load_manifest(manifest, secrets=secrets)
    agent_name = loaded.pick_agent(agent)
    if loaded.runtime_doc is None:
        raise ConfigError(
            f"{manifest}: a batch runs governed: the manifest needs a Runtime document",
            code="ERR_BATCH_CONFIG",
        )
    doc_limits = loaded.runtime_doc.limits
    ceiling = (doc_limits.max_cost_micros or 0) if doc_limits is not None else 0
    out_path = Path(out)
    check_out_path(out_path)  # before anything is written: a refused --out leaves nothing behind
    if os.fspath(inputs) != "-" and same_file(inputs, out_path):
        raise ConfigError(f"--out {out_path} is the --inputs file", code="ERR_BATCH_OUTPUT")
    items, errors = read_inputs(inputs, max_line_bytes=max_line_bytes, max_lines=max_lines)
    spec = _journal_spec(loaded, journal, out_path)
    _check_journal_path(spec, out_path)
    resuming = not (generated or new)
    if resuming and not is_postgres_url(spec) and not os.path.exists(spec):  # noqa: ASYNC240
        raise unknown_batch(batch_id, spec)  # before the journal file is created
    backend = open_journal(spec)
    store = open_store(backend)
    summary = BatchSummary(
        batch_id=batch_id, journal=backend.path, out=str(out_path), mode="ray" if ray else "local"
    )
    try:
        writer_gone = hold(store, backend.path, batch_id, items, resuming, rerun, lease_s)
        # this process's lease as a writer (its local runs), held before anything is claimed
        backend.hold_lease(writer_key(backend.writer), time.time() + lease_s)
        if on_batch_id is not None:
            on_batch_id(batch_id)
        store.open_budget(batch_id, budget_micros)
        changed = set(store.add_items(batch_id, items))
        for it in items:
            if it.key in changed:
                errors.append(
                    InputError(
                        it.line,
                        it.id,
                        "ERR_BATCH_INPUT_CHANGED",
                        f"line {it.line}: this id had another input",
                    )
                )
        runnable = {it.key: it for it in items if it.key not in changed}
        for stored in store.items(batch_id, "claimed"):
            reconcile(store, backend, batch_id, stored, writer_dead=writer_gone)
        ended = [s.result for s in store.items(batch_id) if s.state in ("ended", "unknown") and s.result]
        for line in ended:  # lines stored by older versions: `usage` in camelCase too
            if line.get("usage"):
                line["usage"] = camel_usage(line["usage"])
        writer = _Out(out_path, [e.to_line() for e in errors] + ended)
        todo = [
            (runnable[s.key], s.attempt)
            for s in store.items(batch_id)
            if s.state in ("pending", "skipped") and s.key in runnable
        ]
        bar = _Progress(len(todo), sys.stderr.isatty() if progress is None else progress)
        started = time.monotonic()

        async def body() -> int:
            if ray:
                from ._ray import run_on_ray

                return await run_on_ray(
                    ray,
                    manifest=str(manifest),
                    agent=agent_name,
                    journal=spec,
                    secrets=_needed(loaded, secrets),
                    server_limits=limits,
                    actors=actors,
                    actor_cpus=float(actor_cpus),
                    concurrency=concurrency,
                    lease_s=lease_s,
                    dispatch=lambda runner: _dispatch(
                        todo,
                        runner,
                        store,
                        backend,
                        batch_id,
                        writer,
                        bar,
                        workers=actors * concurrency,
                        ceiling=ceiling,
                        lease_s=lease_s,
                    ),
                )
            from ._worker import Worker

            async with Worker(
                str(manifest), agent=agent_name, journal=spec, secrets=secrets, server_limits=limits
            ).open() as worker:
                return await _dispatch(
                    todo,
                    lambda it, rid: worker.run(it.id, it.line, it.input, rid),
                    store,
                    backend,
                    batch_id,
                    writer,
                    bar,
                    workers=concurrency,
                    ceiling=ceiling,
                    lease_s=lease_s,
                )

        try:
            # the batch's lease, and beside it this process's writer lease, which also settles
            # the runs of writers whose lease expired (every driver is a reaper)
            summary.ran = await with_heartbeat(
                store, batch_id, lease_s, body, beside=lambda: keep_lease(backend, lease=lease_s)
            )
        finally:
            # also when cancelled (Ctrl-C; nothing here awaits): runs that were cancelled before
            # sending anything with effects go back to pending, the others get their line
            bar.close()
            summary.elapsed_s = time.monotonic() - started
            for s in store.items(batch_id, "claimed"):
                if reconcile(store, backend, batch_id, s, writer_dead=False) in ("ended", "unknown"):
                    (done,) = [d for d in store.items(batch_id) if d.key == s.key]
                    writer.write(done.result or {})
            for s in store.items(batch_id, "skipped"):
                if s.key in runnable:
                    writer.write(_skipped_line(runnable[s.key], s))
            writer.close()
        summary.runs_per_s = summary.ran / summary.elapsed_s if summary.elapsed_s > 0 else 0.0
        _fill(summary, store, batch_id, len(items), len(errors))
    finally:
        try:
            store.release_lease(batch_id)
        finally:
            store.close()
            backend.close()
    return summary


def _needed(loaded: Any, secrets: Mapping[str, str] | None) -> dict[str, str]:
    from ._worker import secrets_needed

    return secrets_needed(loaded, secrets)


def _skipped_line(item: Item, stored: StoredItem) -> dict[str, object]:
    return {
        "id": item.id,
        "line": item.line,
        "outcome": "blocked",
        "text": None,
        "output": None,
        "errorCode": "BATCH_BUDGET_EXCEEDED",
        "error": "the batch budget had no room for this run; resume with a larger --budget-micros",
        "usage": None,
        "costMicros": 0,
        "runId": None,
    }


async def _dispatch(
    todo: list[tuple[Item, int]],
    runner: Runner,
    store: BatchStore,
    journal: JournalBackend,
    batch_id: str,
    writer: _Out,
    bar: _Progress,
    *,
    workers: int,
    ceiling: int,
    lease_s: float = LEASE_S,
) -> int:
    """Claim and run every item of `todo` with `workers` in flight; returns how many runs started.

    A run whose worker died (`WorkerLost`) is reconciled: run again (up to 3 attempts in all)
    when it sent nothing with effects, else its outcome comes from the journal. While its
    writer's lease is live (a worker on another machine that may still be running it) the item
    waits, up to twice `lease_s`, for the lease to expire; then the journal decides it.
    """
    send, receive = anyio.create_memory_object_stream[tuple[Item, int]](len(todo) + 1)
    for entry in todo:
        send.send_nowait(entry)
    send.close()
    ran = 0

    def ended(line: dict[str, object]) -> None:
        writer.write(line)
        bar.done(line)

    async def handle(item: Item, attempt: int) -> None:
        nonlocal ran
        for _ in range(3):
            attempt += 1
            run_id = _run_id(batch_id, item.key, attempt)
            if await store.aclaim(batch_id, item.key, run_id, attempt, ceiling) != "claimed":
                return  # no room in the budget (skipped), or another driver has it
            ran += 1
            retry = True
            try:
                line = await runner(item, run_id)
            except (WorkerLost, Exception) as exc:
                # a worker died (WorkerLost), or failed in a way toolbridge did not foresee (then it
                # is left for the next resume instead of being retried here)
                dead = exc.dead if isinstance(exc, WorkerLost) else False
                if not isinstance(exc, WorkerLost):
                    _log.warning(
                        "batch %s line %d: the worker failed: %s", batch_id, item.line, type(exc).__name__
                    )
                    retry = False
                wait = 2 * lease_s + 1 if isinstance(exc, WorkerLost) else 0.0
                state = await _decide(store, journal, batch_id, item.key, dead, lease_s, wait)
                if state == "pending":
                    if retry:
                        continue
                    return
                if state == "claimed":
                    return  # still running somewhere: left in doubt (`batch status`)
                (done,) = [s for s in store.items(batch_id) if s.key == item.key]
                ended(done.result or {})
                return
            if line.get("usage"):
                line["usage"] = camel_usage(line["usage"])
            state = "unknown" if line.get("outcome") == "outcome_unknown" else "ended"
            await store.afinish(batch_id, item.key, state, line, _count(line, "costMicros"))
            ended(line)
            return

    async def consume() -> None:
        async with receive.clone() as queue:
            async for item, attempt in queue:
                await handle(item, attempt)

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, min(workers, len(todo)))):
            tg.start_soon(consume)
    receive.close()
    return ran


async def _decide(
    store: BatchStore,
    journal: JournalBackend,
    batch_id: str,
    key: str,
    dead: bool,
    lease_s: float,
    wait: float,
) -> str:
    """`reconcile` a claimed item whose worker was lost, waiting up to `wait` seconds for its
    writer's lease to expire."""
    deadline = time.monotonic() + wait
    while True:
        (stored,) = [s for s in store.items(batch_id, "claimed") if s.key == key]
        state = reconcile(store, journal, batch_id, stored, writer_dead=dead)
        if state != "claimed" or time.monotonic() >= deadline:
            return state
        await anyio.sleep(min(1.0, lease_s / 3))


def _fill(
    summary: BatchSummary,
    store: BatchStore,
    batch_id: str,
    items: int,
    input_errors: int,
    doubt: Callable[[StoredItem], bool] | None = None,
) -> None:
    """Count the batch's items by state; a claimed item is in doubt when `doubt` says so (default:
    always), else interrupted."""
    summary.items = items
    summary.input_errors = input_errors
    for s in store.items(batch_id):
        if s.state == "ended":
            if s.result and s.result.get("outcome") == "succeeded":
                summary.succeeded += 1
            else:
                summary.failed += 1
            summary.cost_micros += _count(s.result or {}, "costMicros")
        elif s.state == "unknown":
            summary.unknown += 1
            summary.cost_micros += _count(s.result or {}, "costMicros")
            summary.unknown_items.append({"id": json.loads(s.key), "line": s.line, "runId": s.run_id})
        elif s.state == "skipped":
            summary.skipped += 1
        elif s.state == "pending":
            summary.pending += 1
        elif s.state == "claimed":
            entry = {"id": json.loads(s.key), "line": s.line, "runId": s.run_id}
            if doubt is None or doubt(s):
                summary.in_doubt += 1
                summary.in_doubt_items.append(entry)
            else:
                summary.interrupted += 1
                summary.interrupted_items.append(entry)


def batch_status(batch_id: str, *, journal: str) -> BatchSummary:
    """A batch's state from its journal (read-only on PostgreSQL): counts and `outcome_unknown` items.

    A claimed item is `in doubt` while the batch's driver holds its lease (or its run's process is
    alive on this machine), else `interrupted`: the next resume decides it from the journal.

    Raises:
        ConfigError: the journal cannot be read, or has no such batch (`ERR_BATCH_CONFIG`).
    """
    check_batch_id(batch_id)
    backend = open_journal(str(journal), reader=True)
    try:
        store = open_store(backend, reader=True)
        try:
            if not store.has_batch(batch_id):
                raise ConfigError(
                    f"no batch {batch_id!r} in the journal {backend.path}", code="ERR_BATCH_CONFIG"
                )
            summary = BatchSummary(batch_id=batch_id, journal=backend.path)
            stored = store.items(batch_id)
            row = store.batch(batch_id)
            held = row is not None and row.held(time.time())
            here = socket.gethostname()

            def doubt(item: StoredItem) -> bool:
                """The driver's lease is live, or the item's run may still be running: its
                writer's lease is live and it is not proven dead (a writer without a lease:
                it is alive on this machine)."""
                if held:
                    return True
                record = backend.get_run(item.run_id) if item.run_id else None
                if record is None or record.outcome != "running":
                    return False
                writer = store.run_writer(record.run_id)
                if writer is None:
                    return False
                if writer.lease_until is None:
                    return writer.host == here
                return writer.lease_until >= time.time() and not writer.proven_dead()

            _fill(summary, store, batch_id, len(stored), 0, doubt)
            return summary
        finally:
            store.close()
    finally:
        backend.close()
