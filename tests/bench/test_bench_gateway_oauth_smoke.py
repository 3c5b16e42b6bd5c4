"""`bench/bench_gateway_oauth.py` with tiny counts, so that it cannot rot (the numbers do not matter)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def test_the_oauth_bench_runs_with_tiny_counts() -> None:
    path = BENCH / "bench_gateway_oauth.py"
    spec = importlib.util.spec_from_file_location("bench_gateway_oauth_smoke", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    results = anyio.run(module.run, 5, 1)
    assert set(results) == {
        "static bearer token (baseline)",
        "JWT RS256, verified in full",
        "JWT ES256, verified in full",
        "JWT RS256, remembered",
        "opaque token, introspection cached",
    }
    assert all(us > 0 for us in results.values())
    assert "x baseline" in module.render(results)
