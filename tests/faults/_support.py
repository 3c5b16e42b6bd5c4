"""Helpers shared by the fault tests: the hostile server's location and probes of this process."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

HOSTILE = Path(__file__).resolve().parent / "hostile_server.py"
HOSTILE_CMD = [sys.executable, str(HOSTILE)]
HOSTILE_HTTP = Path(__file__).resolve().parent / "hostile_http_server.py"


def load_hostile() -> ModuleType:
    """The hostile server as a module (for `payload()` and its constants); does not run it."""
    spec = importlib.util.spec_from_file_location("toolbridge_hostile_server", HOSTILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rss_bytes() -> int:
    """Resident set size of this process, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def group_gone(pgid: int) -> bool:
    """Whether no process of group `pgid` is left (zombies awaiting a reaper count as gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True
