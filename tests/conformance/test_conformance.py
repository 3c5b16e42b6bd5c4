"""The official MCP conformance suite's client scenarios, run against toolbridge's own client.

`@modelcontextprotocol/conformance` (pinned in `tests/conformance/package.json`, installed with the
Node 22 it needs by `.ci/install-conformance.sh`) plays the server; `tests/conformance/client.py`
is the client under test. Each scenario is its own pytest test, run as

    node <conformance>/dist/index.js client --command "<python> client.py" --scenario X -o <tmp>

with Node 22 first on PATH. The verdict comes from the `checks.json` the runner writes: a scenario
passes when it produced checks, none of them is FAILURE or WARNING, and the runner exited 0 (it
exits non-zero when the client timed out). Scenarios listed in `conformance-baseline.yml` are
expected to fail (xfail, with the listed reason); one that passes fails its test so that the
baseline is trimmed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
NODE_BIN = HERE / "node_modules" / ".bin"
NODE = NODE_BIN / "node"
CONFORMANCE_JS = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CLIENT = HERE / "client.py"
BASELINE = HERE / "conformance-baseline.yml"

REQUIRED = ("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry")
"""Scenarios that must pass; never allowed in the baseline."""

SCENARIOS = (
    *REQUIRED,
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
)
"""Every client scenario of conformance 0.1.16 (checked against `conformance list` below)."""

CLIENT_TIMEOUT_MS = 20_000
"""How long the runner lets the client run (a passing scenario takes about 1.5 s)."""

Outcome = tuple[int, list[dict[str, Any]], str]
"""The runner's exit code, the checks from checks.json, and the console output (for messages)."""

PARALLEL = 2
"""Scenarios run at the same time (each is a Node runner plus a Python client, mostly start-up cost)."""


def _require_install() -> None:
    if not NODE.exists() or not CONFORMANCE_JS.exists():
        pytest.fail(
            f"the conformance suite is not installed under {HERE / 'node_modules'}; "
            "run `bash .ci/install-conformance.sh`"
        )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MCP_CONFORMANCE_SCENARIO", None)
    env.pop("MCP_CONFORMANCE_CONTEXT", None)
    return env


def _baseline() -> dict[str, str]:
    data = yaml.safe_load(BASELINE.read_text(encoding="utf-8")) or {}
    client = data.get("client") or {}
    assert isinstance(client, dict), "conformance-baseline.yml: `client` must map scenario -> reason"
    return {str(k): str(v) for k, v in client.items()}


def _run(
    scenario: str,
    out: Path,
    runner: Path = CONFORMANCE_JS,
    timeout_ms: int = CLIENT_TIMEOUT_MS,
    client: Path = CLIENT,
) -> Outcome:
    """Run one scenario with `client` as the client under test; return the runner's exit code,
    the checks, and its console output."""
    command = f"{sys.executable} {client}"
    # The runner splits --command on single spaces.
    assert " " not in sys.executable and " " not in str(client), "paths with spaces break --command"
    proc = subprocess.run(
        [
            str(NODE),
            str(runner),
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--timeout",
            str(timeout_ms),
            "-o",
            str(out),
        ],
        cwd=HERE,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout_ms / 1000 + 30,
        check=False,
    )
    files = sorted(out.rglob("checks.json"))
    checks: list[dict[str, Any]] = json.loads(files[-1].read_text(encoding="utf-8")) if files else []
    client_stderr = ""
    for path in out.rglob("stderr.txt"):
        client_stderr += path.read_text(encoding="utf-8", errors="replace")
    console = f"--- runner stdout\n{proc.stdout[-3000:]}\n--- runner stderr\n{proc.stderr[-3000:]}"
    console += f"\n--- client stderr\n{client_stderr[-3000:]}"
    return proc.returncode, checks, console


def _problems(exit_code: int, checks: list[dict[str, Any]]) -> list[str]:
    problems = [
        f"[{c.get('id')}] {c.get('status')}: {c.get('description')} {c.get('errorMessage') or ''}".strip()
        for c in checks
        if c.get("status") in ("FAILURE", "WARNING")
    ]
    if not checks:
        problems.append("the runner wrote no checks")
    if exit_code != 0 and not problems:
        problems.append(f"the runner exited {exit_code} (the client timed out or failed where it may not)")
    return problems


def test_scenario_list_matches_the_installed_suite() -> None:
    """A new scenario in the pinned suite must be added to SCENARIOS (and so get a test)."""
    _require_install()
    proc = subprocess.run(
        [str(NODE), str(CONFORMANCE_JS), "list"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listed: list[str] = []
    in_client = False
    for line in proc.stdout.splitlines():
        if line.startswith("Client scenarios"):
            in_client = True
        elif line.strip().startswith("- ") and in_client:
            listed.append(line.strip()[2:].split(" [", 1)[0])
        elif line and not line.startswith(" "):
            in_client = False
    assert sorted(listed) == sorted(SCENARIOS)


def test_baseline_is_well_formed() -> None:
    """Every entry names a known scenario and gives a reason; the required four are never listed."""
    baseline = _baseline()
    for scenario, reason in baseline.items():
        assert scenario in SCENARIOS, f"baseline lists unknown scenario {scenario!r}"
        assert scenario not in REQUIRED, f"{scenario!r} must pass; it may not be in the baseline"
        assert len(reason.strip()) > 20, f"baseline entry {scenario!r} needs a real reason"


@contextmanager
def started_runs(
    scenarios: Iterable[str],
    runner: Path = CONFORMANCE_JS,
    timeout_ms: int = CLIENT_TIMEOUT_MS,
    client: Path = CLIENT,
) -> Iterator[dict[str, Future[Outcome]]]:
    """Start `scenarios` on a small pool at once (`_run` each); each test then waits for its own.

    The pool is shut down (waiting for running scenarios) when the block ends.
    """
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp, ThreadPoolExecutor(PARALLEL) as pool:
        futures = {
            scenario: pool.submit(_run, scenario, Path(tmp) / f"run{i}", runner, timeout_ms, client)
            for i, scenario in enumerate(scenarios)
        }
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


def selected(request: pytest.FixtureRequest, test_name: str) -> list[str]:
    """The scenarios of the `test_name` tests pytest actually collected (so `-k` stays cheap)."""
    return [
        item.callspec.params["scenario"]
        for item in request.session.items
        if item.originalname == test_name and hasattr(item, "callspec")
    ]


@pytest.fixture(scope="module")
def scenario_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[Outcome]]]:
    """Every selected scenario, started at once (`started_runs`)."""
    _require_install()
    with started_runs(selected(request, "test_client_scenario")) as futures:
        yield futures


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str, scenario_runs: dict[str, Future[Outcome]]) -> None:
    exit_code, checks, console = scenario_runs[scenario].result(timeout=CLIENT_TIMEOUT_MS / 1000 * 4 + 60)
    problems = _problems(exit_code, checks)
    expected = _baseline().get(scenario)
    if scenario == "initialize":
        # The client under test must be toolbridge's own HttpClient, not the SDK's default client.
        names = {
            (c.get("details") or {}).get("clientName")
            for c in checks
            if c["id"] == "mcp-client-initialization"
        }
        assert names == {"toolbridge"}, f"unexpected client name(s) {names}"
    if expected is None:
        assert not problems, f"{scenario} failed:\n" + "\n".join(problems) + "\n" + console
    elif problems:
        pytest.xfail(f"in conformance-baseline.yml: {expected[:200]}")
    else:
        pytest.fail(
            f"{scenario} now passes but is listed in conformance-baseline.yml: remove the stale entry",
            pytrace=False,
        )
