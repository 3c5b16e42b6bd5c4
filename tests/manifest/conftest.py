"""Fixtures of the manifest tests: real MCP servers over Streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def listening(argv: list[str], what: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`argv` as a process (its own process group) until it listens on a free port (written
    `{port}` in `argv` and `env`); yields `http://127.0.0.1:PORT/mcp`; the process is stopped
    when the block ends."""
    port = free_port()
    proc = subprocess.Popen(
        [a.replace("{port}", str(port)) for a in argv],
        env={**os.environ, **{k: v.replace("{port}", str(port)) for k, v in (env or {}).items()}},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"{what} exited {proc.returncode}: {err[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not listen within 60 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture(scope="session")
def listening_process() -> Callable[..., AbstractContextManager[str]]:
    """`listening` for tests: `with listening_process(argv, what) as url: ...`."""
    return listening


@pytest.fixture
def everything_http(everything_js: str, node: str) -> Iterator[str]:
    """server-everything over Streamable HTTP on a free port; yields its endpoint."""
    with listening([node, everything_js, "streamableHttp"], "server-everything", {"PORT": "{port}"}) as url:
        yield url
