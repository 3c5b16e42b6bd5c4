"""Shared fixtures: where the real MCP servers live, and a check that none outlives the suite.

The npm servers are installed by `.ci/run` (pinned in `tests/servers/package.json`) into
`tests/servers/node_modules`; `mcp-server-time` comes from PyPI into the same virtualenv as the
tests. Servers are started with `node .../dist/index.js` (never `npx`), so nothing is downloaded at
test time and no wrapper process can be orphaned.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests: the same examples on every run by default, so a gate (CI, a pre-push check) never
# fails at random; `HYPOTHESIS_PROFILE=fuzz` draws fresh examples each run for a fuzz sweep
# (docs/README.md, "Fuzzing"). Either way the example counts set on each test hold. No per-example
# deadline (hypothesis's default is 200 ms): that is a timing check, which a loaded machine fails
# at random (a gateway conversion test failed in a full run at load 6, and passes alone in 8 s);
# speed is measured in bench/, and many tests here already set `deadline=None` themselves.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("fuzz", derandomize=False, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers" / "node_modules" / "@modelcontextprotocol"
EVERYTHING_JS = SERVERS / "server-everything" / "dist" / "index.js"
FILESYSTEM_JS = SERVERS / "server-filesystem" / "dist" / "index.js"
NODE = shutil.which("node") or "node"
VENV_BIN = Path(sys.executable).parent
TIME_SERVER = str(VENV_BIN / "mcp-server-time")

# Markers of processes the tests start; none may survive the session.
_SERVER_MARKERS = (str(ROOT / "tests"), "mcp-server-time", "server-everything", "server-filesystem")


def _require(path: Path, what: str) -> None:
    if not path.exists():
        pytest.fail(f"{what} is not installed at {path}; run `bash .ci/run` (or `npm ci` in tests/servers)")


@pytest.fixture(scope="session")
def everything_cmd() -> list[str]:
    """Command line of server-everything over stdio."""
    _require(EVERYTHING_JS, "@modelcontextprotocol/server-everything")
    return [NODE, str(EVERYTHING_JS), "stdio"]


@pytest.fixture(scope="session")
def filesystem_js() -> str:
    """Path of server-filesystem's entry point (append the allowed directories)."""
    _require(FILESYSTEM_JS, "@modelcontextprotocol/server-filesystem")
    return str(FILESYSTEM_JS)


@pytest.fixture(scope="session")
def everything_js() -> str:
    """Path of server-everything's entry point (append `stdio` or `streamableHttp`)."""
    _require(EVERYTHING_JS, "@modelcontextprotocol/server-everything")
    return str(EVERYTHING_JS)


@pytest.fixture(scope="session")
def node() -> str:
    return NODE


@pytest.fixture(scope="session")
def time_server_cmd() -> list[str]:
    """Command line of the PyPI `mcp-server-time` server."""
    if not Path(TIME_SERVER).exists():
        pytest.fail(f"mcp-server-time is not installed at {TIME_SERVER}; run `bash .ci/run`")
    return [TIME_SERVER, "--local-timezone", "UTC"]


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live descendant of `pid`, via /proc."""
    children: dict[int, list[int]] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        cmdlines[int(entry)] = cmd
    out: list[tuple[int, str]] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append((child, cmdlines.get(child, "")))
            stack.append(child)
    return out


def _orphans() -> list[tuple[int, str]]:
    """Server processes re-parented to init (their starter died without reaping them)."""
    found = []
    for pid, cmd in _descendants(1):
        if pid == os.getpid():
            continue
        if any(marker in cmd for marker in _SERVER_MARKERS) and "pytest" not in cmd:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    ppid = int(f.read().decode(errors="replace").rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == 1:
                found.append((pid, cmd))
    return found


@pytest.fixture(scope="session", autouse=True)
def no_server_outlives_the_suite() -> Iterator[None]:
    """After the whole session, no server process started by the tests may still run."""
    before = {pid for pid, _ in _orphans()}
    yield
    import time

    deadline = time.monotonic() + 10
    leaked: list[tuple[int, str]] = []
    while time.monotonic() < deadline:
        leaked = [(p, c) for p, c in _descendants(os.getpid()) if any(m in c for m in _SERVER_MARKERS)]
        leaked += [(p, c) for p, c in _orphans() if p not in before]
        if not leaked:
            break
        time.sleep(0.2)
    if leaked:
        for pid, _ in leaked:
            subprocess.run(["kill", "-9", str(pid)], check=False)
        listing = "; ".join(f"{p}: {c}" for p, c in leaked)
        pytest.fail(f"server processes outlived the test session: {listing}")


def descendants_of_this_process() -> list[tuple[int, str]]:
    """Public helper for tests that assert on leaks around one client."""
    return _descendants(os.getpid())


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> Iterator[None]:
    """Each test starts with an empty redactor: a secret one test registers (`s3cret`) must not
    scrub another test's expected output (`toolbridge.redact` is process-wide by design)."""
    from toolbridge.redact import forget_secrets

    forget_secrets()
    yield
    forget_secrets()


# -- PostgreSQL (the journal's shared backend) -------------------------------------------------
# `.ci/run` starts a throwaway server (`.ci/pg.sh`) and exports its URL; locally, start one with
# `bash .ci/pg.sh start /tmp/pg` and export the URL it prints. Tests that need it FAIL without it.

POSTGRES_ENV = "TOOLBRIDGE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The URL of the test PostgreSQL server (from TOOLBRIDGE_TEST_POSTGRES_URL)."""
    url = os.environ.get(POSTGRES_ENV, "")
    if not url:
        pytest.fail(
            f"{POSTGRES_ENV} is not set: start a server with `bash .ci/pg.sh start DIR` (or run .ci/run)"
        )
    return url


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty database on the test server for one test; dropped afterwards."""
    import uuid

    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = f"tb_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = conninfo_to_dict(postgres_server_url)
    host, port, user = (
        parts.get("host", "127.0.0.1"),
        parts.get("port", "5432"),
        parts.get("user", "postgres"),
    )
    password = parts.get("password")
    auth = f"{user}:{password}" if password else str(user)
    try:
        yield f"postgresql://{auth}@{host}:{port}/{name}"
    finally:
        with psycopg.connect(postgres_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def journal_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal's spec, once a SQLite file and once a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.sqlite")
    return str(request.getfixturevalue("postgres_url"))
