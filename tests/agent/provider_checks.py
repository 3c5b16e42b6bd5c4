"""Checks every model provider's tests make the same way (imported as `provider_checks`)."""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing

import anyio
from agent_fake_http import FakeApi

from toolbridge.agent import Agent, Model

REPLY_DELAY_S = 3.0
"""How late the slow server answers in `cancelled_while_the_model_is_slow`."""


async def cancelled_while_the_model_is_slow(m: Model) -> None:
    """A run cancelled while its model request waits for a reply queued `REPLY_DELAY_S` late: the
    cancel ends it without waiting for the reply, and no task is left behind."""
    before = set(asyncio.all_tasks())
    start = time.monotonic()
    with anyio.move_on_after(0.3) as scope:
        await Agent(m).run("hello")
    # Had the cancel waited for the reply, the run would end after REPLY_DELAY_S: the margin is
    # for a loaded machine, not a speed claim.
    assert scope.cancelled_caught and time.monotonic() - start < REPLY_DELAY_S - 0.5
    await m.aclose()
    assert set(asyncio.all_tasks()) <= before


async def stream_closed_after_two_deltas(api: FakeApi, m: Model, pieces: list[str]) -> None:
    """A stream the caller closes after two text deltas while the server trickles `pieces`: the
    request is cancelled (the server sees the connection go away mid-stream), no task is left."""
    before = set(asyncio.all_tasks())
    seen: list[str] = []
    async with aclosing(Agent(m).stream("talk")) as events:
        async for event in events:
            if event.type == "text-delta":
                seen.append(event.text)  # type: ignore[union-attr]
                if len(seen) == 2:
                    break
    assert seen == pieces[:2]
    await m.aclose()
    assert set(asyncio.all_tasks()) <= before
    # `hung_up` is set only when the server failed to write the rest: closing did not wait for it.
    assert await anyio.to_thread.run_sync(api.hung_up.wait, 5)
