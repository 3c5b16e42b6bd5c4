"""Taking a batch before it runs: a new one, or the lease of a known one; the lease's heartbeat.

- A new batch (no `--batch-id`, or `--new`) is refused when the journal holds its id, or another
  batch over the same inputs (`inputs_digest`: the ids and inputs' digests) unless `rerun`.
- `--batch-id` alone resumes: an id the journal does not hold is refused (`ERR_BATCH_UNKNOWN`),
  never started silently; a batch whose lease another driver holds is refused (`ERR_BATCH_BUSY`).
- While it runs, the driver renews its lease every third of its length; if the lease is lost
  (another driver took it after it expired), the driver stops (its claims were fenced anyway).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from ..errors import ConfigError
from ._store import BatchStore, Item, Lease

__all__ = ["hold", "inputs_digest", "unknown_batch", "with_heartbeat"]

_log = logging.getLogger("toolbridge.batch")


async def with_heartbeat(
    store: BatchStore,
    batch_id: str,
    lease_s: float,
    body: Callable[[], Awaitable[int]],
    *,
    beside: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> int:
    """Run `body` while renewing the batch's lease every third of `lease_s`; stop it if the lease is
    lost. `beside` runs in the same task group (cancelled when `body` ends)."""
    lost: list[bool] = []
    result = 0
    try:
        async with anyio.create_task_group() as tg:
            if beside is not None:
                tg.start_soon(beside)
            result = await _beside(tg, store, batch_id, lease_s, body, lost)
    except BaseExceptionGroup as group:  # the body's own error, as it raised it
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    if lost:
        raise ConfigError(
            f"batch {batch_id}: another driver took the batch's lease; this one stopped",
            code="ERR_BATCH_BUSY",
        )
    return result


async def _beside(
    tg: anyio.abc.TaskGroup,
    store: BatchStore,
    batch_id: str,
    lease_s: float,
    body: Callable[[], Awaitable[int]],
    lost: list[bool],
) -> int:
    """`body`, with the heartbeat in `tg` beside it; `tg` is cancelled when either ends."""
    tg.start_soon(_beat, tg, store, batch_id, lease_s, lost)
    result = await body()
    tg.cancel_scope.cancel()
    return result


async def _beat(
    tg: anyio.abc.TaskGroup, store: BatchStore, batch_id: str, lease_s: float, lost: list[bool]
) -> None:
    while True:
        await anyio.sleep(lease_s / 3)
        try:
            held = store.renew(batch_id, lease_s)
        except Exception as exc:  # the database is away for now: the claims stay fenced
            _log.warning("batch %s: the lease could not be renewed: %s", batch_id, exc)
            continue
        if not held:
            lost.append(True)
            tg.cancel_scope.cancel()
            return


def inputs_digest(items: list[Item]) -> str:
    """The SHA-256 of a batch's valid items (ids and inputs, in id order): "the same inputs"."""
    digest = hashlib.sha256()
    for key, sha in sorted((it.key, it.sha256) for it in items):
        digest.update(f"{key}\t{sha}\n".encode())
    return digest.hexdigest()


def unknown_batch(batch_id: str, shown: str) -> ConfigError:
    return ConfigError(
        f"no batch {batch_id!r} in the journal {shown}: --batch-id resumes a batch this journal holds "
        "(see `toolbridge batch status ID --journal ...`); --new starts a new batch with this id",
        code="ERR_BATCH_UNKNOWN",
    )


def hold(
    store: BatchStore,
    shown: str,
    batch_id: str,
    items: list[Item],
    resuming: bool,
    rerun: bool,
    lease_s: float,
) -> bool:
    """Create the batch, or take the lease of a known one; whether its earlier runs' writers are gone.

    Raises:
        ConfigError: `ERR_BATCH_UNKNOWN`, `ERR_BATCH_EXISTS`, `ERR_BATCH_BUSY` (see `run_batch`).
    """
    lease = Lease.mine()
    digest = inputs_digest(items)
    if not resuming:
        if store.batch(batch_id) is not None or store.has_batch(batch_id):
            raise ConfigError(
                f"batch {batch_id!r} is already in the journal {shown}: resume it with --batch-id "
                f"{batch_id} (without --new)",
                code="ERR_BATCH_EXISTS",
            )
        others = store.batches_with_inputs(digest)
        if others and not rerun:
            raise ConfigError(
                f"the journal {shown} already holds batch {others[-1]!r} over these inputs: resume it "
                f"with --batch-id {others[-1]}, or add --rerun to run them again as a new batch",
                code="ERR_BATCH_EXISTS",
            )
        if not store.create_batch(batch_id, digest, lease, lease_s):
            raise ConfigError(f"batch {batch_id!r} was started meanwhile", code="ERR_BATCH_EXISTS")
        return True
    if store.batch(batch_id) is None:
        if not store.has_batch(batch_id):
            raise unknown_batch(batch_id, shown)
        store.create_batch(batch_id, digest, lease, lease_s)  # a batch from before leases
        return False
    holder = store.acquire(batch_id, lease, lease_s)
    if holder is not None:
        left = max(0, round((holder.lease_until or 0) - time.time()))
        raise ConfigError(
            f"batch {batch_id!r} is being run by another driver (pid {holder.owner_pid} on "
            f"{holder.owner_host}; its lease ends in {left} s unless renewed): resume once it stopped",
            code="ERR_BATCH_BUSY",
        )
    return store.prior is not None and store.prior.lapsed(time.time())
