"""Canonical JSON: one byte string per JSON value, for hashes and size limits.

Keys sorted, no insignificant whitespace, UTF-8, non-ASCII kept as is, NaN and infinities
refused. Two argument objects that mean the same JSON get the same SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

__all__ = ["canonical_json", "sha256_hex"]

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What `json.dumps` would build for these options on every call; it keeps no state between
calls, so one is shared (the hot path hashes and sizes every call's arguments and result)."""


_c_make_encoder: Callable[..., Callable[[object, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_DEFAULT = _ENCODER.default
_ESCAPE = json.encoder.encode_basestring  # ensure_ascii=False


def canonical_json(value: object) -> bytes:
    """The canonical JSON bytes of `value`.

    What `_ENCODER.encode(value)` gives, built with the C encoder it would build (fresh
    circular-reference markers each time, as it does) without its two Python-level calls.

    Raises:
        TypeError: when `value` is not JSON data.
        ValueError: when it holds NaN or an infinity, a cycle, or nests too deep.
    """
    try:
        if _c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
            text = _ENCODER.encode(value)
        else:
            encode = _c_make_encoder({}, _DEFAULT, _ESCAPE, None, ":", ",", True, False, False)
            text = "".join(encode(value, 0))
    except RecursionError as exc:
        raise ValueError("the value nests too deep") from exc
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()
