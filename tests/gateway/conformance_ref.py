"""The conformance suite's reference server (tests/conformance/reference, vendored) as a process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from gw_helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "conformance"
NODE_BIN = CONFORMANCE / "node_modules" / ".bin"
REFERENCE = CONFORMANCE / "reference" / "alpha"
"""The reference at the suite's 0.2.0-alpha revision: it answers both eras on one URL."""


def require_reference() -> None:
    if not (NODE_BIN / "node").exists():
        pytest.fail("Node 22 is not installed; run `bash .ci/install-conformance.sh`")
    if not (REFERENCE / "node_modules" / "tsx" / "dist" / "cli.mjs").exists():
        pytest.fail("the reference server is not installed; run `bash .ci/install-conformance.sh`")


def node_env() -> dict[str, str]:
    """The environment with the pinned Node 22 first on PATH."""
    return {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def reference_server(folder: Path = REFERENCE) -> Iterator[str]:
    """`everything-server.ts`, run by its own tsx under Node 22; yields its MCP URL."""
    require_reference()
    port = free_port()
    proc = subprocess.Popen(
        [
            str(NODE_BIN / "node"),
            str(folder / "node_modules" / "tsx" / "dist" / "cli.mjs"),
            "everything-server.ts",
        ],
        cwd=folder,
        env={**node_env(), "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"the reference server {folder.name} did not start listening")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):  # tsx runs the server in a child: end the group
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
