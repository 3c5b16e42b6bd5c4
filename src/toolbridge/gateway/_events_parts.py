"""Parts of the gateway's `EventHub` (`_events`): the token bucket that rate-limits an upstream's
notifications, and the cleaning of forwarded log data."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from ..errors import bounded
from ..sanitize import clean_text

__all__ = ["LOG_DATA_LIMIT", "Bucket", "clean_data"]

LOG_DATA_LIMIT = 4000
"""Characters of one forwarded log message's text."""


class Bucket:
    """A token bucket counting what it refused."""

    def __init__(self, burst: int, per_second: float) -> None:
        self.burst, self.rate = float(burst), per_second
        self.tokens, self.stamp = float(burst), time.monotonic()
        self.dropped = 0
        self.warned_at = -1e9

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.dropped += 1
        return False


def clean_data(data: Any, depth: int = 0) -> Any:
    """A log message's data with every string cleaned; deep or large data becomes bounded text."""
    if isinstance(data, str):
        return bounded(clean_text(data), LOG_DATA_LIMIT)
    if depth == 0:
        try:
            text = json.dumps(data, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(data)
        if len(text) > LOG_DATA_LIMIT:
            return bounded(clean_text(text), LOG_DATA_LIMIT)
    if depth > 20:
        return "…"
    if isinstance(data, Mapping):
        return {clean_text(str(k)): clean_data(v, depth + 1) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [clean_data(v, depth + 1) for v in data]
    if data is None or isinstance(data, bool | int | float):
        return data
    return clean_text(str(data))
