"""Quota counters in the journal (`runtime._budgets`), on SQLite and PostgreSQL alike.

Many writers (threads, each with its own connection) race for the last calls and micro-units of
one principal's window: exactly the cap is admitted, never more. An SQLite journal written before
quotas gains the table when a writer opens it.
"""

from __future__ import annotations

import calendar
import sqlite3
import threading
from pathlib import Path

import pytest

from toolbridge.errors import ConfigError
from toolbridge.runtime import Journal, MemoryJournal, PostgresJournal, Quota
from toolbridge.runtime._budgets import period_key
from toolbridge.runtime._journal import JournalBackend


def writer(spec: str) -> JournalBackend:
    return PostgresJournal(spec) if spec.startswith("postgresql://") else Journal(spec)


def race(spec: str, *, writers: int, tries: int, ceiling: int, max_calls: int, max_micros: int) -> int:
    journals = [writer(spec) for _ in range(writers)]
    admitted: list[bool] = []
    start = threading.Barrier(writers)

    def run(j: JournalBackend) -> None:
        start.wait(timeout=60)
        for _ in range(tries):
            admitted.append(j.reserve_quota("alice", "2026-12-02", ceiling, max_calls, max_micros))

    threads = [threading.Thread(target=run, args=(j,)) for j in journals]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for j in journals:
        j.close()
    return sum(admitted)


def test_racing_writers_admit_exactly_the_call_cap(journal_spec: str) -> None:
    assert race(journal_spec, writers=4, tries=10, ceiling=0, max_calls=13, max_micros=2**62) == 13
    j = writer(journal_spec)
    try:
        used = j.quota_usage("alice", "2026-12-02")
        assert used is not None and used.calls == 13
        assert j.quota_usage("bob", "2026-12-02") is None  # another principal: its own counters
    finally:
        j.close()


def test_racing_writers_admit_exactly_the_cost_cap_and_settle(journal_spec: str) -> None:
    assert race(journal_spec, writers=4, tries=10, ceiling=30, max_calls=2**62, max_micros=250) == 8
    j = writer(journal_spec)
    try:
        for _ in range(8):  # each call cost 10 of its 30 reserved
            j.settle_quota("alice", "2026-12-02", 30, 10, 0)
        used = j.quota_usage("alice", "2026-12-02")
        assert used is not None and (used.calls, used.spent_micros, used.reserved_micros) == (8, 80, 0)
        assert j.reserve_quota("alice", "2026-12-02", 170, 2**62, 250)  # 80 + 170 = 250 fits
        assert not j.reserve_quota("alice", "2026-12-02", 1, 2**62, 250)
        j.settle_quota("alice", "2026-12-02", 170, 0, 1)  # refused before sending: call given back
        used = j.quota_usage("alice", "2026-12-02")
        assert used is not None and (used.calls, used.spent_micros, used.reserved_micros) == (8, 80, 0)
    finally:
        j.close()


def test_the_memory_journal_keeps_the_same_rules() -> None:
    j = MemoryJournal()
    assert [j.reserve_quota("a", "k", 0, 2, 10) for _ in range(3)] == [True, True, False]
    j.settle_quota("a", "k", 0, 0, 1)
    assert j.reserve_quota("a", "k", 0, 2, 10)


def test_an_sqlite_journal_written_before_quotas_gains_the_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, agent TEXT, profile TEXT NOT NULL, status TEXT NOT NULL,"
        " error_code TEXT, started_at REAL NOT NULL, ended_at REAL, cost_micros INTEGER NOT NULL DEFAULT 0,"
        " input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,"
        " model_calls INTEGER NOT NULL DEFAULT 0, pid INTEGER, host TEXT, proc_start TEXT);"
        "CREATE TABLE calls (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,"
        " call_id TEXT NOT NULL, step INTEGER, tool_id TEXT NOT NULL, tool_version TEXT,"
        " kind TEXT NOT NULL, effects TEXT NOT NULL,"
        " args_sha256 TEXT NOT NULL, args_bytes INTEGER NOT NULL DEFAULT 0,"
        " request_sent INTEGER NOT NULL DEFAULT 0, response_received INTEGER NOT NULL DEFAULT 0,"
        " outcome TEXT NOT NULL, error_code TEXT, planned_at REAL NOT NULL, sent_at REAL, ended_at REAL,"
        " cost_micros INTEGER NOT NULL DEFAULT 0);"
    )
    db.close()
    j = Journal(path)
    try:
        assert j.reserve_quota("alice", "total", 0, 1, 0)
        assert not j.reserve_quota("alice", "total", 0, 1, 0)
    finally:
        j.close()


def test_periods_are_fixed_utc_windows() -> None:
    t = float(calendar.timegm((2026, 12, 2, 3, 20, 0)))  # 2026-12-02T03:20:00Z
    assert [period_key(p, t) for p in ("hour", "day", "month", "total")] == [
        "2026-12-02T03",
        "2026-12-02",
        "2026-12",
        "total",
    ]
    with pytest.raises(ConfigError):
        Quota(period="week")
    with pytest.raises(ConfigError):
        Quota(max_calls=-1)
    with pytest.raises(ConfigError):
        Quota(max_cost_micros=True)
