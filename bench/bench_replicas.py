"""Gateway replicas behind haproxy on one PostgreSQL journal: throughput, one cap, a replica killed.

    python bench/bench_replicas.py --postgres postgresql://...   # or TOOLBRIDGE_TEST_POSTGRES_URL
    python bench/bench_replicas.py --replicas 3 --clients 16 --seconds 5 --quick

Needs `haproxy` (Debian: `apt-get install haproxy`) and a PostgreSQL server (`bash .ci/pg.sh start
DIR` prints a URL). Each phase starts `--replicas` `toolbridge gateway --transport http --stateless`
processes on a fresh database, in front of `bench_servers.py sleep` (a Python SDK server whose
`sleep(ms)` waits `--sleep-ms`, 50 by default, so calls are in flight), with haproxy round-robin in
front (health checks every 300 ms, `option redispatch`). `--clients` SDK clients (`legacy` era, one
connection each) call `up_sleep` back to back through haproxy for `--seconds`.

1. **throughput**: calls per second through haproxy over N replicas, and through one replica
   directly (no haproxy), same load generator; no quota.
2. **one cap across replicas**: the identity has `quota: { period: day, maxCalls: 20 }`; 60 calls
   through haproxy from `--clients` clients at once; the figure is how many succeeded (must be 20
   exactly, the other 40 refused `LIMIT_EXCEEDED`) and the calls per second of the phase.
3. **a replica killed mid-load** (twice `--seconds`): halfway through, one replica is SIGKILLed;
   the figures are the calls clients saw fail, the runs it left `running`, and how long until
   another replica's reaper settled them all (leases of `TOOLBRIDGE_LEASE_S`, 2 s here; 30 s by
   default: expect up to lease + a third of it).

One load generator on the same machine as everything else: its CPU limits every column alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
TOKEN = "bench-token-0123456789abcdef"
MANIFEST = """kind: Gateway
metadata: {{ name: Bench }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Up
    prefix: up_
    effects: read
clients:
  - name: alice
    token: "${{{{ secrets.aliceToken }}}}"
    permissions: {{ allow: [tool:up_sleep, effect:read] }}
{quota}
---
kind: Runtime
metadata: {{ name: Policy }}
profile: durable
journal: "${{{{ secrets.journalUrl }}}}"
permissions: {{ allow: [] }}
---
kind: Mcp.StdioClient
metadata: {{ name: UpMcp }}
command: {python}
args: [{server}, sleep]
mode: legacy
---
kind: AiMcp.ToolProvider
metadata: {{ name: Up }}
client: !ref UpMcp
"""
HAPROXY = """global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
frontend mcp
    bind 127.0.0.1:{port}
    default_backend gateways
backend gateways
    balance roundrobin
    default-server check inter 300ms fall 1 rise 2
{servers}
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_CREATED: list[str] = []
"""The databases this run created (dropped at its end)."""


def fresh_database(server_url: str) -> str:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = f"tb_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    _CREATED.append(name)
    parts = conninfo_to_dict(server_url)
    auth = parts.get("user", "postgres") + (f":{parts['password']}" if parts.get("password") else "")
    return f"postgresql://{auth}@{parts.get('host', '127.0.0.1')}:{parts.get('port', '5432')}/{name}"


def wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process for port {port} exited ({proc.returncode})")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(timeout=10)


def start_haproxy(folder: Path, port: int, backends: list[int]) -> subprocess.Popen[bytes]:
    """haproxy in the foreground (`-db`, its own session), round robin over `backends` on
    127.0.0.1, health-checked every 300 ms; the caller ends it (SIGTERM to its group)."""
    cfg = folder / "haproxy.cfg"
    servers = "\n".join(f"    server g{i} 127.0.0.1:{p}" for i, p in enumerate(backends))
    cfg.write_text(HAPROXY.format(port=port, servers=servers), encoding="utf-8")
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return subprocess.Popen(
        [binary, "-db", "-f", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextlib.contextmanager
def cluster(folder: Path, db: str, replicas: int, quota: str) -> Iterator[tuple[int, list[Any], list[int]]]:
    """(haproxy's port, the replica processes, their ports)."""
    manifest = folder / "gateway.yaml"
    text = MANIFEST.format(
        quota=f"    quota: {quota}" if quota else "",
        python=json.dumps(sys.executable),
        server=json.dumps(str(HERE / "bench_servers.py")),
    )
    manifest.write_text(text, encoding="utf-8")
    env = {**os.environ, "ALICE_TOKEN": TOKEN, "JOURNAL_URL": db, "TOOLBRIDGE_LEASE_S": "2"}
    ports = [free_port() for _ in range(replicas)]
    procs: list[subprocess.Popen[bytes]] = []
    balancer = None
    try:
        for port in ports:
            cmd = [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", str(port)]
            procs.append(
                subprocess.Popen(
                    [*cmd, "--stateless"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        for port, proc in zip(ports, procs, strict=True):
            wait_port(port, proc)
        front = free_port()
        balancer = start_haproxy(folder, front, ports)
        wait_port(front, balancer)
        time.sleep(1)  # haproxy's health checks see every replica up
        for port in ports if not quota else ():  # each replica's upstream started, pools warm
            anyio.run(load, port, 2, 0.5, 1)
        yield front, procs, ports
    finally:
        if balancer is not None:
            kill(balancer, signal.SIGTERM)
        for proc in procs:
            kill(proc)


async def load(port: int, clients: int, seconds: float, sleep_ms: int, on_half: Any = None) -> dict[str, int]:
    """`clients` SDK clients calling `up_sleep` back to back for `seconds`: counts by answer."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    counts = {"ok": 0, "refused": 0, "failed": 0}
    stop_at = time.perf_counter() + seconds
    half = anyio.Event()

    async def one() -> None:
        while time.perf_counter() < stop_at:
            try:
                async with (
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
                    Client(
                        streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),  # type: ignore[arg-type]
                        mode="legacy",
                    ) as client,
                ):
                    while time.perf_counter() < stop_at:
                        result = await client.call_tool("up_sleep", {"ms": sleep_ms})
                        counts["refused" if result.is_error else "ok"] += 1
            except Exception:
                counts["failed"] += 1

    async def halfway() -> None:
        await anyio.sleep(seconds / 2)
        if on_half is not None:
            await anyio.to_thread.run_sync(on_half)
        half.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(halfway)
        for _ in range(clients):
            tg.start_soon(one)
    return counts


async def fixed(port: int, clients: int, total: int, sleep_ms: int) -> dict[str, int]:
    """`total` calls of `up_sleep` through `clients` SDK clients at once: counts by answer."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    counts = {"ok": 0, "refused": 0, "failed": 0}
    left = [total]

    async def one() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),  # type: ignore[arg-type]
                mode="legacy",
            ) as client,
        ):
            while left[0] > 0:
                left[0] -= 1
                try:
                    result = await client.call_tool("up_sleep", {"ms": sleep_ms})
                except Exception:
                    counts["failed"] += 1
                    continue
                counts["refused" if result.is_error else "ok"] += 1

    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(one)
    return counts


def running_of(db: str, pid: int) -> int:
    from toolbridge.runtime import PostgresJournal

    journal = PostgresJournal.open_existing(db)
    try:
        with journal._conn(write=False) as conn:
            row = conn.execute(
                "SELECT count(*) FROM toolbridge_runs WHERE pid = %s AND status = 'running'", (pid,)
            ).fetchone()
        return int(row[0])
    finally:
        journal.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("TOOLBRIDGE_TEST_POSTGRES_URL", ""))
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sleep-ms", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="3 s per phase")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.postgres:
        parser.error("--postgres URL (or TOOLBRIDGE_TEST_POSTGRES_URL) is required")
    seconds = 3.0 if args.quick else args.seconds
    try:
        out = measure(args, seconds)
    finally:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as admin:
            for name in _CREATED:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:32} {value}")
    return 0


def measure(args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    """The three phases (see the module docs)."""
    out: dict[str, Any] = {"replicas": args.replicas, "clients": args.clients, "seconds": seconds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with cluster(folder, fresh_database(args.postgres), 1, "") as (_, _, ports):
            c = anyio.run(load, ports[0], args.clients, seconds, args.sleep_ms)
            out["direct_one_replica_per_s"] = round(c["ok"] / seconds, 1)
        with cluster(folder, fresh_database(args.postgres), args.replicas, "") as (front, _, _):
            c = anyio.run(load, front, args.clients, seconds, args.sleep_ms)
            out["haproxy_per_s"] = round(c["ok"] / seconds, 1)
        cap, total = 20, 60
        quota = f"{{ period: day, maxCalls: {cap} }}"
        with cluster(folder, fresh_database(args.postgres), args.replicas, quota) as (front, _, _):
            began = time.perf_counter()
            c = anyio.run(fixed, front, args.clients, total, args.sleep_ms)
            out["cap"] = cap
            out["cap_calls"] = total
            out["cap_succeeded"] = c["ok"]
            out["cap_refused"] = c["refused"]
            out["cap_failed"] = c["failed"]
            out["cap_calls_per_s"] = round(total / (time.perf_counter() - began), 1)
        db = fresh_database(args.postgres)
        with cluster(folder, db, args.replicas, "") as (front, procs, _):
            victim = procs[0]
            seen: dict[str, float] = {}

            def kill_one() -> None:
                killed_at = time.monotonic()
                kill(victim)
                seen["in_flight"] = left = running_of(db, victim.pid)
                while left and time.monotonic() - killed_at < 60:
                    time.sleep(0.1)
                    left = running_of(db, victim.pid)
                seen["left"] = left
                seen["settled_s"] = time.monotonic() - killed_at

            c = anyio.run(load, front, args.clients, seconds * 2, args.sleep_ms, kill_one)
            out["kill_ok"] = c["ok"]
            out["kill_failed_calls"] = c["failed"] + c["refused"]
            out["kill_runs_in_flight"] = int(seen["in_flight"])
            out["kill_runs_left_running"] = int(seen["left"])
            out["kill_settled_after_s"] = round(seen["settled_s"], 1)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
