"""Fixtures for the client tests: server-everything over Streamable HTTP, started per need.

The HTTP server is started as one `node` process in its own process group on a free port, and the
whole group is killed afterwards, so nothing outlives the test that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class HttpServer:
    """A running server-everything over Streamable HTTP."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def _start(node: str, everything_js: str, port: int) -> HttpServer:
    process = subprocess.Popen(
        [node, everything_js, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    server = HttpServer(process, port)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server-everything (HTTP) exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError(f"server-everything (HTTP) did not listen on port {port} within 15 s")


@pytest.fixture
def start_everything_http(node: str, everything_js: str) -> Iterator[Callable[[int | None], HttpServer]]:
    """Start server-everything over HTTP (on a given or free port); every one started is killed."""
    started: list[HttpServer] = []

    def start(port: int | None = None) -> HttpServer:
        server = _start(node, everything_js, port or free_port())
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


@pytest.fixture(scope="module")
def everything_http(node: str, everything_js: str) -> Iterator[HttpServer]:
    """One server-everything over HTTP shared by a test module."""
    server = _start(node, everything_js, free_port())
    yield server
    server.kill()


def _children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live, non-zombie descendant of `pid`, read from /proc."""
    parent_of: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdlines[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            parent_of[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found: list[tuple[int, str]] = []
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parent_of.items() if parent in frontier}
        found += [(child, cmdlines.get(child, "")) for child in frontier]
    return found


@pytest.fixture
def server_processes() -> Callable[[str], list[tuple[int, str]]]:
    """Returns the descendants of this test process whose command line contains a marker."""

    def find(marker: str) -> list[tuple[int, str]]:
        return [(p, c) for p, c in _children_of(os.getpid()) if marker in c]

    return find


@pytest.fixture
def growing() -> Iterator[Any]:
    """growing_http_server.py (an SDK `MCPServer` whose tools grow, restartable) on a free port."""
    from _growing import Growing

    server = Growing(free_port())
    server.start()
    yield server
    server.kill()
