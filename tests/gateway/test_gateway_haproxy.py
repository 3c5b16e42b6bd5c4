"""Replicas behind a real load balancer: haproxy (Debian's; `.ci/run` installs it) in front of three
`--stateless` gateway replicas on one PostgreSQL journal, leases of 2 s.

One identity with `quota: { period: day, maxCalls: 6 }`: a slow call in flight through haproxy,
the replica serving it SIGKILLed (found from the journal, by pid); then 20 calls through haproxy
at once: exactly the cap's remaining 5 succeed, whatever replica serves them (the killed one's
reservation stays charged), the others are refused `LIMIT_EXCEEDED`; the killed replica's run is
settled in the journal by another replica's reaper (`outcome_unknown`, stored, not read back);
haproxy routed around the dead replica (no call failed for it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from gw_helpers import calls_of, free_port, upstream_manifest
from test_gateway_leases import settled_slow_run, slow_call_started, slow_run
from test_gateway_quotas import codes
from test_gateway_replicas import TOKEN, connect, kill_group, start_replica, wait_listening

from toolbridge.runtime import PostgresJournal
from toolbridge.runtime._journal import RunRecord

CAP, CALLS = 6, 20
BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_replicas.py"


def start_haproxy(folder: Path, port: int, backends: list[int]) -> subprocess.Popen[bytes]:
    """haproxy as `bench/bench_replicas.py` starts it (one configuration for both)."""
    if not (shutil.which("haproxy") or os.path.exists("/usr/sbin/haproxy")):
        pytest.fail("haproxy is not installed: `apt-get install haproxy` (as .ci/run does)")
    spec = importlib.util.spec_from_file_location("bench_replicas", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    proc: subprocess.Popen[bytes] = bench.start_haproxy(folder, port, backends)
    return proc


async def routed(front: int) -> None:
    """Until haproxy routes to a replica: its health checks (`fall 1 rise 2`, every 300 ms) may have
    marked the replicas down while they started, and it answers 503 until two checks pass."""
    import httpx

    async with httpx.AsyncClient() as http:
        with anyio.fail_after(30):
            while True:
                if (await http.get(f"http://127.0.0.1:{front}/mcp")).status_code != 503:
                    return
                await anyio.sleep(0.1)


def runs(url: str) -> list[RunRecord]:
    journal = PostgresJournal.open_existing(url)
    try:
        return [r for r in (journal.get_run(x.run_id) for x in journal.list_runs(200)) if r is not None]
    finally:
        journal.close()


async def test_replicas_behind_haproxy_keep_one_cap_and_settle_a_killed_replicas_call(
    tmp_path: Path, postgres_url: str
) -> None:
    manifest = upstream_manifest(
        tmp_path,
        clients=f"""clients:
  - name: alice
    token: "${{{{ secrets.aliceToken }}}}"
    permissions: {{ allow: [tool:up_echo, tool:up_slow, effect:read] }}
    quota: {{ period: day, maxCalls: {CAP} }}
""",
        binding="    effects: read\n",
    )
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    env = {"ALICE_TOKEN": TOKEN, "JOURNAL_URL": postgres_url, "TOOLBRIDGE_LEASE_S": "2"}
    ports = [free_port() for _ in range(3)]
    front = free_port()
    replicas = [start_replica(manifest, port, env) for port in ports]
    balancer = start_haproxy(tmp_path, front, ports)
    answers: list[str | None] = []
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        await wait_listening(front, balancer)
        await routed(front)
        async with anyio.create_task_group() as tg:
            await slow_call_started(tg, front)
            running = await anyio.to_thread.run_sync(slow_run, postgres_url)
            assert running is not None and running.outcome == "running"
            (victim,) = [p for p in replicas if p.pid == running.pid]
            kill_group(victim)

        async def one(i: int) -> None:
            async with connect(front) as client:
                result = await client.call_tool("up_echo", {"text": f"c{i}"})
                answers.append(codes(result) if result.is_error else "ok")

        async with anyio.create_task_group() as tg:
            for i in range(CALLS):
                tg.start_soon(one, i)
        settled = await settled_slow_run(postgres_url)
    finally:
        if balancer.poll() is None:
            os.killpg(balancer.pid, signal.SIGTERM)
            balancer.wait(timeout=10)
        for proc in replicas:
            kill_group(proc)
    assert answers.count("ok") == CAP - 1  # the killed replica's call holds one reservation
    assert answers.count("LIMIT_EXCEEDED") == CALLS - CAP + 1
    assert calls_of(tmp_path).count("echo") == CAP - 1
    assert settled.pid == victim.pid
    assert (settled.outcome, settled.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    assert settled.calls[0].outcome == "outcome_unknown" and settled.calls[0].request_sent
    served = {r.pid for r in await anyio.to_thread.run_sync(runs, postgres_url)}
    assert served - {victim.pid} == {p.pid for p in replicas} - {victim.pid}  # both survivors served
