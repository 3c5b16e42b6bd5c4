"""A replica killed mid-call: another replica's reaper settles its run (leases, `runtime._leases`).

Two `--stateless` replicas on one PostgreSQL, leases of 2 s (`TOOLBRIDGE_LEASE_S`). A call with
effects is in flight on replica 0 when it is SIGKILLed; replica 1's keeper finds the expired lease
and writes the run's end into the journal (stored, not merely read back by a reader on the
same host): the call `outcome_unknown`, the run `outcome_unknown`.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc
from gw_helpers import free_port, upstream_manifest
from test_gateway_replicas import CLIENTS, TOKEN, connect, kill_group, start_replica, wait_listening

from toolbridge.runtime import PostgresJournal
from toolbridge.runtime._journal import RunRecord


async def slow_call_started(tg: anyio.abc.TaskGroup, port: int) -> None:
    """Start an `up_slow` call through `port` in `tg`; return once the upstream is running it
    (its first progress). The call ends quietly when the process serving it dies."""
    started = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async def slow_call() -> None:
        try:
            async with connect(port) as client:
                await client.call_tool("up_slow", {}, progress_callback=on_progress)
        except Exception:  # the replica died under it
            return

    tg.start_soon(slow_call)
    with anyio.fail_after(30):
        await started.wait()


async def settled_slow_run(url: str) -> RunRecord:
    """The `up_slow` run once a reaper stored its end (not merely read back as interrupted)."""
    with anyio.fail_after(60):  # a hang guard: leases of 2 s, a reaper ticks every 0.7 s
        while True:
            record = await anyio.to_thread.run_sync(slow_run, url)
            if record is not None and record.outcome != "running" and not record.interrupted:
                return record
            await anyio.sleep(0.2)


def slow_run(url: str) -> RunRecord | None:
    journal = PostgresJournal.open_existing(url)
    try:
        for r in journal.list_runs(50):
            record = journal.get_run(r.run_id)
            if record is not None and any(c.tool_id == "up_slow" for c in record.calls):
                return record
        return None
    finally:
        journal.close()


async def test_a_killed_replicas_call_is_settled_by_the_other(tmp_path: Path, postgres_url: str) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    env = {"ALICE_TOKEN": TOKEN, "JOURNAL_URL": postgres_url, "TOOLBRIDGE_LEASE_S": "2"}
    ports = [free_port(), free_port()]
    replicas = [start_replica(manifest, port, env) for port in ports]
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        async with anyio.create_task_group() as tg:
            await slow_call_started(tg, ports[0])
            kill_group(replicas[0])
        settled = await settled_slow_run(postgres_url)
        async with connect(ports[1]) as client:  # and replica 1 keeps serving
            after = await client.call_tool("up_echo", {"text": "still serving"})
            assert after.content[0].text == "still serving"  # type: ignore[union-attr]
    finally:
        for proc in replicas:
            kill_group(proc)
    assert settled.pid == replicas[0].pid
    assert (settled.outcome, settled.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    call = settled.calls[0]
    assert (call.outcome, call.error_code, call.request_sent) == ("outcome_unknown", "OUTCOME_UNKNOWN", True)
    assert settled.ended_at is not None
