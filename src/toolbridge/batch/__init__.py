"""Batch agent runs: one governed run per input line, on one process or spread over Ray actors.

```
toolbridge batch MANIFEST --inputs FILE.jsonl|- --out FILE.jsonl [--agent NAME] [--concurrency N]
    [--ray [ADDRESS]] [--batch-id ID [--new]] [--rerun] [--journal URL] [--budget-micros N] [--json]
toolbridge batch status ID --journal URL [--json]
```

- `run_batch(manifest, inputs=..., out=..., ...)` (async) does what the command does and returns a
  `BatchSummary`; `batch_status(batch_id, journal=...)` reads a batch back without writing.
- An input line is `{"id": ..., "input": "..."}` or a bare JSON string (its digest, `sha256-...`,
  is its id: never its line number). A line that cannot run becomes one error line
  (`ERR_BATCH_INPUT`, `ERR_BATCH_DUPLICATE_ID`, `ERR_BATCH_INPUT_CHANGED`); the others still run.
  `--inputs` is a regular file or `-` (a pipe); `--out` a regular file or a new path.
- An output line holds `id`, `line`, `outcome`, `text`, `output` (structured output), `errorCode`,
  `error`, `usage`, `costMicros` and `runId`: camelCase keys everywhere (`usage` too), as
  `toolbridge run --json`.
- Resumable: the batch's items live beside the journal (SQLite file or PostgreSQL). A new batch
  is started explicitly (no `--batch-id`, or `--new`); `--batch-id` alone resumes a batch the
  journal holds, skips ended items, runs again the items whose runs never sent a request with
  effects, and never runs again an `outcome_unknown` item: `batch status` lists those. A driver
  holds its batch by a lease (30 s, renewed every 10 s); `in doubt` means a live lease.
- Local mode: one process, servers started once, runs concurrent up to `--concurrency` (8).
  Ray mode (`toolbridge[ray]`): actors that each start the servers once and keep their MCP
  sessions for every run they serve.

See `docs/batch.md`.
"""

from __future__ import annotations

from ._driver import BatchSummary, batch_status, run_batch

__all__ = ["BatchSummary", "batch_status", "run_batch"]
