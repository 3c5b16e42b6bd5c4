"""Helpers for tests that drive the `toolbridge` command as a child process."""

from __future__ import annotations

import os
import selectors
import subprocess
import time


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
