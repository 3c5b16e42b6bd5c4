"""toolbridge benchmarks: one command, one table of ratios measured side by side.

    python bench/run.py                 # full run (creates bench/.venvs/ for the peers if missing)
    python bench/run.py --quick         # fewer rounds and calls
    python bench/run.py --no-peers      # without fastmcp / langchain-mcp-adapters

Everything in one table is measured in the same run, against the same server processes, on the
same machine. Per-call latencies come from worker processes (`bench/worker.py`), one per client
library; the rounds are interleaved (round 1 of every worker, then round 2, ...) and each ratio is
the median over rounds of (the worker's median in that round / the reference's median in the same
round), so slow phases of a busy machine hit both sides of a ratio alike.

Sections:

1. per-call latency over stdio and over Streamable HTTP, server-everything's `echo`: the raw SDK
   `mcp.Client.call_tool` (the reference), `McpToolProvider.call_tool`, fastmcp's `Client`, and
   langchain-mcp-adapters' default tools (a new session per call); the governed call (a declared
   tool under `create_runtime`, driven by a `ScriptedModel` agent: one model step per call) and
   the same tool through `runtime.session(...).call_tool` (no agent), both on
   `get-structured-content` against the raw SDK on the same tool;
2. throughput of 64 concurrent calls of a 10 ms tool on one connection, against 64 sequential ones;
3. `tools/list` of a 1,000-tool server plus the conversion to `ToolSpec`s, against the raw SDK
   listing (the client's list cache is cleared before every listing);
4. agent-loop overhead per step (`Agent` + `ScriptedModel` + `FunctionTools`), plain and governed;
5. peak memory (maximum RSS) of each worker process.

The peers live in their own virtualenvs (`bench/.venvs/fastmcp`, `bench/.venvs/langchain`, pinned
in `bench/requirements-*.txt`), because langchain-mcp-adapters 0.3.2 needs `mcp<2`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
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
PEERS = {"fastmcp": "requirements-fastmcp.txt", "langchain": "requirements-langchain.txt"}
STRUCTURED = ("get-structured-content", {"location": "New York"})

TARGET_CALL_RATIO = 1.10
TARGET_GOVERNED_AGENT_RATIO = 1.25
TARGET_SESSION_RATIO = 1.15
TARGET_LANGCHAIN_RATIO = 20.0
TARGET_CONCURRENCY = 8.0


@dataclass
class Config:
    """How much to measure."""

    rounds: int = 7
    calls: int = 60
    langchain_calls: int = 3
    concurrency: int = 64
    sleep_ms: int = 10
    list_tools: int = 1000
    list_reps: int = 15
    agent_steps: int = 40
    peers: bool = True
    http: bool = True


@dataclass
class Row:
    """One line of the result table."""

    section: str
    name: str
    value: str
    ratio: float | None = None
    target: str = ""
    ok: bool | None = None


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.rows.append(Row(*args, **kwargs))


# ---------------------------------------------------------------------------------------- workers


def peer_python(lib: str) -> Path:
    return VENVS / lib / "bin" / "python"


def ensure_peer_venvs() -> dict[str, bool]:
    """Create the peers' virtualenvs from the pinned requirements when missing; which are usable."""
    usable: dict[str, bool] = {}
    for lib, requirements in PEERS.items():
        python = peer_python(lib)
        if not python.exists():
            print(f"creating bench/.venvs/{lib} ({requirements}) ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", str(VENVS / lib)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "-r", str(HERE / requirements)],
                check=True,
            )
        usable[lib] = python.exists()
    return usable


class WorkerProcess:
    """A benchmark worker process, driven over its stdin/stdout: it prints `{"ready": true}`, answers
    `run N` with its latencies and CPU time for N calls, `mem` with its peak RSS, and ends on `quit`
    (`bench/worker.py`, `bench/adapter_worker.py`)."""

    def __init__(
        self, label: str, cmd: list[str], env: dict[str, str] | None = None, read_timeout: float = 300.0
    ) -> None:
        self.label = label
        self.read_timeout = read_timeout
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.medians: list[float] = []
        self.cpu: list[float] = []

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.read_timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {self.label} exited ({self.proc.poll()})")
            with contextlib.suppress(json.JSONDecodeError):
                data: dict[str, Any] = json.loads(line)
                return data
        raise TimeoutError(f"worker {self.label} did not answer")

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def ready(self) -> None:
        if not self._read().get("ready"):
            raise RuntimeError(f"worker {self.label} did not start")

    def round(self, n: int) -> float:
        """`n` calls; records (and returns) their median latency in µs, and the CPU time they took."""
        self._send(f"run {n}")
        answer = self._read()
        median = statistics.median(answer["lat_us"])
        self.medians.append(median)
        self.cpu.append(float(answer["cpu_us"]))
        return median

    def maxrss_kb(self) -> int:
        self._send("mem")
        return int(self._read()["maxrss_kb"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._send("quit")
            self.proc.wait(timeout=15)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Worker(WorkerProcess):
    """A `bench/worker.py` process for one client library."""

    def __init__(
        self, label: str, lib: str, server: str, tool: tuple[str, dict[str, Any]] | None = None
    ) -> None:
        python = peer_python(lib) if lib in PEERS else Path(sys.executable)
        cmd = [str(python), str(HERE / "worker.py"), "--lib", lib, "--server", server]
        if tool is not None:
            cmd += ["--tool", tool[0], "--args", json.dumps(tool[1])]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "src")  # toolbridge for the main-venv workers
        if lib in PEERS:
            env.pop("PYTHONPATH")
        super().__init__(label, cmd, env)


def paired_ratio(worker: Worker, reference: Worker) -> float:
    return statistics.median(w / r for w, r in zip(worker.medians, reference.medians, strict=True))


def latency_section(report: Report, cfg: Config, transport: str, server: str, peers: dict[str, bool]) -> None:
    """Interleaved rounds of every worker against one server; rows of medians and paired ratios."""
    specs: list[tuple[str, str, tuple[str, dict[str, Any]] | None, int]] = [
        ("raw SDK mcp.Client", "raw", None, cfg.calls),
        ("toolbridge McpToolProvider", "toolbridge", None, cfg.calls),
    ]
    if peers.get("fastmcp"):
        specs.append(("fastmcp Client", "fastmcp", None, cfg.calls))
    if peers.get("langchain"):
        specs.append(("langchain-mcp-adapters default tool", "langchain", None, cfg.langchain_calls))
    specs += [
        ("raw SDK mcp.Client (structured tool)", "raw", STRUCTURED, cfg.calls),
        ("toolbridge governed call (structured tool)", "governed", STRUCTURED, max(cfg.calls // 2, 2)),
        ("toolbridge session.call_tool (structured tool)", "session", STRUCTURED, cfg.calls),
    ]
    workers: list[tuple[Worker, int]] = []
    try:
        for label, lib, tool, n in specs:
            workers.append((Worker(label, lib, server, tool), n))
        for worker, _ in workers:
            worker.ready()
        for r in range(cfg.rounds):
            # Each round starts one worker further on: a worker measured right after another
            # one's burst (its server still busy) is slower, so no worker keeps that place.
            for worker, n in workers[r % len(workers) :] + workers[: r % len(workers)]:
                worker.round(n)
        by_label = {w.label: w for w, _ in workers}
        raw = by_label["raw SDK mcp.Client"]
        raw_structured = by_label["raw SDK mcp.Client (structured tool)"]
        section = f"per-call latency, {transport}"
        for worker, _ in workers:
            median = statistics.median(worker.medians)
            reference = raw_structured if "structured" in worker.label else raw
            ratio = paired_ratio(worker, reference)
            target, ok = "", None
            if worker.label == "toolbridge McpToolProvider":
                target, ok = f"<= {TARGET_CALL_RATIO:.2f}x raw", ratio <= TARGET_CALL_RATIO
            elif "governed" in worker.label:
                target = f"<= {TARGET_GOVERNED_AGENT_RATIO:.2f}x raw (same tool)"
                ok = ratio <= TARGET_GOVERNED_AGENT_RATIO
            elif "session" in worker.label:
                target, ok = f"<= {TARGET_SESSION_RATIO:.2f}x raw (same tool)", ratio <= TARGET_SESSION_RATIO
            cpu = statistics.median(worker.cpu)
            value = f"{median:,.0f} µs (client CPU {cpu:,.0f} µs)"
            report.add(section, worker.label, value, ratio, target, ok)
            report.raw.setdefault(section, {})[worker.label] = {
                "medians_us": worker.medians,
                "cpu_us": worker.cpu,
            }
        if "langchain-mcp-adapters default tool" in by_label:
            tb = by_label["toolbridge McpToolProvider"]
            lc = by_label["langchain-mcp-adapters default tool"]
            speedup = statistics.median(x / t for x, t in zip(lc.medians, tb.medians, strict=True))
            ok = speedup >= TARGET_LANGCHAIN_RATIO if transport == "stdio" else None
            target = f">= {TARGET_LANGCHAIN_RATIO:.0f}x" if transport == "stdio" else ""
            report.add(
                section, "toolbridge speed-up over langchain default", f"{speedup:,.0f}x", None, target, ok
            )
        for worker, _ in workers:
            report.add(
                "peak memory (max RSS of the worker)",
                f"{worker.label} [{transport}]",
                f"{worker.maxrss_kb() / 1024:,.1f} MiB",
            )
    finally:
        for worker, _ in workers:
            worker.close()


@contextlib.contextmanager
def everything_http() -> Iterator[str]:
    """server-everything over Streamable HTTP on a free port, in its own process group."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PORT=str(port))
    proc = subprocess.Popen(
        ["node", str(EVERYTHING_JS), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("server-everything (HTTP) did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# ------------------------------------------------------------------------------ in-process sections


async def concurrency_section(report: Report, cfg: Config) -> None:
    """64 concurrent calls of a 10 ms tool on one connection, against 64 sequential calls."""
    from toolbridge.bridge import McpToolProvider
    from toolbridge.clients import StdioClient

    client = StdioClient(sys.executable, [str(HERE / "bench_servers.py"), "sleep"])
    async with McpToolProvider(client) as provider:
        args = {"ms": cfg.sleep_ms}
        await provider.call_tool("sleep", args)
        best_seq, best_conc = float("inf"), float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(cfg.concurrency):
                await provider.call_tool("sleep", args)
            best_seq = min(best_seq, time.perf_counter() - start)
            start = time.perf_counter()
            await asyncio.gather(*(provider.call_tool("sleep", args) for _ in range(cfg.concurrency)))
            best_conc = min(best_conc, time.perf_counter() - start)
    ratio = best_seq / best_conc
    section = f"throughput, {cfg.concurrency} calls of a {cfg.sleep_ms} ms tool, one stdio connection"
    report.add(section, "sequential", f"{cfg.concurrency / best_seq:,.0f} calls/s")
    report.add(
        section,
        f"{cfg.concurrency} concurrent",
        f"{cfg.concurrency / best_conc:,.0f} calls/s",
        ratio,
        f">= {TARGET_CONCURRENCY:.0f}x sequential",
        ratio >= TARGET_CONCURRENCY,
    )
    report.raw["concurrency"] = {"sequential_s": best_seq, "concurrent_s": best_conc}


async def listing_section(report: Report, cfg: Config) -> None:
    """`tools/list` of an N-tool server + conversion to ToolSpecs, against the raw SDK listing."""
    from mcp import Client, StdioServerParameters

    from toolbridge.bridge import McpToolProvider
    from toolbridge.clients import StdioClient

    argv = [str(HERE / "bench_servers.py"), "many", str(cfg.list_tools)]
    raw_times: list[float] = []
    tb_times: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=argv)
    async with Client(params, cache=None) as raw:
        client = StdioClient(sys.executable, argv)
        async with McpToolProvider(client) as provider:
            assert len((await raw.list_tools()).tools) == cfg.list_tools
            assert len(await provider.list_tools()) == cfg.list_tools
            for _ in range(cfg.list_reps):
                start = time.perf_counter()
                await raw.list_tools()
                raw_times.append(time.perf_counter() - start)
                client._cache = None  # bench only: clear the list cache so the server is asked again
                start = time.perf_counter()
                specs = await provider.list_tools()
                tb_times.append(time.perf_counter() - start)
                assert len(specs) == cfg.list_tools
    section = f"tools/list of a {cfg.list_tools}-tool server (stdio)"
    ratio = statistics.median(t / r for t, r in zip(tb_times, raw_times, strict=True))
    report.add(section, "raw SDK list_tools", f"{statistics.median(raw_times) * 1e3:,.1f} ms")
    report.add(
        section,
        "toolbridge list_tools + ToolSpec conversion",
        f"{statistics.median(tb_times) * 1e3:,.1f} ms",
        ratio,
    )
    report.raw["listing"] = {"raw_s": raw_times, "toolbridge_s": tb_times}


async def agent_section(report: Report, cfg: Config) -> None:
    """Per-step overhead of the agent loop (ScriptedModel + FunctionTools), plain and governed."""
    from toolbridge import Agent, ScriptedModel, create_runtime
    from toolbridge.functions import FunctionTools

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    tools = FunctionTools([add])
    n = cfg.agent_steps

    def agent() -> Any:
        turns: list[dict[str, Any]] = [
            {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(n)
        ]
        turns.append({"text": "done"})
        return Agent(ScriptedModel(turns), [tools], max_steps=n + 2)

    await tools.call_tool("add", {"a": 1, "b": 2})
    start = time.perf_counter()
    for i in range(n):
        await tools.call_tool("add", {"a": i, "b": 1})
    direct = (time.perf_counter() - start) / n

    plain: list[float] = []
    governed: list[float] = []
    for _ in range(3):
        a = agent()
        start = time.perf_counter()
        await a.run("go")
        plain.append((time.perf_counter() - start) / (n + 1))
        runtime = create_runtime(
            permissions={"allow": ["model:scripted", "tool:add", "effect:write"]},
            limits={
                "max_tool_calls": n + 1,
                "max_steps": n + 2,
                "max_model_calls": n + 2,
                "max_duration_ms": 600_000,
            },
        )
        a = agent()
        start = time.perf_counter()
        result = await runtime.run(a, "go")
        governed.append((time.perf_counter() - start) / (n + 1))
        runtime.close()
        if result.outcome != "succeeded":
            report.raw["agent_governed_outcome"] = f"{result.outcome} {result.error_code}"
    section = "agent loop, per step (ScriptedModel + FunctionTools)"
    report.add(section, "direct FunctionTools.call_tool", f"{direct * 1e6:,.0f} µs")
    report.add(
        section,
        "Agent.run step",
        f"{min(plain) * 1e6:,.0f} µs (overhead {(min(plain) - direct) * 1e6:,.0f} µs)",
    )
    report.add(section, "governed runtime.run step", f"{min(governed) * 1e6:,.0f} µs")
    report.raw["agent"] = {"direct_s": direct, "plain_s": plain, "governed_s": governed}


# ----------------------------------------------------------------------------------------- output


def machine() -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "node": node,
        "platform": platform.platform(),
        "load average at start": load,
    }


def render(report: Report, info: dict[str, str]) -> str:
    lines = ["| section | measurement | value | ratio | target | met |", "|---|---|---|---|---|---|"]
    for row in report.rows:
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
        met = "" if row.ok is None else ("yes" if row.ok else "**no**")
        lines.append(f"| {row.section} | {row.name} | {row.value} | {ratio} | {row.target} | {met} |")
    lines.append("")
    lines.append("Machine: " + "; ".join(f"{k}: {v}" for k, v in info.items()))
    return "\n".join(lines)


def run(cfg: Config) -> tuple[Report, dict[str, str]]:
    """Run every section with `cfg`; returns the report and the machine description."""
    info = machine()
    report = Report()
    peers = ensure_peer_venvs() if cfg.peers else {}
    stdio = "stdio:" + json.dumps(["node", str(EVERYTHING_JS), "stdio"])
    latency_section(report, cfg, "stdio", stdio, peers)
    if cfg.http:
        with everything_http() as url:
            latency_section(report, cfg, "Streamable HTTP", "http:" + url, peers)
    asyncio.run(concurrency_section(report, cfg))
    asyncio.run(listing_section(report, cfg))
    asyncio.run(agent_section(report, cfg))
    return report, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--no-peers", action="store_true", help="skip fastmcp and langchain-mcp-adapters")
    parser.add_argument("--no-http", action="store_true", help="skip Streamable HTTP")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--calls", type=int)
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args(argv)
    cfg = Config(peers=not args.no_peers, http=not args.no_http)
    if args.quick:
        cfg.rounds, cfg.calls, cfg.langchain_calls, cfg.list_reps, cfg.agent_steps = 3, 20, 2, 3, 10
    if args.rounds:
        cfg.rounds = args.rounds
    if args.calls:
        cfg.calls = args.calls
    if not EVERYTHING_JS.exists():
        print(
            f"server-everything is not installed at {EVERYTHING_JS} (npm ci in tests/servers)",
            file=sys.stderr,
        )
        return 2
    report, info = run(cfg)
    print(render(report, info))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": info, "raw": report.raw}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
