"""Process-group handling for the stdio transport: bounded waits, SIGTERM then SIGKILL, reaping."""

from __future__ import annotations

import logging
import os
import signal
from contextlib import suppress
from typing import Final

import anyio
import anyio.abc

__all__ = ["EXIT_POLL_S", "_close_subprocess_transport", "_group_alive", "_terminate_group", "_wait_exit"]

EXIT_POLL_S: Final = 0.02
_REAP_S: Final = 2.0


async def _wait_exit(process: anyio.abc.Process, limit_s: float) -> bool:
    """Whether the process exited within `limit_s` seconds (polls `returncode`).

    `process.wait()` is not used: on asyncio it also waits for the pipes to close, which a
    grandchild holding them would delay indefinitely.
    """
    deadline = anyio.current_time() + limit_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(EXIT_POLL_S / 2)
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs.

    Signal 0 also reaches zombies (a killed grandchild waits for init to reap it), so on Linux a
    positive probe is confirmed by looking for a member in /proc that is not a zombie.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate_group(process: anyio.abc.Process, term_grace_s: float, logger: logging.Logger) -> None:
    """SIGTERM the server's process group, wait, SIGKILL what is left, and reap the leader.

    The server was started with `start_new_session=True`, so its pid is its group id and every
    descendant that did not leave the group (the `node` under `npx`, a `sh -c` child) is reached.
    Also run when the leader already exited, to collect descendants it left behind.
    """
    pgid = process.pid
    if process.returncode is not None and not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    deadline = anyio.current_time() + term_grace_s
    while _group_alive(pgid) and anyio.current_time() < deadline:
        _ = process.returncode  # lets trio reap the leader
        await anyio.sleep(EXIT_POLL_S / 2)
    if _group_alive(pgid):
        logger.debug("MCP server group %d survived SIGTERM; sending SIGKILL", pgid)
        _signal_group(pgid, signal.SIGKILL)
    if not await _wait_exit(process, _REAP_S):
        logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", pgid)


def _close_subprocess_transport(process: anyio.abc.Process) -> None:
    """Close asyncio's subprocess transport now, so it does not warn at garbage collection."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError, ProcessLookupError):
            close()
