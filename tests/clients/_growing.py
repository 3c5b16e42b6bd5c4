"""`Growing`: growing_http_server.py run as a child process (in its own process group) for a test."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from subprocess_helpers import free_port as free_port

SERVER = Path(__file__).resolve().parent / "growing_http_server.py"


@dataclass
class Growing:
    """The running server: start, restart in place (SIGHUP), or kill and start a new process."""

    port: int
    process: subprocess.Popen[str] | None = None
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    starts: int = 0
    options: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.port), *self.options],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        out = self.process.stdout
        assert out is not None
        threading.Thread(target=lambda: [self.lines.put(line.strip()) for line in out], daemon=True).start()
        self.starts = 0
        self.wait_serving()

    def wait_serving(self) -> None:
        self.starts += 1
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                if self.lines.get(timeout=0.1) == f"serving {self.starts}":
                    return
        raise AssertionError(f"the server did not serve (start {self.starts}) within 20 s")

    def restart_in_place(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)
        self.wait_serving()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)
