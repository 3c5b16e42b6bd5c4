"""Notification flood: the cost of 20,000 server log notifications sent before one answer.

Side by side in the same run against the project's hostile test server (tool `flood`):

* `raw SDK`   : `mcp.Client(StdioServerParameters(...))`, the official SDK's stdio transport.
* `toolbridge`: `mcp.Client(StdioTransport(...), logging_callback=make_logging_callback(...))`,
                toolbridge's transport with its rate-limited bridge of server logs to `logging`.

Rounds alternate between the two so machine noise hits both; the ratio is the median of the
per-round ratios. The issue's target: "about as much as with the raw SDK, never a timeout".

Run: `python bench/bench_flood.py [--count 20000] [--rounds 5]`
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from toolbridge.clients._stdio_transport import StdioTransport, make_logging_callback

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "faults" / "hostile_server.py")
QUIET = logging.getLogger("bench.flood.server")
QUIET.setLevel(logging.WARNING)


async def _one(client: Client, count: int) -> float:
    started = time.perf_counter()
    await client.call_tool("flood", {"count": count}, read_timeout_seconds=120)
    return time.perf_counter() - started


async def measure(count: int, rounds: int) -> dict[str, float]:
    """Median seconds per flooded call for each client, and the median paired ratio."""
    raw_times: list[float] = []
    ours_times: list[float] = []
    ratios: list[float] = []
    for _ in range(rounds):
        async with Client(StdioServerParameters(command=sys.executable, args=[SERVER])) as raw:
            raw_s = await _one(raw, count)
        transport = StdioTransport(sys.executable, [SERVER], logger=QUIET)
        async with Client(transport, logging_callback=make_logging_callback(QUIET)) as ours:
            ours_s = await _one(ours, count)
        raw_times.append(raw_s)
        ours_times.append(ours_s)
        ratios.append(ours_s / raw_s)
    return {
        "raw_s": statistics.median(raw_times),
        "toolbridge_s": statistics.median(ours_times),
        "ratio": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    result = anyio.run(measure, args.count, args.rounds)
    print("| notifications | raw SDK s | toolbridge s | ratio (paired median) |")
    print("|---|---|---|---|")
    print(f"| {args.count} | {result['raw_s']:.2f} | {result['toolbridge_s']:.2f} | {result['ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
