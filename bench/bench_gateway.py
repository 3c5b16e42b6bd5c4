"""What the gateway costs: latency per call over stdio, throughput of 32 HTTP clients, idle session memory.

    python bench/bench_gateway.py            # full run (creates bench/.venvs/fastmcp if missing)
    python bench/bench_gateway.py --quick    # fewer rounds
    python bench/bench_gateway.py --no-peers # without fastmcp's proxy
    python bench/bench_gateway.py --sessions 0 # without the idle-session memory section
    python bench/bench_gateway.py --quick --no-peers --no-stdio --sessions 0  # HTTP throughput only, ~30 s
    python bench/bench_gateway.py --speedups-ab  # the gateway also with TOOLBRIDGE_SPEEDUPS=off, interleaved

Everything is measured in the same run, on the same machine, against server-everything's `echo`:

1. **latency, stdio**: the official SDK client (`mcp.Client`, in this process) calls `echo`
   directly on server-everything over stdio, through `toolbridge gateway` over stdio (upstream:
   server-everything over stdio; an ephemeral runtime, so the journal is in memory; every call
   governed: grant check, one governed session, three journal writes), and through fastmcp's
   `FastMCP.as_proxy` over stdio (the peer: no policy). Rounds are interleaved (direct, gateway,
   proxy, direct, ...); the figure is the median over rounds of (the path's median in the round -
   the direct median in the same round): the time the middle process adds. Target: the gateway
   adds <= 0.5 ms. Beside it: each middle process's own CPU per call (from /proc, which the
   machine's load does not inflate the way it inflates latency), and a reference row, a Python
   SDK server (`bench_servers.py echo`) that answers `echo` itself: what one hop through a Python
   SDK server costs with no upstream behind it.
2. **throughput, Streamable HTTP, 32 concurrent clients**: 32 SDK clients (each its own
   connection, `legacy` era) call `echo` back to back for a fixed time against server-everything
   over HTTP (direct), `toolbridge gateway --transport http` (upstream: server-everything over
   stdio) and fastmcp's proxy over HTTP (upstream the same). The figure is calls per second; the
   ratio the median over rounds of the per-round ratio to direct. Target: the gateway >= 70 % of
   direct. The load generator is one Python process on the same machine: its own CPU limits every
   column alike. Beside it, each middle process's own CPU per call (from /proc, as above).
3. **memory per idle session, Streamable HTTP**: the resident set (`VmRSS` from /proc) of the
   gateway (and of fastmcp's proxy) before and after `--sessions` SDK clients (`legacy` era, each
   its own session, initialized and then left idle) are connected; the figure is the growth divided
   by the number of sessions. No target in the issue; a budget operators can size
   `maxSessions` / `maxSessionsPerIdentity` with.

With `--speedups-ab`, every section also runs a second gateway with `TOOLBRIDGE_SPEEDUPS=off`
(the stdlib's asyncio loop and h11 instead of uvloop and httptools, the `fast` extra), in the
same rounds, interleaved with the first: an A/B of the speedups in one run. Without the extra
installed both gateways run the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EVERYTHING_JS = (
    ROOT
    / "tests"
    / "servers"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
FASTMCP_PYTHON = HERE / ".venvs" / "fastmcp" / "bin" / "python"
PROXY = HERE / "fastmcp_proxy.py"
TARGET_ADDED_MS = 0.5
GATEWAY = "toolbridge gateway (governed)"
GATEWAY_OFF = "toolbridge gateway (governed, TOOLBRIDGE_SPEEDUPS=off)"
SPEEDUPS_OFF = {"TOOLBRIDGE_SPEEDUPS": "off"}
TARGET_THROUGHPUT = 0.70

MANIFEST = """kind: Gateway
metadata: {{ name: Bench }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Everything
    effects: none
    include: [echo]
---
kind: Runtime
metadata: {{ name: Policy }}
permissions: {{ allow: ["tool:echo"] }}
limits: {{ maxDurationMs: 600000 }}
---
kind: Mcp.StdioClient
metadata: {{ name: EverythingMcp }}
command: node
args: [{everything}, stdio]
mode: legacy
---
kind: AiMcp.ToolProvider
metadata: {{ name: Everything }}
client: !ref EverythingMcp
"""


@dataclass
class Config:
    rounds: int = 7
    calls: int = 200
    clients: int = 32
    seconds: float = 4.0
    peers: bool = True
    http: bool = True
    stdio: bool = True
    sessions: int = 200
    speedups_ab: bool = False


@dataclass
class Results:
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ensure_fastmcp() -> bool:
    if not FASTMCP_PYTHON.exists():
        print("creating bench/.venvs/fastmcp (requirements-fastmcp.txt) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(HERE / ".venvs" / "fastmcp")], check=True)
        subprocess.run(
            [str(FASTMCP_PYTHON), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements-fastmcp.txt")],
            check=True,
        )
    return FASTMCP_PYTHON.exists()


def write_manifest(folder: Path, name: str = "gateway.yaml") -> Path:
    """The bench's manifest in `folder`; the A/B's second gateway reads a copy of another name,
    so that each gateway process is told apart by its command line (its CPU from /proc)."""
    path = folder / name
    path.write_text(MANIFEST.format(everything=json.dumps(str(EVERYTHING_JS))), encoding="utf-8")
    return path


def gateways(manifest: Path, ab: bool) -> list[tuple[str, Path, dict[str, str]]]:
    """(row name, manifest, extra environment) of each gateway to run: one, or the A/B's two."""
    out: list[tuple[str, Path, dict[str, str]]] = [(GATEWAY, manifest, {})]
    if ab:
        out.append((GATEWAY_OFF, write_manifest(manifest.parent, "gateway-speedups-off.yaml"), SPEEDUPS_OFF))
    return out


# ------------------------------------------------------------------------------------ stdio latency


Target = tuple[str, list[str], dict[str, str]]
"""(command, arguments, extra environment) of a stdio server."""


def stdio_targets(manifest: Path, peers: bool, ab: bool = False) -> dict[str, Target]:
    targets: dict[str, Target] = {"direct (server-everything)": ("node", [str(EVERYTHING_JS), "stdio"], {})}
    for name, path, env in gateways(manifest, ab):
        targets[name] = (TOOLBRIDGE, ["gateway", str(path)], env)
    targets["reference: a Python SDK server answering itself"] = (
        sys.executable,
        [str(HERE / "bench_servers.py"), "echo"],
        {},
    )
    if peers:
        targets["fastmcp FastMCP.as_proxy"] = (
            str(FASTMCP_PYTHON),
            [str(PROXY), str(EVERYTHING_JS), "stdio"],
            {},
        )
    return targets


@contextlib.asynccontextmanager
async def stdio_clients(targets: dict[str, Target]) -> AsyncIterator[dict[str, Any]]:
    from mcp import Client, StdioServerParameters

    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for name, (command, args, env) in targets.items():
            params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
            clients[name] = await stack.enter_async_context(Client(params, mode="legacy"))  # type: ignore[arg-type]
        yield clients


async def one_round(client: Any, calls: int) -> float:
    """The median latency (µs) of `calls` sequential `echo` calls."""
    times: list[float] = []
    for i in range(calls):
        started = time.perf_counter()
        result = await client.call_tool("echo", {"message": f"m{i}"})
        times.append((time.perf_counter() - started) * 1e6)
        if result.is_error:
            raise RuntimeError(f"echo failed: {result.content}")
    return statistics.median(times)


def pid_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of process `pid` (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_cpu_s(marker: str) -> float | None:
    """CPU seconds (user + system) of this process's child whose command line contains `marker`."""
    me = str(os.getpid())
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == me and marker in cmdline:
            return (int(fields[11]) + int(fields[12])) / tick
    return None


async def latency_section(cfg: Config, manifest: Path, results: Results) -> None:
    targets = stdio_targets(manifest, cfg.peers, cfg.speedups_ab)
    markers = {name: " ".join(args[:2]) for name, (_, args, _) in targets.items()}
    cpu: dict[str, float] = {name: 0.0 for name in targets}
    per_round: dict[str, list[float]] = {name: [] for name in targets}
    async with stdio_clients(targets) as clients:
        for client in clients.values():  # warm up: connect upstreams, fill caches
            await one_round(client, 20)
        medians: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(cfg.rounds):
            for name, client in clients.items():
                before = child_cpu_s(markers[name])
                medians[name].append(await one_round(client, cfg.calls))
                after = child_cpu_s(markers[name])
                if before is not None and after is not None:
                    cpu[name] += after - before
                    per_round[name].append((after - before) / cfg.calls * 1e6)
    results.raw["middle_cpu_us_per_call"] = {
        name: cpu[name] / (cfg.rounds * cfg.calls) * 1e6 for name in targets
    }
    results.raw["middle_cpu_us_per_call_by_round"] = per_round
    direct_name = next(iter(targets))
    direct = medians[direct_name]
    results.raw["stdio_medians_us"] = medians
    results.rows.append(
        (
            "latency, stdio (SDK client)",
            direct_name,
            f"{statistics.median(direct):,.0f} µs (server CPU: "
            f"{results.raw['middle_cpu_us_per_call'][direct_name]:,.0f} µs per call)",
            "",
            "",
        )
    )
    for name, values in medians.items():
        if name == direct_name:
            continue
        added = statistics.median(v - d for v, d in zip(values, direct, strict=True)) / 1000
        is_gateway = name.startswith("toolbridge")
        target = f"<= {TARGET_ADDED_MS} ms added" if is_gateway else ""
        met = ("yes" if added <= TARGET_ADDED_MS else "**no**") if is_gateway else ""
        if name.startswith("reference"):
            target = "(no upstream: what one Python SDK server hop costs)"
        cpu_us = results.raw["middle_cpu_us_per_call"][name]
        results.rows.append(
            (
                "latency, stdio (SDK client)",
                name,
                f"{statistics.median(values):,.0f} µs, **{added:+.3f} ms** added "
                f"(its own CPU: {cpu_us:,.0f} µs per call)",
                target,
                met,
            )
        )


# -------------------------------------------------------------------------------- HTTP throughput


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen within 60 s") from None
            time.sleep(0.1)


class Urls(dict[str, str]):
    """Each server's URL by name; `pids` holds each server's process id."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: dict[str, int] = {}


@contextlib.contextmanager
def http_servers(manifest: Path, peers: bool, *, direct: bool = True, ab: bool = False) -> Iterator[Urls]:
    procs: list[subprocess.Popen[bytes]] = []
    urls = Urls()

    def start(name: str, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(proc)
        wait_port(port, proc, name)
        urls[name] = f"http://127.0.0.1:{port}/mcp"
        urls.pids[name] = proc.pid

    try:
        if direct:
            port = free_port()
            start(
                "direct (server-everything)",
                ["node", str(EVERYTHING_JS), "streamableHttp"],
                port,
                {"PORT": str(port)},
            )
        for name, path, env in gateways(manifest, ab):
            port = free_port()
            start(
                name,
                [TOOLBRIDGE, "gateway", str(path), "--transport", "http", "--port", str(port)],
                port,
                env,
            )
        if peers:
            port = free_port()
            start(
                "fastmcp FastMCP.as_proxy",
                [str(FASTMCP_PYTHON), str(PROXY), str(EVERYTHING_JS), "http", str(port)],
                port,
            )
        yield urls
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)


async def throughput_round(
    url: str, clients: int, seconds: float, pid: int | None = None
) -> tuple[float, float]:
    """Calls per second of `clients` concurrent SDK clients calling `echo` back to back, and the CPU
    seconds process `pid` (the server) spent meanwhile (0.0 without `pid`)."""
    from mcp import Client

    done = 0
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(Client(url, mode="legacy")) for _ in range(clients)]
        for session in sessions:  # warm up each connection
            await session.call_tool("echo", {"message": "warm"})
        stop_at = time.perf_counter() + seconds

        async def loop(session: Any) -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                result = await session.call_tool("echo", {"message": "x"})
                if result.is_error:
                    raise RuntimeError(f"echo failed: {result.content}")
                done += 1

        cpu_before = pid_cpu_s(pid) if pid is not None else None
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(loop, session)
        elapsed = time.perf_counter() - started
        cpu_after = pid_cpu_s(pid) if pid is not None else None
    cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else 0.0
    return done / elapsed, cpu


async def throughput_section(cfg: Config, manifest: Path, results: Results) -> None:
    with http_servers(manifest, cfg.peers, ab=cfg.speedups_ab) as urls:
        rates: dict[str, list[float]] = {name: [] for name in urls}
        cpu: dict[str, float] = {name: 0.0 for name in urls}
        calls: dict[str, float] = {name: 0.0 for name in urls}
        per_round: dict[str, list[float]] = {name: [] for name in urls}
        for _ in range(max(3, cfg.rounds // 2)):
            for name, url in urls.items():
                rate, cpu_s = await throughput_round(url, cfg.clients, cfg.seconds, urls.pids[name])
                rates[name].append(rate)
                cpu[name] += cpu_s
                calls[name] += rate * cfg.seconds
                per_round[name].append(cpu_s / (rate * cfg.seconds) * 1e6 if rate else 0.0)
    results.raw["http_calls_per_s"] = rates
    results.raw["http_cpu_us_per_call"] = {
        name: cpu[name] / calls[name] * 1e6 if calls[name] else 0.0 for name in urls
    }
    results.raw["http_cpu_us_per_call_by_round"] = per_round
    direct_name = next(iter(urls))
    direct = rates[direct_name]
    section = f"throughput, Streamable HTTP, {cfg.clients} concurrent clients"
    cpu_us = results.raw["http_cpu_us_per_call"]
    results.rows.append(
        (
            section,
            direct_name,
            f"{statistics.median(direct):,.0f} calls/s (server CPU: {cpu_us[direct_name]:,.0f} µs per call)",
            "",
            "",
        )
    )
    for name, values in rates.items():
        if name == direct_name:
            continue
        ratio = statistics.median(v / d for v, d in zip(values, direct, strict=True))
        is_gateway = name.startswith("toolbridge")
        target = f">= {TARGET_THROUGHPUT:.0%} of direct" if is_gateway else ""
        met = ("yes" if ratio >= TARGET_THROUGHPUT else "**no**") if is_gateway else ""
        results.rows.append(
            (
                section,
                name,
                f"{statistics.median(values):,.0f} calls/s, **{ratio:.0%}** of direct "
                f"(its own CPU: {cpu_us[name]:,.0f} µs per call)",
                target,
                met,
            )
        )


# ----------------------------------------------------------------------------- memory per idle session


def rss_kib(pid: int) -> int:
    """The resident set of process `pid` in KiB (`VmRSS`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


async def idle_sessions_growth_kib(url: str, pid: int, sessions: int) -> tuple[int, int]:
    """RSS (KiB) of `pid` with one warm session, and with `sessions` more idle ones open."""
    from mcp import Client

    async with contextlib.AsyncExitStack() as stack:
        warm = await stack.enter_async_context(Client(url, mode="legacy"))
        await warm.call_tool("echo", {"message": "warm"})
        await anyio.sleep(0.5)
        before = rss_kib(pid)
        for _ in range(sessions):
            await stack.enter_async_context(Client(url, mode="legacy"))
        await anyio.sleep(0.5)
        after = rss_kib(pid)
    return before, after


async def memory_section(cfg: Config, manifest: Path, results: Results) -> None:
    with http_servers(manifest, cfg.peers, direct=False, ab=cfg.speedups_ab) as urls:
        section = f"memory per idle session, Streamable HTTP ({cfg.sessions} sessions)"
        raw: dict[str, dict[str, int]] = {}
        for name, url in urls.items():
            pid = int(urls.pids[name])
            before, after = await idle_sessions_growth_kib(url, pid, cfg.sessions)
            raw[name] = {"rss_before_kib": before, "rss_after_kib": after}
            per = (after - before) / cfg.sessions
            results.rows.append(
                (
                    section,
                    name,
                    f"{per:,.1f} KiB per session (RSS {before / 1024:,.0f} -> {after / 1024:,.0f} MiB)",
                    "",
                    "",
                )
            )
    results.raw["idle_session_rss"] = raw


# ------------------------------------------------------------------------------------------ main


def render(results: Results) -> str:
    lines = ["| section | path | value | target | met |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in results.rows]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines.append("")
    lines.append(f"nproc: {os.cpu_count()}; load average at the end: {load}")
    return "\n".join(lines)


async def run(cfg: Config) -> Results:
    results = Results()
    if cfg.peers:
        cfg.peers = ensure_fastmcp()
    with tempfile.TemporaryDirectory(prefix="tb-bench-gateway-") as tmp:
        manifest = write_manifest(Path(tmp))
        if cfg.stdio:
            await latency_section(cfg, manifest, results)
        if cfg.http:
            await throughput_section(cfg, manifest, results)
        if cfg.sessions:
            await memory_section(cfg, manifest, results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--no-peers", action="store_true", help="without fastmcp's proxy")
    parser.add_argument("--no-http", action="store_true", help="without the HTTP throughput section")
    parser.add_argument("--no-stdio", action="store_true", help="without the stdio latency section")
    parser.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    parser.add_argument(
        "--rounds", type=int, help="latency rounds (default 7, quick 3); throughput: half as many, >= 3"
    )
    parser.add_argument(
        "--speedups-ab",
        action="store_true",
        help="also run the gateway with TOOLBRIDGE_SPEEDUPS=off, interleaved (an A/B of uvloop/httptools)",
    )
    parser.add_argument(
        "--sessions", type=int, default=200, help="idle sessions for the memory section (0: skip it)"
    )
    args = parser.parse_args(argv)
    cfg = Config(
        peers=not args.no_peers,
        http=not args.no_http,
        stdio=not args.no_stdio,
        sessions=args.sessions,
        speedups_ab=args.speedups_ab,
    )
    if args.quick:
        cfg.rounds, cfg.calls, cfg.seconds = 3, 60, 2.0
    if args.rounds is not None:
        cfg.rounds = max(1, args.rounds)
    results = anyio.run(run, cfg)
    print(render(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results.raw, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
