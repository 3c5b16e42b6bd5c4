"""Two gateway replicas (stateless HTTP) on two ports, one PostgreSQL journal.

Calls alternate between the replicas; then one replica is killed (SIGKILL, with its upstream)
while a call with effects is in flight: that call reads back `outcome_unknown` from the shared
journal, and the other replica keeps serving.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from gw_helpers import TOOLBRIDGE, free_port, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolbridge.runtime._journal_postgres import PostgresJournal

TOKEN = "replica-token-0123456789"
CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, tool:up_slow, effect:read] }
"""


def start_replica(manifest: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", str(port), "--stateless"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


async def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    with anyio.fail_after(60):
        while True:
            assert proc.poll() is None, f"replica on port {port} exited {proc.returncode}"
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
                await stream.aclose()
                return
            except OSError:
                await anyio.sleep(0.1)


@asynccontextmanager
async def connect(port: int) -> AsyncIterator[Client]:
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        yield client


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


async def test_two_replicas_one_journal_and_a_replica_killed_mid_call(
    tmp_path: Path, postgres_url: str
) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    env = {"ALICE_TOKEN": TOKEN, "JOURNAL_URL": postgres_url}
    ports = [free_port(), free_port()]
    replicas = [start_replica(manifest, port, env) for port in ports]
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        for i in range(6):
            async with connect(ports[i % 2]) as client:
                result = await client.call_tool("up_echo", {"text": f"call {i}"})
                assert result.content[0].text == f"call {i}"  # type: ignore[union-attr]

        # a call with effects in flight on replica 0 when it is killed
        started = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            started.set()

        async def slow_call() -> None:
            try:
                async with connect(ports[0]) as client:
                    await client.call_tool("up_slow", {}, progress_callback=on_progress)
            except Exception:  # the replica died under it: the client sees a failure
                return

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            with anyio.fail_after(30):
                await started.wait()
            kill_group(replicas[0])
        # the other replica keeps serving
        async with connect(ports[1]) as client:
            after = await client.call_tool("up_echo", {"text": "still serving"})
            assert after.content[0].text == "still serving"  # type: ignore[union-attr]
    finally:
        for proc in replicas:
            kill_group(proc)

    journal = PostgresJournal.open_existing(postgres_url)
    try:
        runs = [journal.get_run(r.run_id) for r in journal.list_runs(50)]
    finally:
        journal.close()
    assert all(r is not None and r.principal == "alice" for r in runs)
    slow = [r for r in runs if r is not None and any(c.tool_id == "up_slow" for c in r.calls)]
    assert len(slow) == 1
    assert slow[0].outcome == "outcome_unknown"
    assert slow[0].calls[0].request_sent and not slow[0].calls[0].response_received
    echoes = [r for r in runs if r is not None and any(c.tool_id == "up_echo" for c in r.calls)]
    assert len(echoes) == 7 and all(r.outcome == "succeeded" for r in echoes)
    assert {r.pid for r in echoes} == {replicas[0].pid, replicas[1].pid}  # both replicas wrote
    assert slow[0].pid == replicas[0].pid and slow[0].interrupted
