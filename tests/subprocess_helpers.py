"""Helpers for tests that run servers and the `toolbridge` command as child processes (imported
as `subprocess_helpers`: tests/ is on sys.path once its conftest is loaded)."""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def listening(
    argv: list[str],
    what: str,
    env: dict[str, str] | None = None,
    *,
    port: int | None = None,
    seconds: float = 60.0,
    keep_stderr: bool = True,
) -> Iterator[str]:
    """`argv` as a process (its own process group) until it listens on `port` (a free one unless
    given; written `{port}` in `argv` and `env`); yields `http://127.0.0.1:PORT/mcp`. The test fails
    with the process's stderr (unless `keep_stderr` is off: then it goes nowhere) when it exits
    first, or after `seconds`. The process is stopped when the block ends."""
    port = port or free_port()
    proc = subprocess.Popen(
        [a.replace("{port}", str(port)) for a in argv],
        env={**os.environ, **{k: v.replace("{port}", str(port)) for k, v in (env or {}).items()}},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if keep_stderr else subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + seconds
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"{what} exited {proc.returncode}: {err[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not listen within {seconds:g} s")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL to its process group after 10 s; closes its stderr pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()


def stderr_until(proc: subprocess.Popen[bytes], marker: str, what: str, seconds: float = 60.0) -> str:
    """What `proc` wrote on stderr until `marker` appeared; fails the test (naming `what`) when the
    process exits first or `seconds` pass."""
    assert proc.stderr is not None
    # Read the raw pipe: a buffered reader could hold the line we wait for while select()
    # reports nothing new.
    fd = proc.stderr.fileno()
    seen = ""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while marker not in seen:
            assert time.monotonic() < deadline, f"{what} never happened: {seen!r}"
            if sel.select(timeout=0.5):
                chunk = os.read(fd, 65536)
                assert chunk, f"toolbridge exited early: {seen!r}"
                seen += chunk.decode(errors="replace")
    return seen
