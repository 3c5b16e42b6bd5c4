"""The conformance suite's server scenarios, against server-everything directly and through the gateway.

The pinned suite (`@modelcontextprotocol/conformance`, tests/conformance) runs every active server
scenario twice in this test: against server-everything over Streamable HTTP, and against
`toolbridge gateway --transport http` fronting server-everything over stdio. Every scenario that
passes directly must pass through the gateway, except those in `DIFFERENT` (each with its reason;
each must still pass directly and fail through the gateway, so the list cannot go stale). The table
in docs/gateway.md ("Conformance") must say exactly what this run measured.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from gw_helpers import free_port, gateway_http

from toolbridge.clients import StdioClient

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "conformance"
NODE_BIN = CONFORMANCE / "node_modules" / ".bin"
SUITE = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EVERYTHING = (
    ROOT / "tests" / "servers" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
)
DOC = ROOT / "docs" / "gateway.md"

DIFFERENT = {
    "tools-call-simple-text": "calls a tool server-everything does not have: server-everything answers "
    "with an isError result, the gateway with JSON-RPC -32602 (unknown tool), as the specification says",
    "tools-call-error": "the same: its tool `test_error_handling` is not on server-everything",
}


def _require() -> None:
    if not (NODE_BIN / "node").exists() or not SUITE.exists():
        pytest.fail("the conformance suite is not installed; run `bash .ci/install-conformance.sh`")
    if not (EVERYTHING / "index.js").exists():
        pytest.fail("server-everything is not installed; run `npm ci` in tests/servers")


def run_suite(url: str, out: Path) -> dict[str, bool]:
    """Run every active server scenario against `url`; scenario -> passed (checks, none failing)."""
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [str(NODE_BIN / "node"), str(SUITE), "server", "--url", url, "-o", str(out)],
        cwd=CONFORMANCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    results: dict[str, bool] = {}
    for checks_file in out.rglob("checks.json"):
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name.removeprefix("server-"))
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        results[scenario] = bool(checks) and all(
            c.get("status") not in ("FAILURE", "WARNING") for c in checks
        )
    return results


@contextmanager
def everything_http() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        ["node", str(EVERYTHING / "index.js"), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        import socket

        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("server-everything did not start listening")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _tool_names() -> list[str]:
    async with StdioClient("node", [str(EVERYTHING / "index.js"), "stdio"], mode="legacy") as client:
        return [t.name for t in await client.list_tools()]


def _manifest(tmp_path: Path, names: list[str]) -> Path:
    grants = ", ".join(json.dumps(f"tool:{n}") for n in names)
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"""kind: Gateway
metadata: {{ name: Conformance }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Everything
    effects: none
---
kind: Runtime
metadata: {{ name: Policy }}
permissions: {{ allow: [{grants}, "resources:*", "prompts:*"] }}
---
kind: Mcp.StdioClient
metadata: {{ name: EverythingMcp }}
command: node
args: [{json.dumps(str(EVERYTHING / "index.js"))}, stdio]
mode: legacy
---
kind: AiMcp.ToolProvider
metadata: {{ name: Everything }}
client: !ref EverythingMcp
""",
        encoding="utf-8",
    )
    return path


def _documented() -> dict[str, tuple[bool, bool]]:
    """The table of docs/gateway.md's Conformance section: scenario -> (direct, through the gateway)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Conformance", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[bool, bool]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[1] == "pass", cells[2] == "pass")
    return rows


async def test_every_scenario_server_everything_passes_also_passes_through_the_gateway(
    tmp_path: Path,
) -> None:
    _require()
    with everything_http() as url:
        direct = run_suite(url, tmp_path / "direct")
    assert len(direct) >= 25, f"the suite ran only {sorted(direct)}"
    manifest = _manifest(tmp_path, await _tool_names())
    with gateway_http(manifest) as url:
        through = run_suite(url, tmp_path / "gateway")
    assert set(through) == set(direct)
    regressions = [s for s, ok in direct.items() if ok and not through[s] and s not in DIFFERENT]
    assert regressions == [], f"pass directly, fail through the gateway: {regressions}"
    for scenario in DIFFERENT:
        assert direct[scenario] and not through[scenario], f"DIFFERENT is stale for {scenario}"
    measured = {s: (direct[s], through[s]) for s in direct}
    assert _documented() == measured, (
        "docs/gateway.md's conformance table differs from this run: "
        + json.dumps(
            {s: ["pass" if a else "fail", "pass" if b else "fail"] for s, (a, b) in sorted(measured.items())}
        )
    )
