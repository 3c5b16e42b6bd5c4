"""`bench/bench_gateway.py` with tiny counts, so that it cannot rot (not a benchmark: the numbers
do not matter; fastmcp's proxy needs its own virtualenv and is left out)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def test_the_gateway_bench_runs_with_tiny_counts() -> None:
    spec = importlib.util.spec_from_file_location("bench_gateway_smoke", BENCH / "bench_gateway.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cfg = module.Config(
        rounds=1, calls=3, clients=2, seconds=0.5, peers=False, http=True, sessions=3, speedups_ab=True
    )
    results = anyio.run(module.run, cfg)
    table = module.render(results)
    paths = [row[1] for row in results.rows]
    assert paths.count("toolbridge gateway (governed)") == 3  # latency, throughput and memory rows
    # --speedups-ab: the same three rows for the gateway with TOOLBRIDGE_SPEEDUPS=off
    assert paths.count("toolbridge gateway (governed, TOOLBRIDGE_SPEEDUPS=off)") == 3
    assert "latency, stdio (SDK client)" in table and "calls/s" in table and "KiB per session" in table
    rss = results.raw["idle_session_rss"]["toolbridge gateway (governed)"]
    assert rss["rss_before_kib"] > 0 and rss["rss_after_kib"] > 0
    # CPU is read in clock ticks (10 ms): with 3 calls it may well read 0
    assert results.raw["middle_cpu_us_per_call"]["toolbridge gateway (governed)"] >= 0
    assert results.raw["http_cpu_us_per_call"]["toolbridge gateway (governed)"] >= 0
