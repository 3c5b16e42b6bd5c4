"""The reaper of a local Ray cluster: what the cluster left behind goes when its driver goes.

Ray's own processes outlive a driver killed with SIGKILL for about a minute (its dashboard and
runtime-env agents, the GCS, the raylet, idle workers). `start_local_cluster` therefore starts
this module as a small process of its own session (`python -m toolbridge.batch._reaper`) and
writes it the cluster's processes (`pid starttime` lines, read from `/proc`), keeping the pipe
open. When the pipe closes (the driver called `release()` after `ray.shutdown`, exited, or died:
the kernel closes it on SIGKILL too), the reaper sends SIGTERM to each listed process still alive
with the same start time and to every descendant of one, then SIGKILL to what is left after
`GRACE_S`, and exits.

Linux only (it reads `/proc`); elsewhere `processes()` finds nothing and no reaper is started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

__all__ = ["GRACE_S", "Reaper", "descendants", "processes"]

GRACE_S = 3.0
"""How long the reaper waits after SIGTERM before SIGKILL."""


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data.rpartition(b")")[2].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def processes() -> dict[int, tuple[int, int]]:
    """Every process of the machine: pid -> (parent pid, start time); empty without `/proc`."""
    out: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            found = _stat(int(name))
            if found is not None:
                out[int(name)] = found
    return out


def descendants(roots: Iterable[int], table: dict[int, tuple[int, int]] | None = None) -> dict[int, int]:
    """The descendants of `roots` (not the roots): pid -> start time."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in out:
                out[child] = table[child][1]
                stack.append(child)
    return out


class Reaper:
    """The driver's end of a reaper process (see the module docs)."""

    def __init__(self, cluster: dict[int, int]) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        if not cluster:
            return
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "toolbridge.batch._reaper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal is the driver's, not the reaper's
            env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG")},
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write("".join(f"{pid} {start}\n" for pid, start in cluster.items()).encode())
        self._proc.stdin.flush()

    def release(self) -> None:
        """Close the pipe (the reaper kills what is left of the cluster, then exits)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
            try:
                proc.wait(timeout=GRACE_S + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _signal(targets: dict[int, int], sig: int) -> dict[int, int]:
    """Send `sig` to each target still alive with its start time; returns those it was sent to."""
    alive: dict[int, int] = {}
    for pid, start in targets.items():
        found = _stat(pid)
        if found is None or found[1] != start:
            continue
        try:
            os.kill(pid, sig)
        except OSError:
            continue
        alive[pid] = start
    return alive


def main() -> None:
    listed: dict[int, int] = {}
    for line in sys.stdin.buffer:
        pid, _, start = line.decode("ascii", "replace").strip().partition(" ")
        if pid.isdigit() and start.isdigit():
            listed[int(pid)] = int(start)
    # EOF: the driver is gone (or released us); the listed processes' children are still theirs
    table = processes()
    targets = {pid: start for pid, start in listed.items() if table.get(pid, (0, -1))[1] == start}
    targets.update(descendants(targets, table))
    alive = _signal(targets, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {pid: start for pid, start in alive.items() if (_stat(pid) or (0, -1))[1] == start}
    _signal(alive, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main()
