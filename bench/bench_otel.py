"""What toolbridge's OpenTelemetry instrumentation costs per tool call (issue 15).

    .venv/bin/python bench/bench_otel.py            # 300 pairs of runs per setting, about 1-2 minutes
    .venv/bin/python bench/bench_otel.py --quick    # 40 pairs
    .venv/bin/python bench/bench_otel.py --json bench/results/otel.json

The unit is one agent step that calls a tool: an `Agent` driven by a `ScriptedModel` calls
server-everything's `echo` over stdio (toolbridge's `StdioClient`) once per model turn, 20 turns a
run. Two worker processes (a global tracer provider cannot be unset, so each setting lives in its
own process), each alternating, round by round, between toolbridge's telemetry **off**
(`telemetry.set_enabled(False)`: the baseline) and **on**:

- `api only`: the OpenTelemetry API installed, no SDK configured (what every user gets): the
  helpers return the no-op span;
- `sdk + batch`: an SDK `TracerProvider` with a `BatchSpanProcessor` (its exporter drops the
  batches, so the network is not measured) and a `MeterProvider` with an in-memory reader.

The runs come in pairs (telemetry off, then on, or the other way round, alternating), and a
ratio is the median over pairs of (time per call with telemetry on / off in that pair). Wall time
and the worker's CPU time are both reported. The Python function calls per tool call
(`sys.setprofile`, API only vs off) do not depend on the machine's load.
The SDK's own MCP client span (`MCP send tools/call`) exists in every setting: it is the SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
EVERYTHING = str(
    HERE.parent / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
TURNS = 20


def _turns() -> list[dict[str, Any]]:
    call = {"tool_calls": [{"name": "echo", "arguments": {"message": "hello"}}]}
    return [call] * TURNS + [{"text": "done"}]


async def _worker(setting: str, rounds: int) -> dict[str, Any]:
    from toolbridge import Agent, McpToolProvider, ScriptedModel, telemetry
    from toolbridge.clients import StdioClient

    if setting == "sdk":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))

    tools = McpToolProvider(StdioClient("node", [EVERYTHING, "stdio"]))

    async def one_run() -> tuple[float, float]:
        agent = Agent(
            ScriptedModel(turns=_turns()),
            tool_providers=[{"provider": tools, "include": ["echo"]}],
            max_steps=TURNS + 1,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        await agent.run("go")
        return (time.perf_counter() - wall) / TURNS * 1e6, (time.process_time() - cpu) / TURNS * 1e6

    out: dict[str, Any] = {"setting": setting, "rounds": []}
    async with tools:
        for _ in range(3):  # warm-up: connection, caches, imports
            telemetry.set_enabled(True)
            await one_run()
            telemetry.set_enabled(False)
            await one_run()
        # Pairs of runs, one with telemetry off and one on (the order alternates), so that both
        # halves of a pair see the same moment of a busy machine; a ratio is taken per pair.
        for r in range(rounds):
            pair: dict[str, tuple[float, float]] = {}
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                telemetry.set_enabled(mode == "on")
                pair[mode] = await one_run()
            out["rounds"].append(pair)
        if setting == "api":
            out["calls"] = {mode: await _count_calls(one_run, mode == "on") for mode in ("off", "on")}
    telemetry.set_enabled(True)
    return out


async def _count_calls(one_run: Any, enabled: bool) -> float:
    from toolbridge import telemetry

    telemetry.set_enabled(enabled)
    await one_run()
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        await one_run()
    finally:
        sys.setprofile(None)
    return calls / TURNS


def _summary(result: dict[str, Any]) -> dict[str, float]:
    rounds = result["rounds"]
    return {
        "off_us": statistics.median(r["off"][0] for r in rounds),
        "on_us": statistics.median(r["on"][0] for r in rounds),
        "off_cpu_us": statistics.median(r["off"][1] for r in rounds),
        "on_cpu_us": statistics.median(r["on"][1] for r in rounds),
        "ratio": statistics.median(r["on"][0] / r["off"][0] for r in rounds),
        "cpu_ratio": statistics.median(r["on"][1] / r["off"][1] for r in rounds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, help="pairs of runs (off / on) of 20 calls each")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--worker", choices=("api", "sdk"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds or (40 if args.quick else 300)
    if args.worker:
        print(json.dumps(asyncio.run(_worker(args.worker, rounds))))
        return 0
    results = {}
    for setting in ("api", "sdk"):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", setting, "--rounds", str(rounds)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        results[setting] = json.loads(out.stdout.strip().splitlines()[-1])
    api, sdk = _summary(results["api"]), _summary(results["sdk"])
    calls = results["api"]["calls"]
    rows = [
        ("telemetry off (baseline)", f"{api['off_us']:,.0f} µs (CPU {api['off_cpu_us']:,.0f} µs)", "1.00x"),
        (
            "api only, no SDK",
            f"{api['on_us']:,.0f} µs (CPU {api['on_cpu_us']:,.0f} µs)",
            f"{api['ratio']:.3f}x (CPU {api['cpu_ratio']:.3f}x), target <= 1.02x",
        ),
        (
            "sdk + BatchSpanProcessor",
            f"{sdk['on_us']:,.0f} µs (CPU {sdk['on_cpu_us']:,.0f} µs)",
            f"{sdk['ratio']:.3f}x (CPU {sdk['cpu_ratio']:.3f}x) vs off in that process "
            f"({sdk['off_us']:,.0f} µs)",
        ),
        (
            "Python calls per tool call",
            f"off {calls['off']:,.0f}, api only {calls['on']:,.0f}",
            f"{calls['on'] / calls['off']:.3f}x",
        ),
    ]
    print(f"agent step calling echo over stdio, {rounds} pairs of runs of {TURNS} calls (off / on)")
    print("| measurement | per tool call | ratio |\n|---|---|---|")
    for row in rows:
        print(f"| {' | '.join(row)} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"api": api, "sdk": sdk, "calls": calls}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
