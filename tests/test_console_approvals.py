"""The approval store over a real journal database (SQLite file and PostgreSQL): decided once,
readers never write, hostile values kept as data."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from toolbridge.console import MAX_REASON, ApprovalStore
from toolbridge.errors import ConfigError


async def ask(store: ApprovalStore, **arguments: object) -> str:
    row = await store.ask(
        gateway="g",
        identity="alice",
        server="Fs",
        tool="fs_write",
        effects="write",
        arguments=arguments,
        args_sha256="0" * 64,
        timeout_s=60,
    )
    return row.id


async def test_decided_once_by_one_of_many_at_once(journal_spec: str) -> None:
    writer = ApprovalStore(journal_spec)
    other = ApprovalStore(journal_spec)  # another replica's console
    try:
        approval_id = await ask(writer, path="</td><script>alert(1)</script>", n=1)
        (pending,) = await other.pending()
        assert pending.arguments == {"path": "</td><script>alert(1)</script>", "n": 1}
        wins: list[bool] = []

        async def decide(store: ApprovalStore, approve: bool) -> None:
            wins.append(await store.decide(approval_id, by="olga", approve=approve, reason="x" * 900))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(decide, writer if i % 2 else other, i % 2 == 0)
        assert wins.count(True) == 1
        assert not await writer.expire(approval_id) and not await writer.withdraw(approval_id)
        row = await writer.get(approval_id)
        assert row is not None and row.status in ("approved", "denied") and row.decided_by == "olga"
        assert row.arguments is None and row.reason == "x" * MAX_REASON
        assert await writer.pending() == [] and [r.id for r in await writer.recent()] == [approval_id]
    finally:
        writer.close()
        other.close()


async def test_a_reader_never_writes_nor_creates(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    sqlite3.connect(path).close()
    reader = ApprovalStore(str(path), readonly=True)
    try:
        assert await reader.pending() == []  # no table yet: nothing pending, nothing created
        with pytest.raises(ConfigError):
            await reader.decide("x", by="olga", approve=True)
    finally:
        reader.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
    writer = ApprovalStore(str(path))
    approval_id = await ask(writer, text="hi")
    writer.close()
    reader = ApprovalStore(str(path), readonly=True)
    try:
        assert [r.id for r in await reader.pending()] == [approval_id]
        with pytest.raises(ConfigError):  # read-only at the database too, not only here
            await reader._execute("DELETE FROM toolbridge_approvals")
    finally:
        reader.close()
