"""`toolbridge runs`: read the evidence journal of a durable runtime.

```
toolbridge runs --journal FILE|URL [--json] [--limit N]   # the most recent runs, newest first
        [--outcome OUTCOME] [--status STATUS]             # only runs with this outcome / stored status
toolbridge runs show RUN_ID --journal FILE [--json]       # one run and the evidence of its calls
toolbridge runs reap --journal FILE|URL [--json]          # settle runs whose writer's lease expired
```

`--outcome` filters on the outcome as read back (`outcome_unknown` includes runs read back so);
`--status` on what the journal stores (`running` lists runs still open, interrupted or not).
Filters look at the newest `FILTER_WINDOW` runs. `reap` is the one action that writes: it settles
the runs of writers whose lease expired (`toolbridge.runtime._leases`), as every gateway, batch
driver and Ray actor does.

`--json` keys are camelCase, as in every JSON output of the command line (`runId`, `costMicros`,
`usage.inputTokens`, `calls[].argsSha256`); the list gives each run with its calls, as `show`.

The journal (an SQLite file, or a PostgreSQL URL: read-only transactions, never migrated) is
only read. A run whose process died mid-run is shown as the runtime reads it
back (`outcome_unknown` when a call with effects had its request sent and no response, else
`failed` / `INTERRUPTED`), marked `(interrupted)`. Nothing here ever contains arguments, results
or a tool's error text: the journal does not store them.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ..errors import ConfigError
from ..runtime import Journal, JournalBackend, PostgresJournal, RunRecord, is_postgres_url
from ..sanitize import visible_text
from ._output import camel_keys, emit
from ._parsing import add_action_help

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the `runs` subcommand (with its `show` action)."""
    runs = subparsers.add_parser(
        "runs",
        help="list the runs in a durable runtime's journal, or show one run's evidence",
        description="`runs --journal FILE` lists runs; `runs show RUN_ID --journal FILE` shows one.",
    )
    runs.add_argument("action", nargs="?", choices=["show", "reap"], help="show one run, or reap")
    runs.add_argument("run_id", nargs="?", help="the run to show")
    runs.add_argument(
        "--journal", required=True, help="the SQLite journal file, or a PostgreSQL URL (postgresql://...)"
    )
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.add_argument("--limit", type=int, default=50, help="how many runs to list (default 50)")
    runs.add_argument("--outcome", choices=OUTCOME_CHOICES, help="only runs with this outcome (read back)")
    runs.add_argument(
        "--status", choices=STATUS_CHOICES, help="only runs the journal stores with this status"
    )
    runs.set_defaults(handler=_handle)
    show = add_action_help(
        runs,
        "show",
        usage="toolbridge runs show RUN_ID --journal FILE|URL [--json]",
        description="Show one run of the journal and the evidence of each of its tool calls.",
    )
    show.add_argument("run_id", metavar="RUN_ID", help="the run to show")
    show.add_argument(
        "--journal", required=True, help="the SQLite journal file, or a PostgreSQL URL (postgresql://...)"
    )
    show.add_argument("--json", action="store_true", help="print JSON (camelCase keys)")


FILTER_WINDOW = 10_000
"""Runs `--outcome` / `--status` look at, newest first."""
OUTCOME_CHOICES = ["succeeded", "failed", "blocked", "cancelled", "outcome_unknown", "not_started"]
STATUS_CHOICES = ["running", *OUTCOME_CHOICES]


def _reap(args: argparse.Namespace) -> int:
    journal: JournalBackend = (
        PostgresJournal(args.journal) if is_postgres_url(args.journal) else Journal(args.journal)
    )
    try:
        settled = journal.reap_expired(time.time())
    finally:
        journal.close()
    emit(json.dumps({"settled": settled}) if args.json else f"settled {len(settled)} run(s)")
    return 0


def _wanted(record: RunRecord, args: argparse.Namespace) -> bool:
    status = "running" if record.interrupted else record.outcome
    return (args.outcome is None or record.outcome == args.outcome) and (
        args.status is None or status == args.status
    )


def _handle(args: argparse.Namespace) -> int:
    if args.action == "reap":
        if args.run_id:
            raise ConfigError("runs reap takes no RUN_ID")
        return _reap(args)
    journal: JournalBackend = (
        PostgresJournal.open_existing(args.journal)
        if is_postgres_url(args.journal)
        else Journal.open_existing(args.journal)
    )
    try:
        if args.action == "show":
            if not args.run_id:
                raise ConfigError("runs show needs a RUN_ID")
            record = journal.get_run(args.run_id)
            if record is None:
                raise ConfigError(f"no run {args.run_id!r} in the journal {journal.path!r}")
            _print_run(record, as_json=args.json)
            return 0
        if args.run_id:
            raise ConfigError(
                f"unexpected argument {args.run_id!r} (did you mean `runs show {args.run_id}`?)"
            )
        if args.limit < 1:
            raise ConfigError("--limit must be at least 1")
        if args.outcome is None and args.status is None:
            records = journal.list_runs(args.limit)
        else:
            records = [r for r in journal.list_runs(FILTER_WINDOW) if _wanted(r, args)][: args.limit]
        if args.json:  # with the evidence of their calls, as `runs show --json` gives it
            records = [journal.get_run(r.run_id) or r for r in records]
        _print_runs(records, as_json=args.json)
        return 0
    finally:
        journal.close()


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


def _outcome(record: RunRecord) -> str:
    text = record.outcome
    if record.interrupted:
        text += " (interrupted)"
    return text


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _show(text: str) -> None:
    """Human output: names and codes read from the journal may come from a server; show them safely."""
    emit("\n".join(visible_text(line) for line in text.split("\n")))


def _print_runs(records: list[RunRecord], *, as_json: bool) -> None:
    if as_json:
        emit(json.dumps([camel_keys(r.to_dict()) for r in records], indent=2, sort_keys=True))
        return
    if not records:
        emit("no runs")
        return
    rows = [["RUN", "STARTED (UTC)", "OUTCOME", "CODE", "COST", "AGENT", "PRINCIPAL"]]
    for r in records:
        rows.append(
            [
                r.run_id,
                _when(r.started_at),
                _outcome(r),
                r.error_code or "-",
                str(r.cost_micros),
                r.agent or "-",
                r.principal or "-",
            ]
        )
    _show(_table(rows))


def _print_run(record: RunRecord, *, as_json: bool) -> None:
    if as_json:
        emit(json.dumps(camel_keys(record.to_dict()), indent=2, sort_keys=True))
        return
    _show(f"run       {record.run_id}")
    _show(f"agent     {record.agent or '-'}")
    if record.principal:
        _show(f"principal {record.principal}")
    _show(f"profile   {record.profile}")
    _show(f"outcome   {_outcome(record)}" + (f"  {record.error_code}" if record.error_code else ""))
    _show(f"started   {_when(record.started_at)}   ended {_when(record.ended_at)}")
    usage = record.usage
    _show(
        f"cost      {record.cost_micros} micro-USD; {usage.get('model_calls', 0)} model calls, "
        f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens",
    )
    if not record.calls:
        emit("calls     none")
        return
    emit("calls")
    rows = [
        ["CALL", "TOOL", "VERSION", "EFFECTS", "SENT", "RESPONSE", "OUTCOME", "CODE", "COST", "ARGS SHA-256"]
    ]
    for c in record.calls:
        rows.append(
            [
                c.call_id,
                c.tool_id,
                c.tool_version or "-",
                c.effects,
                "yes" if c.request_sent else "no",
                "yes" if c.response_received else "no",
                c.outcome,
                c.error_code or "-",
                str(c.cost_micros),
                c.args_sha256[:16],
            ]
        )
    _show(_table(rows))
    if any(c.outcome == "outcome_unknown" for c in record.calls):
        emit(
            "\noutcome_unknown: the request was sent and the remote side may have acted; check it "
            "(run id + call id identify the call) before retrying.",
        )
