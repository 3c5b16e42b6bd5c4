"""The batch store's awaited claims and finishes (what the driver uses), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import anyio

from toolbridge.batch._driver import open_journal
from toolbridge.batch._store import Item, open_store


async def test_concurrent_claims_never_spend_the_batch_budget_twice(journal_spec: str) -> None:
    journal = open_journal(journal_spec)
    store = open_store(journal)
    items = [Item(key=json.dumps(i), id=i, line=i + 1, input="x", sha256="0" * 64) for i in range(40)]
    store.add_items("ab", items)
    store.open_budget("ab", 100)  # room for 10 reservations of 10
    claimed: list[str] = []

    async def claim(item: Item) -> None:
        got = await store.aclaim("ab", item.key, f"run-{item.id}", 1, 10)
        if got == "claimed":
            claimed.append(item.key)
            await store.afinish("ab", item.key, "ended", {"id": item.id, "outcome": "succeeded"}, 7)
        else:
            assert got == "budget"

    async with anyio.create_task_group() as tg:
        for item in items:
            tg.start_soon(claim, item)
    # each reservation of 10 settled at 7: at least 10 fit, and never more than the budget holds
    budget = store.budget("ab")
    assert budget is not None and budget["reserved_micros"] == 0
    assert budget["spent_micros"] == 7 * len(claimed) <= 100
    assert len(claimed) >= 10
    states = {s.key: s.state for s in store.items("ab")}
    assert sorted(k for k, v in states.items() if v == "ended") == sorted(claimed)
    assert all(v == "skipped" for k, v in states.items() if k not in claimed)
    # a finished item is never claimed again
    assert await store.aclaim("ab", claimed[0], "run-again", 2, 0) == "taken"
    store.close()
    journal.close()
