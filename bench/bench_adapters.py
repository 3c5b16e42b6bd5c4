"""Adapter overhead: each framework's tool path through toolbridge (governed) against its own MCP
integration (ungoverned), on the same stdio server, in one run.

    python bench/bench_adapters.py            # 5 rounds of 30 calls per worker
    python bench/bench_adapters.py --quick    # 3 rounds of 10 calls
    python bench/bench_adapters.py --json bench/results/adapters.json

The workers (`bench/adapter_worker.py`) run in `bench/.venvs/adapters` (toolbridge, pydantic-ai
with its MCP extra, langchain-core, the OpenAI Agents SDK: `bench/requirements-adapters.txt`)
and, for langchain-mcp-adapters (which needs `mcp<2`), `bench/.venvs/langchain`; both are created
on first use. Each worker talks to its own server-everything process over stdio and calls `echo`.
Rounds are interleaved (round 1 of every worker, then round 2, ...), and a ratio is the median
over rounds of the per-round ratio of medians, so a busy moment of the machine hits both sides.
"client CPU" is the worker's own CPU time per call (it excludes waiting for the server).

Target: the governed path is not slower than the framework's ungoverned native one (<= 1.00x;
with the run-to-run noise of a shared machine, about +-0.1x, read a ratio near 1 as "the same").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from run import WorkerProcess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"
EVERYTHING_JS = ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TARGET = 1.00


@dataclass(frozen=True)
class Spec:
    framework: str
    mode: str
    venv: str
    label: str
    calls_scale: float = 1.0


SPECS = [
    Spec("pydantic-ai", "native", "adapters", "pydantic-ai: native MCPToolset (fastmcp)"),
    Spec("pydantic-ai", "toolbridge", "adapters", "pydantic-ai: toolbridge toolset(session)"),
    Spec("pydantic-ai", "toolbridge-ungoverned", "adapters", "pydantic-ai: toolbridge toolset(provider)"),
    Spec("openai-agents", "native", "adapters", "Agents SDK: native MCPServerStdio"),
    Spec("openai-agents", "toolbridge", "adapters", "Agents SDK: toolbridge as_tools(session)"),
    Spec("openai-agents", "toolbridge-ungoverned", "adapters", "Agents SDK: toolbridge as_tools(provider)"),
    Spec("langchain", "native-session", "langchain", "LangChain: langchain-mcp-adapters, kept session"),
    Spec("langchain", "native-default", "langchain", "LangChain: langchain-mcp-adapters, default tool", 0.1),
    Spec("langchain", "toolbridge", "adapters", "LangChain: toolbridge as_tools(session)"),
    Spec("langchain", "toolbridge-ungoverned", "adapters", "LangChain: toolbridge as_tools(provider)"),
]
PAIRS = [
    ("pydantic-ai: toolbridge toolset(session)", "pydantic-ai: native MCPToolset (fastmcp)", True),
    ("pydantic-ai: toolbridge toolset(provider)", "pydantic-ai: native MCPToolset (fastmcp)", False),
    ("Agents SDK: toolbridge as_tools(session)", "Agents SDK: native MCPServerStdio", True),
    ("Agents SDK: toolbridge as_tools(provider)", "Agents SDK: native MCPServerStdio", False),
    ("LangChain: toolbridge as_tools(session)", "LangChain: langchain-mcp-adapters, kept session", True),
    ("LangChain: toolbridge as_tools(provider)", "LangChain: langchain-mcp-adapters, kept session", False),
    ("LangChain: toolbridge as_tools(session)", "LangChain: langchain-mcp-adapters, default tool", True),
]
"""(ours, theirs, whether the target applies): the target is for the governed path."""


def ensure_venvs() -> None:
    """Create the workers' virtualenvs from the pinned requirements when missing."""
    for name, extra in (("adapters", ["-e", str(ROOT)]), ("langchain", [])):
        python = VENVS / name / "bin" / "python"
        if python.exists():
            continue
        print(f"creating bench/.venvs/{name} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
        requirements = HERE / f"requirements-{name}.txt"
        pip = [str(python), "-m", "pip", "install", "-q", "-r", str(requirements), *extra]
        subprocess.run(pip, check=True)


class Worker(WorkerProcess):
    """A `bench/adapter_worker.py` process for one framework and mode."""

    def __init__(self, spec: Spec):
        self.spec = spec
        python = VENVS / spec.venv / "bin" / "python"
        server = json.dumps(["node", str(EVERYTHING_JS), "stdio"])
        cmd = [str(python), str(HERE / "adapter_worker.py"), "--framework", spec.framework]
        cmd += ["--mode", spec.mode, "--server", server]
        super().__init__(spec.label, cmd, read_timeout=600.0)

    def maxrss_mib(self) -> float:
        return self.maxrss_kb() / 1024


def paired(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--calls", type=int)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 5)
    calls = opts.calls or (10 if opts.quick else 30)
    if not EVERYTHING_JS.exists():
        print(f"server-everything is missing: {EVERYTHING_JS} (npm ci in tests/servers)", file=sys.stderr)
        return 2
    ensure_venvs()
    load = os.getloadavg()
    workers = [Worker(spec) for spec in SPECS]
    try:
        for worker in workers:
            worker.ready()
        for _ in range(rounds):
            for worker in workers:
                worker.round(max(3, round(calls * worker.spec.calls_scale)))
        memory = {w.spec.label: w.maxrss_mib() for w in workers}
    finally:
        for worker in workers:
            worker.close()
    by_label = {w.spec.label: w for w in workers}
    print(f"rounds: {rounds}; calls per round: {calls} (langchain default tool: 3)")
    print("| measurement | per call | client CPU | peak RSS |")
    print("|---|---|---|---|")
    for w in workers:
        print(
            f"| {w.spec.label} | {statistics.median(w.medians):,.0f} µs | "
            f"{statistics.median(w.cpu):,.0f} µs | {memory[w.spec.label]:,.1f} MiB |"
        )
    print()
    print("| toolbridge path / native path | latency ratio | client CPU ratio | target | met |")
    print("|---|---|---|---|---|")
    results: dict[str, Any] = {"rounds": rounds, "calls": calls, "workers": {}, "ratios": {}}
    for ours, theirs, targeted in PAIRS:
        a, b = by_label[ours], by_label[theirs]
        ratio, cpu_ratio = paired(a.medians, b.medians), paired(a.cpu, b.cpu)
        met = ("yes" if ratio <= TARGET else "**no**") if targeted else ""
        target = f"<= {TARGET:.2f}x" if targeted else ""
        print(f"| {ours} / {theirs} | {ratio:.2f}x | {cpu_ratio:.2f}x | {target} | {met} |")
        results["ratios"][f"{ours} / {theirs}"] = {"latency": ratio, "cpu": cpu_ratio}
    for w in workers:
        results["workers"][w.spec.label] = {
            "medians_us": w.medians,
            "cpu_us": w.cpu,
            "maxrss_mib": memory[w.spec.label],
        }
    machine = (
        f"nproc: {os.cpu_count()}; python: {platform.python_version()}; "
        f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"\nMachine: {machine}")
    if opts.json:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(results | {"machine": machine}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
