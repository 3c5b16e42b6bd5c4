"""Small parts of a client's call path kept out of `_base`: one call's rolling deadline, and the
note said when `auto` negotiation falls back to the handshake."""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import anyio
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["RollingDeadline", "note_fallback"]


class RollingDeadline:
    """One call's deadline: `limit` seconds from now, pushed back by each progress notification.

    `scope()` opens the cancel scope of one attempt (a retry on a new session shares the same
    deadline); `callback` is what the SDK gets as the call's progress callback: it moves the
    deadline to `limit` seconds after the notification, then hands the notification to the
    caller's own handler. With no limit there is no deadline, and `callback` is the caller's
    handler itself.
    """

    def __init__(self, limit: float | None, progress: Any) -> None:
        self.limit = limit
        self._progress = progress
        self._at = anyio.current_time() + limit if limit is not None else math.inf
        self._scope: anyio.CancelScope | None = None
        self.callback: ProgressFnT | None = (
            self._on_progress if limit is not None else cast(ProgressFnT | None, progress)
        )

    def scope(self) -> anyio.CancelScope:
        self._scope = anyio.CancelScope(deadline=self._at)
        return self._scope

    async def _on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        assert self.limit is not None
        self._at = max(self._at, anyio.current_time() + self.limit)
        if self._scope is not None:
            self._scope.deadline = self._at
        if self._progress is not None:
            await self._progress(progress, total, message)


def note_fallback(logger: logging.Logger, mode: str, described: str, protocol_version: str | None) -> None:
    """Say (at INFO, never as a warning) that `auto` fell back to the handshake, and how to skip it.

    The fallback is expected with servers of the 2025 era; some of them log a validation error of
    their own for the probe, which `mode="legacy"` avoids.
    """
    if mode == "auto" and protocol_version not in MODERN_PROTOCOL_VERSIONS:
        logger.info(
            "%s does not offer server/discover; using the initialize handshake (%s). "
            "mode 'legacy' skips the probe",
            described,
            protocol_version,
        )
