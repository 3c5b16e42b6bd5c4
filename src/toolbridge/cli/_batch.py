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
import re
import shlex
import signal
import sys
from typing import Any

import anyio

from ..errors import ConfigError
from ._manifest import _given_secrets, _secret_options
from ._output import emit, stdout_kept_for_json
from ._parsing import Subcommands, add_action_help

__all__ = ["register"]


def register(subparsers: Subcommands) -> None:
    """Add the `batch` subcommand (`journal` is in `_journal`)."""
    batch = subparsers.add_parser(
        "batch",
        help="run a manifest's agent once per input line (resumable; locally or on Ray)",
        description="`batch MANIFEST --inputs IN --out OUT` runs; `batch status ID --journal J` reports.",
    )
    batch.add_argument(
        "target", nargs="+", metavar="MANIFEST | status ID", help="the manifest, or `status ID`"
    )
    batch.add_argument(
        "--inputs",
        help='JSON Lines: {"id": ..., "input": "..."} or a bare string per line; - reads standard input',
    )
    batch.add_argument("--out", help="JSON Lines output, one line per item (a regular file or a new path)")
    batch.add_argument("--agent", help="the agent to run (default: the manifest's only agent)")
    batch.add_argument(
        "--concurrency", type=int, default=8, help="runs in flight (per actor with --ray; default 8)"
    )
    batch.add_argument(
        "--ray",
        nargs="?",
        const=True,
        default=None,
        metavar="ADDRESS",
        help="run on Ray (a local cluster, or ADDRESS)",
    )
    batch.add_argument("--actors", type=int, default=2, help="Ray actors (default 2)")
    batch.add_argument(
        "--actor-cpus",
        type=float,
        default=1.0,
        help="CPUs each Ray actor reserves (default 1; 0 reserves none)",
    )
    batch.add_argument("--batch-id", help="resume this batch (refused unless the journal holds it)")
    batch.add_argument(
        "--new", action="store_true", help="start a new batch named --batch-id (default: a new id)"
    )
    batch.add_argument(
        "--rerun",
        action="store_true",
        help="start a new batch although the journal holds one over the same inputs",
    )
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
    batch.add_argument(
        "--max-line-bytes", type=int, default=1024 * 1024, help="longest input line (default 1 MiB)"
    )
    batch.add_argument(
        "--max-lines", type=int, default=1_000_000, help="most input lines (default 1,000,000)"
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

    told: list[str] = []

    def tell(batch_id: str) -> None:
        told.append(batch_id)
        print(f"toolbridge: batch {batch_id}", file=sys.stderr, flush=True)

    stopped: list[int] = []

    async def run() -> Any:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                # Ctrl-C / SIGTERM cancel the batch: its cancelled runs are reconciled, the lease released
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for signum in signals:
                        stopped.append(int(signum))
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            summary = await run_batch(
                args.target[0],
                inputs=args.inputs,
                out=args.out,
                agent=args.agent,
                concurrency=args.concurrency,
                ray=args.ray,
                actors=args.actors,
                actor_cpus=args.actor_cpus,
                batch_id=args.batch_id,
                new=args.new,
                rerun=args.rerun,
                journal=args.journal,
                budget_micros=args.budget_micros,
                server_limits=_limits(args.server_limit),
                secrets=_given_secrets(args),
                progress=False if (args.no_progress or args.json) else None,
                max_line_bytes=args.max_line_bytes,
                max_lines=args.max_lines,
                on_batch_id=tell,
            )
            tg.cancel_scope.cancel()
            return summary

    with stdout_kept_for_json(args.json):  # Ray's own lines must not precede the JSON
        summary = anyio.run(run)
    if stopped:
        name = "SIGINT" if stopped[0] == signal.SIGINT else "SIGTERM"
        if told:
            print(
                f"toolbridge: batch {told[0]} interrupted ({name}); resume it with: "
                + resume_command(args, told[0]),
                file=sys.stderr,
                flush=True,
            )
        else:
            print(f"toolbridge: interrupted ({name})", file=sys.stderr, flush=True)
        return 128 + stopped[0]
    data = summary.to_dict()
    _print(data, as_json=args.json, status=False)
    problems = ("failed", "unknown", "skipped", "inputErrors", "inDoubt", "interrupted", "pending")
    clean = all(data[k] == 0 for k in problems)
    return 0 if clean else 1


def resume_command(args: argparse.Namespace, batch_id: str) -> str:
    """The command that resumes this batch: the same options, `--batch-id ID`, without `--new`.

    Secret values (`--secret NAME=VALUE`) and a journal URL's password are not repeated: they
    show as `NAME=...` and `:...@`, to be given again.
    """
    from ..runtime import is_postgres_url

    parts = ["toolbridge", "batch", args.target[0], "--inputs", args.inputs, "--out", args.out]
    parts += ["--batch-id", batch_id]
    if args.journal:
        journal = args.journal
        if is_postgres_url(journal):
            journal = re.sub(r"^([a-z]+://[^:/@]*):[^@/]*@", r"\1:...@", journal)
        parts += ["--journal", journal]
    if args.agent:
        parts += ["--agent", args.agent]
    if args.concurrency != 8:
        parts += ["--concurrency", str(args.concurrency)]
    if args.ray is not None:
        parts += ["--ray"] if args.ray is True else ["--ray", str(args.ray)]
    if args.actors != 2:
        parts += ["--actors", str(args.actors)]
    if args.actor_cpus != 1.0:
        parts += ["--actor-cpus", str(args.actor_cpus)]
    if args.budget_micros is not None:
        parts += ["--budget-micros", str(args.budget_micros)]
    for limit in args.server_limit:
        parts += ["--server-limit", limit]
    if args.max_line_bytes != 1024 * 1024:
        parts += ["--max-line-bytes", str(args.max_line_bytes)]
    if args.max_lines != 1_000_000:
        parts += ["--max-lines", str(args.max_lines)]
    if args.secrets_file:
        parts += ["--secrets-file", args.secrets_file]
    for secret in args.secret:
        parts += ["--secret", secret.partition("=")[0] + "=..."]
    if args.json:
        parts.append("--json")
    if args.no_progress:
        parts.append("--no-progress")
    return shlex.join(parts)


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
        + (f"interrupted {data['interrupted']}, " if status else "")
        + f"not run yet {data['pending']}"
        + (f"; input errors {data['inputErrors']}" if not status else "")
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
        emit(
            "  in doubt (its driver's lease is live, or its run's process is alive: it may still be running):"
        )
        for item in data["inDoubtItems"]:
            emit(f"    id {json.dumps(item['id'])}  line {item['line']}  run {item['runId']}")
    if data["interruptedItems"]:
        emit("  interrupted (its driver stopped; resuming the batch decides each from the journal):")
        for item in data["interruptedItems"]:
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
