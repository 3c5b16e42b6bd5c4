"""`toolbridge batch`: one governed agent run per input line, locally or on Ray; `batch status`.

```
toolbridge batch MANIFEST --inputs FILE.jsonl --out FILE.jsonl [--agent NAME] [--concurrency N]
    [--ray [ADDRESS]] [--actors N] [--batch-id ID] [--journal URL] [--budget-micros N]
    [--server-limit NAME=N] [--json]
toolbridge batch status ID --journal URL [--json]
```

The batch id is printed on stderr first (rerun with `--batch-id` to resume). The exit code is 0
when every item succeeded, 1 otherwise (input errors, failed runs, `outcome_unknown` items).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from ..errors import ConfigError
from ._manifest import _given_secrets, _secret_options
from ._output import emit
from ._parsing import add_action_help

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the `batch` subcommand (`journal` is in `_journal`)."""
    batch = subparsers.add_parser(
        "batch",
        help="run a manifest's agent once per input line (resumable; locally or on Ray)",
        description="`batch MANIFEST --inputs IN --out OUT` runs; `batch status ID --journal J` reports.",
    )
    batch.add_argument(
        "target", nargs="+", metavar="MANIFEST | status ID", help="the manifest, or `status ID`"
    )
    batch.add_argument("--inputs", help='JSON Lines: {"id": ..., "input": "..."} or a bare string per line')
    batch.add_argument("--out", help="JSON Lines output, one line per item")
    batch.add_argument("--agent", help="the agent to run (default: the manifest's only agent)")
    batch.add_argument("--concurrency", type=int, default=8, help="runs in flight (per actor with --ray)")
    batch.add_argument(
        "--ray",
        nargs="?",
        const=True,
        default=None,
        metavar="ADDRESS",
        help="run on Ray (a local cluster, or ADDRESS)",
    )
    batch.add_argument("--actors", type=int, default=2, help="Ray actors (default 2)")
    batch.add_argument("--batch-id", help="resume this batch")
    batch.add_argument(
        "--journal",
        help="SQLite file or postgresql:// URL (default: the manifest's, else OUT.journal.sqlite)",
    )
    batch.add_argument("--budget-micros", type=int, help="a batch-wide cost budget in micro-USD")
    batch.add_argument(
        "--server-limit",
        action="append",
        default=[],
        metavar="NAME=N",
        help="calls in flight to a server, batch-wide",
    )
    batch.add_argument("--json", action="store_true", help="print the summary as JSON")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    _secret_options(batch)
    batch.set_defaults(handler=_handle)
    _status_help(batch)


def _limits(values: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        name, sep, cap = value.partition("=")
        if not sep or not name or not cap.isdigit() or int(cap) < 1:
            raise ConfigError(
                "--server-limit expects NAME=N with N a positive integer", code="ERR_BATCH_CONFIG"
            )
        out[name] = int(cap)
    return out


def _handle(args: argparse.Namespace) -> int:
    from ..batch import batch_status, run_batch

    if args.target[0] == "status":
        if len(args.target) != 2 or not args.journal:
            raise ConfigError("usage: toolbridge batch status ID --journal URL", code="ERR_BATCH_CONFIG")
        summary = batch_status(args.target[1], journal=args.journal)
        _print(summary.to_dict(), as_json=args.json, status=True)
        return 0
    if len(args.target) != 1:
        raise ConfigError(f"unexpected arguments {' '.join(args.target[1:])!r}", code="ERR_BATCH_CONFIG")
    if not args.inputs or not args.out:
        raise ConfigError("batch needs --inputs FILE and --out FILE", code="ERR_BATCH_CONFIG")

    def told(batch_id: str) -> None:
        print(f"toolbridge: batch {batch_id}", file=sys.stderr, flush=True)

    summary = anyio.run(
        lambda: run_batch(
            args.target[0],
            inputs=args.inputs,
            out=args.out,
            agent=args.agent,
            concurrency=args.concurrency,
            ray=args.ray,
            actors=args.actors,
            batch_id=args.batch_id,
            journal=args.journal,
            budget_micros=args.budget_micros,
            server_limits=_limits(args.server_limit),
            secrets=_given_secrets(args),
            progress=False if (args.no_progress or args.json) else None,
            on_batch_id=told,
        )
    )
    data = summary.to_dict()
    _print(data, as_json=args.json, status=False)
    problems = ("failed", "unknown", "skipped", "inputErrors", "inDoubt", "pending")
    clean = all(data[k] == 0 for k in problems)
    return 0 if clean else 1


def _print(data: dict[str, Any], *, as_json: bool, status: bool) -> None:
    if as_json:
        emit(json.dumps(data, indent=2, sort_keys=True))
        return
    head = f"batch {data['batchId']}"
    if not status:
        head += f": {data['ran']} runs in {data['elapsedS']:.1f} s"
        head += f" ({data['runsPerS']:.1f} runs/s, {data['mode']})"
    emit(head)
    emit(
        f"  items {data['items']}: succeeded {data['succeeded']}, failed {data['failed']}, "
        f"outcome_unknown {data['unknown']}, skipped (budget) {data['skipped']}, in doubt {data['inDoubt']}, "
        f"not run yet {data['pending']}" + (f"; input errors {data['inputErrors']}" if not status else "")
    )
    emit(
        f"  cost {data['costMicros']} micro-USD; journal {data['journal']}"
        + (f"; out {data['out']}" if data["out"] else "")
    )
    if data["unknownItems"]:
        emit(
            "  outcome_unknown (check each on the remote side before running it again; never rerun by batch):"
        )
        for item in data["unknownItems"]:
            emit(f"    id {json.dumps(item['id'])}  line {item['line']}  run {item['runId']}")
    if data["inDoubtItems"]:
        emit("  in doubt (a run still running elsewhere, or on a machine this one cannot check):")
        for item in data["inDoubtItems"]:
            emit(f"    id {json.dumps(item['id'])}  line {item['line']}  run {item['runId']}")


def _status_help(batch: argparse.ArgumentParser) -> None:
    """`batch status --help`: the action's own help (`_parsing.add_action_help`)."""
    status = add_action_help(
        batch,
        "status",
        usage="toolbridge batch status ID --journal FILE|URL [--json]",
        description="Report a batch from its journal: items succeeded, failed, outcome_unknown, in doubt, "
        "not run yet.",
    )
    status.add_argument("id", metavar="ID", help="the batch id (printed on stderr when the batch started)")
    status.add_argument("--journal", required=True, help="the journal: SQLite file or postgresql:// URL")
    status.add_argument("--json", action="store_true", help="print the report as JSON")
