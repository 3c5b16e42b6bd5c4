"""Cumulative quotas per identity (`clients[].quota`), held in the shared journal.

SQLite: the cap holds across calls and across a gateway restart, each refusal journaled with the
tool and its code. PostgreSQL: three `--stateless` replicas (real processes) on one database,
one identity's calls spread over them concurrently: exactly `maxCalls` succeed.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from gw_helpers import calls_of, gateway_stdio, journal_calls, upstream_manifest
from test_gateway_replicas import TOKEN, connect, kill_group, start_replica, wait_listening

from toolbridge.errors import ConfigError
from toolbridge.manifest import load_manifest
from toolbridge.runtime import PostgresJournal

ENV = {"ALICE_TOKEN": TOKEN}


def quota_clients(quota: str, *, local: bool, limits: str = "") -> str:
    how = "local: true" if local else 'token: "${{ secrets.aliceToken }}"'
    return f"""clients:
  - name: alice
    {how}
    permissions: {{ allow: [tool:up_echo, effect:read] }}
    {limits}
    quota: {quota}
"""


def codes(result: object) -> str | None:
    meta = getattr(result, "meta", None)
    return None if meta is None else meta.get("toolbridge/code")


async def test_a_call_quota_holds_across_calls_and_restarts(tmp_path: Path) -> None:
    manifest = upstream_manifest(
        tmp_path,
        clients=quota_clients("{ period: day, maxCalls: 3 }", local=True),
        binding="    effects: read\n",
    )
    got = []
    async with gateway_stdio(manifest) as client:
        for i in range(4):
            got.append(await client.call_tool("up_echo", {"text": f"c{i}"}))
    async with gateway_stdio(manifest) as client:  # a new process: the count is in the journal
        got.append(await client.call_tool("up_echo", {"text": "after restart"}))
    assert [codes(r) for r in got] == [None, None, None, "LIMIT_EXCEEDED", "LIMIT_EXCEEDED"]
    assert [r.is_error for r in got] == [False, False, False, True, True]
    assert calls_of(tmp_path).count("echo") == 3
    rows = journal_calls(tmp_path)
    assert rows[3:] == [("alice", "up_echo", "not_started", "LIMIT_EXCEEDED", False)] * 2
    assert [r[2] for r in rows[:3]] == ["succeeded"] * 3


async def test_a_cost_quota_reserves_each_calls_price(tmp_path: Path) -> None:
    manifest = upstream_manifest(
        tmp_path,
        clients=quota_clients(
            "{ period: total, maxCostMicros: 250 }", local=True, limits="limits: { maxCostMicros: 100 }"
        ),
        binding="    effects: read\n    costMicros: 100\n",
    )
    async with gateway_stdio(manifest) as client:
        got = [await client.call_tool("up_echo", {"text": f"c{i}"}) for i in range(4)]
    assert [codes(r) for r in got] == [None, None, "BUDGET_EXCEEDED", "BUDGET_EXCEEDED"]
    assert calls_of(tmp_path).count("echo") == 2
    rows = journal_calls(tmp_path)
    assert rows[2:] == [("alice", "up_echo", "not_started", "BUDGET_EXCEEDED", False)] * 2


@pytest.mark.parametrize(
    "quota",
    ["{ period: week }", "{ maxCalls: -1 }", "{ maxCalls: '3' }", "{ maxCalls: 3, burst: 9 }", "[1, 2]"],
)
def test_a_bad_quota_is_refused_by_the_manifest(tmp_path: Path, quota: str) -> None:
    manifest = upstream_manifest(tmp_path, clients=quota_clients(quota, local=True))
    with pytest.raises(ConfigError) as info:
        load_manifest(manifest)
    assert "quota" in str(info.value)


async def test_three_replicas_on_one_postgres_enforce_one_cap(tmp_path: Path, postgres_url: str) -> None:
    cap, calls = 7, 30
    manifest = upstream_manifest(
        tmp_path,
        clients=quota_clients(f"{{ period: day, maxCalls: {cap} }}", local=False),
        binding="    effects: read\n",
    )
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    env = {**ENV, "JOURNAL_URL": postgres_url}
    from gw_helpers import free_port

    ports = [free_port() for _ in range(3)]
    replicas = [start_replica(manifest, port, env) for port in ports]
    answers: list[str | None] = []
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)

        async def one(i: int) -> None:
            async with connect(ports[i % 3]) as client:
                result = await client.call_tool("up_echo", {"text": f"c{i}"})
                answers.append(codes(result) if result.is_error else "ok")

        async with anyio.create_task_group() as tg:
            for i in range(calls):
                tg.start_soon(one, i)
    finally:
        for proc in replicas:
            kill_group(proc)
    assert answers.count("ok") == cap
    assert answers.count("LIMIT_EXCEEDED") == calls - cap
    assert calls_of(tmp_path).count("echo") == cap
    journal = PostgresJournal.open_existing(postgres_url)
    try:
        runs = [journal.get_run(r.run_id) for r in journal.list_runs(100)]
    finally:
        journal.close()
    rows = [(c.outcome, c.error_code, c.request_sent) for r in runs if r is not None for c in r.calls]
    expected = [("succeeded", None, True)] * cap + [("not_started", "LIMIT_EXCEEDED", False)] * (calls - cap)
    assert sorted(rows, key=str) == sorted(expected, key=str)
    assert {r.pid for r in runs if r is not None} == {p.pid for p in replicas}  # all three served
