"""Canonical JSON: one byte string per JSON value, for hashes and size limits.

Keys sorted, no insignificant whitespace, UTF-8, non-ASCII kept as is, NaN and infinities
refused. Two argument objects that mean the same JSON get the same SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "sha256_hex"]

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What `json.dumps` would build for these options on every call; it keeps no state between
calls, so one is shared (the hot path hashes and sizes every call's arguments and result)."""


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of `value`.

    Raises:
        TypeError: when `value` is not JSON data.
        ValueError: when it holds NaN or an infinity, or nests too deep.
    """
    try:
        text = _ENCODER.encode(value)
    except RecursionError as exc:
        raise ValueError("the value nests too deep") from exc
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()
