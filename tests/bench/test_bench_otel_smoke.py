"""`bench/bench_otel.py` runs end to end with tiny counts (not a benchmark: it cannot rot)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_telemetry_bench_runs(tmp_path: Path) -> None:
    out_file = tmp_path / "otel.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_otel.py"), "--rounds", "2", "--json", str(out_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert "| api only, no SDK |" in out.stdout and "| sdk + BatchSpanProcessor |" in out.stdout
    data = json.loads(out_file.read_text())
    assert data["api"]["off_us"] > 0 and data["sdk"]["on_us"] > 0
    assert data["calls"]["off"] > 100
