"""Fixtures of the fault suite: the hostile server (see hostile_server.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from types import ModuleType

import pytest
from _support import HOSTILE_CMD, HOSTILE_HTTP, load_hostile


@pytest.fixture(scope="session")
def hostile() -> ModuleType:
    """The hostile server's module, for `payload()` and `POISON_DESCRIPTION`."""
    return load_hostile()


@pytest.fixture(scope="session")
def hostile_cmd() -> list[str]:
    """Command line of the hostile server (append switches such as `--poison`)."""
    return list(HOSTILE_CMD)


@pytest.fixture(scope="module")
def hostile_http_url() -> Iterator[str]:
    """URL of a running hostile Streamable HTTP server (hostile_http_server.py), one per module."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(HOSTILE_HTTP), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    pytest.fail(f"hostile HTTP server did not start: {err[-2000:]}")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)
