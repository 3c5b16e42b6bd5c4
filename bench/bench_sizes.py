"""Size sweep: how long one tool result of N MiB takes to arrive over stdio.

Side by side in the same run, against the same server process type (the project's test server,
tests/faults/hostile_server.py, tool `big`, which writes a text result of exactly N characters):

* `floor`     : the server writes the same line; this process reads the raw pipe and runs one
                `json.loads` on it (no MCP at all): the least any client can take.
* `toolbridge`: `mcp.Client(StdioTransport(...))`, toolbridge's transport under the SDK session.
* `raw SDK`   : `mcp.Client(StdioServerParameters(...))`, the official SDK's own stdio transport.

Each size gets a fresh connection per client (a timed-out SDK session is lost). The SDK's calls
are capped by `--sdk-timeout`; a call that hits it is reported as "timeout", not as a number.
Times are the median of `--repeat` calls (one call for the SDK when it takes over 5 s).

Run: `python bench/bench_sizes.py [--sizes 1,4,16,32,64] [--repeat 3] [--sdk-timeout 30]`
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client
from mcp.client._transport import Transport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from toolbridge.clients._stdio_transport import StdioTransport

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "faults" / "hostile_server.py")
MiB = 1024 * 1024
QUIET = logging.getLogger("bench.sizes.server")
QUIET.setLevel(logging.WARNING)
DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - the SDK copies server stderr to this file


def floor_seconds(size: int) -> float:
    """Read the server's raw line for one `big` call and json.loads it; no MCP client at all."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "big", "arguments": {"size": size}},
    }
    proc = subprocess.Popen(
        [sys.executable, SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        warm_up = {**request, "params": {"name": "echo", "arguments": {"text": "warm up"}}}
        proc.stdin.write(json.dumps(warm_up).encode() + b"\n")
        proc.stdin.flush()
        proc.stdout.readline()
        started = time.perf_counter()
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        message = json.loads(line)
        elapsed = time.perf_counter() - started
        assert len(message["result"]["content"][0]["text"]) == size
        return elapsed
    finally:
        proc.stdin.close()
        proc.wait(10)


async def client_seconds(server: Transport, size: int, repeat: int, cap: float) -> str:
    """Median seconds of `repeat` calls of `big(size)` on one connection, or "timeout"."""
    times: list[float] = []
    async with Client(server) as client:
        await client.call_tool("echo", {"text": "warm up"})
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                result = await client.call_tool("big", {"size": size}, read_timeout_seconds=cap)
            except MCPError as exc:
                if exc.error.code == -32001 or "timed out" in exc.error.message:
                    return "timeout"
                raise
            times.append(time.perf_counter() - started)
            block = result.content[0]
            assert isinstance(block, types.TextContent) and len(block.text) == size
            if times[-1] > 5:
                break
    return f"{statistics.median(times):.3f}"


def ratio(sdk: str, ours: str) -> str:
    if sdk == "timeout":
        return "SDK timed out"
    return f"{float(sdk) / float(ours):.1f}x"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1,4,16,32,64", help="result sizes in MiB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="calls per size (median reported)")
    parser.add_argument("--sdk-timeout", type=float, default=30.0, help="cap on one raw SDK call, seconds")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",") if s.strip()]

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}")
    print(f"load average at start: {load:.1f}")
    print("seconds per call (median); ms/MiB = milliseconds per MiB of result (flat = linear);")
    print("ratio = raw SDK time / toolbridge time\n")
    columns = ["MiB", "floor s", "toolbridge s", "toolbridge ms/MiB", "raw SDK s", "raw SDK ms/MiB", "ratio"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("-" * (len(c) + 2) for c in columns) + "|")
    rows = []
    for mib in sizes:
        size = int(mib * MiB)
        floor = statistics.median(floor_seconds(size) for _ in range(args.repeat))
        ours_transport = StdioTransport(sys.executable, [SERVER], logger=QUIET)
        ours = await client_seconds(ours_transport, size, args.repeat, 120.0)
        sdk_params = StdioServerParameters(command=sys.executable, args=[SERVER])
        sdk = await client_seconds(stdio_client(sdk_params, DEVNULL), size, args.repeat, args.sdk_timeout)
        rows.append((mib, floor, ours, sdk))
        cells = [
            f"{mib:g}",
            f"{floor:.3f}",
            ours,
            per_mib(ours, mib),
            sdk,
            per_mib(sdk, mib),
            ratio(sdk, ours),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)

    mib, floor, ours, sdk = rows[-1]
    times_floor = float(ours) / floor
    print(f"\nat {mib:g} MiB toolbridge takes {times_floor:.2f}x the floor (pipe read + one json.loads)")
    if sdk == "timeout":
        print(f"the raw SDK did not finish within {args.sdk_timeout:g} s")


def per_mib(seconds: str, mib: float) -> str:
    return "-" if seconds == "timeout" else f"{float(seconds) * 1000 / mib:.0f}"


if __name__ == "__main__":
    anyio.run(main)
