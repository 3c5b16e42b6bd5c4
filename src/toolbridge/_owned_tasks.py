"""Ending a task its owner started: cancel it if it still runs, and wait until it has finished.

Shared by the agent (a streamed run's model task) and the runtime (a governed stream's producer):
every background task has an owner, and the owner ends it with this before it returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

__all__ = ["stop_task"]


async def stop_task(task: asyncio.Task[Any]) -> None:
    """Cancel `task` if it still runs and wait until it has finished (shielded)."""
    if task.done():  # the common case: nothing to cancel or wait for (no event-loop round trip)
        if not task.cancelled():
            task.exception()
        return
    task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: the caller re-raises it through `await task` when it matters
