"""The per-upstream breaker and last good listing (`gateway._breaker`), on their own."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from toolbridge.errors import JsonRpcError, TransportError
from toolbridge.gateway._breaker import Breaker, Watched


def test_the_breaker_opens_after_consecutive_failures_and_probes_after_the_cooldown() -> None:
    breaker = Breaker(failures=3, cooldown_s=3600)
    assert not breaker.failure() and not breaker.failure()
    breaker.success()  # not consecutive
    assert [breaker.failure() for _ in range(3)] == [False, False, True]
    assert breaker.state == "open" and not breaker.allow() and breaker.opened == 1
    assert not breaker.failure()  # already open: not opened again
    breaker.cooldown_s = 0
    assert breaker.state == "half-open"
    assert breaker.allow()  # the probe
    breaker.success()
    assert breaker.state == "closed" and breaker.allow() and breaker.count == 0


class _Upstream:
    def __init__(self) -> None:
        self.mode = "ok"
        self.generation = 0
        self.calls = 0

    async def list_tools(self) -> list[str]:
        if self.mode == "hang":
            await anyio.sleep_forever()
        if self.mode == "junk":
            raise ValueError("not a listing")
        return ["a", "b"] if self.mode == "ok" else ["a", "b", "c"]

    async def call_tool(self, name: str, args: Any) -> str:
        self.calls += 1
        if self.mode == "down":
            raise TransportError("connection reset")
        if self.mode == "refuses":
            raise JsonRpcError("invalid params", rpc_code=-32602, rpc_message="invalid params")
        return "done"


async def test_a_slow_or_broken_listing_serves_the_last_good_one() -> None:
    inner = _Upstream()
    watched = Watched(inner, "Up", list_timeout_s=0.05, start_timeout_s=5, breaker=Breaker(2, 3600))
    assert await watched.list_tools() == ["a", "b"] and not watched.stale
    inner.mode = "hang"
    assert await watched.list_tools() == ["a", "b"] and watched.stale
    inner.mode = "junk"
    assert await watched.list_tools() == ["a", "b"] and watched.breaker.state == "open"
    inner.mode = "new"
    assert await watched.list_tools() == ["a", "b"]  # open: not asked at all
    generation = watched.generation
    watched.recovered()  # the watcher's probe got an answer
    assert watched.generation == generation + 1 and watched.breaker.state == "closed"
    assert await watched.list_tools() == ["a", "b", "c"] and not watched.stale


async def test_never_listed_is_withheld_and_answers_count_as_success() -> None:
    inner = _Upstream()
    inner.mode = "junk"
    watched = Watched(inner, "Up", list_timeout_s=0.05, start_timeout_s=0.05, breaker=Breaker(2, 3600))
    assert await watched.list_tools() == [] and watched.stale
    inner.mode = "refuses"
    for _ in range(3):  # a JSON-RPC error is an answer
        with pytest.raises(JsonRpcError):
            await watched.call_tool("t", {})
    assert watched.breaker.count == 0
    inner.mode = "down"
    for _ in range(2):
        with pytest.raises(TransportError):
            await watched.call_tool("t", {})
    assert watched.breaker.state == "open"
