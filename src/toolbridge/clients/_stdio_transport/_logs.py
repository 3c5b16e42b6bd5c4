"""Rate-limited logging of what a server says: its log notifications, stderr and stray stdout."""

from __future__ import annotations

import json
import logging
import time
from typing import Final

import mcp_types as types
from mcp.client.session import LoggingFnT

from toolbridge.errors import bounded

__all__ = ["_RateLimiter", "_suffix", "make_logging_callback"]

_MCP_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class _RateLimiter:
    """A token bucket: `burst` events at once, then `per_second` on average.

    `take()` answers whether one more event may be logged and how many were suppressed since the
    last one that was, so the next logged line can say so.
    """

    def __init__(self, per_second: float = 20.0, burst: int = 100) -> None:
        self._rate = per_second
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self.suppressed = 0

    def take(self) -> tuple[bool, int]:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            dropped, self.suppressed = self.suppressed, 0
            return True, dropped
        self.suppressed += 1
        return False, 0


def _suffix(dropped: int) -> str:
    return f" ({dropped} similar messages suppressed)" if dropped else ""


def make_logging_callback(
    logger: logging.Logger, *, per_second: float = 20.0, burst: int = 100
) -> LoggingFnT:
    """Build an SDK `logging_callback` that sends server log notifications to Python logging.

    Each `notifications/message` is logged on `logger` at the matching level (`notice` -> INFO,
    `alert`/`emergency` -> CRITICAL), with the server's logger name and its data (bounded in
    length). Logging is rate-limited (a token bucket of `burst` messages refilled at `per_second`);
    suppressed messages are counted and the count is reported with the next logged one. A message
    below the logger's effective level costs one dictionary lookup, so a flood of notifications
    does not slow the calls that follow it.

    Args:
        logger: where the messages go (per client, e.g. `toolbridge.server.NAME`).
        per_second: average number of messages logged per second once the burst is spent.
        burst: how many messages may be logged at once.

    Returns:
        An async callable for `mcp.Client(logging_callback=...)`.
    """
    limiter = _RateLimiter(per_second, burst)

    async def callback(params: types.LoggingMessageNotificationParams) -> None:
        level = _MCP_LEVELS.get(params.level, logging.INFO)
        if not logger.isEnabledFor(level):
            return
        allowed, dropped = limiter.take()
        if not allowed:
            return
        data = params.data
        if isinstance(data, str):
            text = data
        else:
            try:
                text = json.dumps(data, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                text = repr(data)
        source = f"[{bounded(params.logger, 100)}] " if params.logger else ""
        logger.log(level, "server log: %s%s%s", source, bounded(text, 1000), _suffix(dropped))

    return callback
