"""Model-legal tool names.

Model APIs accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`. `model_legal(name)` makes any
name fit, deterministically: every other character becomes `_`, and a name longer than 64
characters is cut to 55 characters plus `_` and the first 8 hex digits of the SHA-256 of the
original name, so two long names that share a beginning still differ. The agent keeps a map
from the legal name back to the exact original, and treats two originals that end up with the
same legal name as a collision (it never guesses).
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_NAME", "model_legal"]

MAX_NAME = 64
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")


def model_legal(name: str) -> str:
    """The model-legal form of `name` (unchanged when already legal)."""
    legal = _ILLEGAL.sub("_", name) or "_"
    if len(legal) > MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        legal = f"{legal[: MAX_NAME - 9]}_{digest}"
    return legal
