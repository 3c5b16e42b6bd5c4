"""A quick run of the benchmark code with tiny counts, so that `bench/` cannot rot.

This is not a benchmark: it checks that every section of `bench/run.py` runs end to end (workers
for the raw SDK and toolbridge over stdio, the governed call, concurrency, the 1,000-tool listing
code on 50 tools, the agent loop) and renders its table. The peers (fastmcp, langchain-mcp-adapters)
and Streamable HTTP are left out: they need their own virtualenvs and take longer; `python
bench/run.py` covers them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_section_runs_with_tiny_counts() -> None:
    run = _load("run")
    _load("bench_servers")  # importable on its own (it is also started as a server)
    cfg = run.Config(  # type: ignore[attr-defined]
        rounds=1,
        calls=2,
        langchain_calls=1,
        concurrency=4,
        sleep_ms=1,
        list_tools=50,
        list_reps=1,
        agent_steps=2,
        peers=False,
        http=False,
    )
    report = run.Report()  # type: ignore[attr-defined]
    server = "stdio:" + json.dumps(["node", str(run.EVERYTHING_JS), "stdio"])  # type: ignore[attr-defined]

    async def sections() -> None:
        # The sections run one after the other in `python bench/run.py`; here they overlap, to
        # keep this check short (the numbers do not matter).
        latency = asyncio.to_thread(run.latency_section, report, cfg, "stdio", server, {})  # type: ignore[attr-defined]
        others: list[Any] = [
            run.concurrency_section(report, cfg),  # type: ignore[attr-defined]
            run.listing_section(report, cfg),  # type: ignore[attr-defined]
            run.agent_section(report, cfg),  # type: ignore[attr-defined]
        ]
        await asyncio.gather(latency, *others)

    asyncio.run(sections())
    info = run.machine()  # type: ignore[attr-defined]
    table = run.render(report, info)  # type: ignore[attr-defined]
    names = {row.name for row in report.rows}
    assert "toolbridge McpToolProvider" in names
    assert "toolbridge governed call (structured tool)" in names
    assert "toolbridge session.call_tool (structured tool)" in names
    assert "4 concurrent" in names
    assert "toolbridge list_tools + ToolSpec conversion" in names
    assert "governed runtime.run step" in names
    assert "agent_governed_outcome" not in report.raw, report.raw.get("agent_governed_outcome")
    assert "| per-call latency, stdio |" in table and "nproc" in table


def test_the_call_count_bench_runs() -> None:
    import subprocess

    command = [sys.executable, str(BENCH / "bench_calls.py")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| raw SDK mcp.Client.call_tool",
        "| toolbridge StdioClient.call_tool",
        "| session.call_tool",
        "| agent step under runtime.run",
    ]


def test_the_batch_bench_code_runs_with_tiny_counts(tmp_path: Path, postgres_url: str) -> None:
    """bench/bench_batch.py: the governed call per journal and one local batch (Ray is left to the bench)."""
    import anyio

    bench = _load("bench_batch")
    for journal in (None, str(tmp_path / "j.sqlite"), postgres_url):
        (per_call,) = bench.governed_call(journal, 10, 1)  # type: ignore[attr-defined]
        assert 0 < per_call < 5
    took = anyio.run(
        lambda: bench.batch_once(  # type: ignore[attr-defined]
            tmp_path, "t", 3, ray=False, actors=1, concurrency=2, journal=str(tmp_path / "b.sqlite")
        )
    )
    assert took > 0 and len((tmp_path / "t.out.jsonl").read_text().splitlines()) == 3


def test_the_concurrent_journal_bench_code_runs_with_tiny_counts(postgres_url: str) -> None:
    """bench/bench_batch.py's concurrency section: sessions at once on one loop, both journal paths."""
    bench = _load("bench_batch")
    for sync_pg in (True, False):
        rate, stall_ms = bench.concurrent_calls(postgres_url, 3, 2, sync_pg=sync_pg)  # type: ignore[attr-defined]
        assert rate > 0 and stall_ms >= 0
    (per_call,) = bench.governed_call(postgres_url, 10, 1, sync_pg=True)  # type: ignore[attr-defined]
    assert 0 < per_call < 5
