"""Batch agent runs: one governed run per input line, on one process or spread over Ray actors.

```
toolbridge batch MANIFEST --inputs FILE.jsonl --out FILE.jsonl [--agent NAME] [--concurrency N]
    [--ray [ADDRESS]] [--batch-id ID] [--journal URL] [--budget-micros N] [--json]
toolbridge batch status ID --journal URL [--json]
```

- `run_batch(manifest, inputs=..., out=..., ...)` (async) does what the command does and returns a
  `BatchSummary`; `batch_status(batch_id, journal=...)` reads a batch back without writing.
- An input line is `{"id": ..., "input": "..."}` or a bare JSON string (its line number is its
  id). A line that cannot run becomes one error line (`ERR_BATCH_INPUT`,
  `ERR_BATCH_DUPLICATE_ID`, `ERR_BATCH_INPUT_CHANGED`); the others still run.
- An output line holds `id`, `line`, `outcome`, `text`, `output` (structured output), `errorCode`,
  `error`, `usage`, `costMicros` and `runId` (camelCase, as `toolbridge run --json`).
- Resumable: the batch's items live beside the journal (SQLite file or PostgreSQL). Rerunning
  with the same `--batch-id` skips ended items, runs again the items whose runs never sent a
  request, and never runs again an `outcome_unknown` item: `batch status` lists those.
- Local mode: one process, servers started once, runs concurrent up to `--concurrency`.
  Ray mode (`toolbridge[ray]`): actors that each start the servers once and keep their MCP
  sessions for every run they serve.

See `docs/batch.md`.
"""

from __future__ import annotations

from ._driver import BatchSummary, batch_status, run_batch

__all__ = ["BatchSummary", "batch_status", "run_batch"]
