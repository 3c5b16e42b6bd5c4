"""Output helpers shared by the command modules.

Every command prints its results through `emit`, so that a reader which stops early (`toolbridge
tools … | head`) ends the output quietly instead of raising `BrokenPipeError` at exit.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from ..errors import ConfigError

__all__ = ["emit", "json_text", "parse_headers"]


def json_text(value: Any, **options: Any) -> str:
    """`json.dumps(value, **options)`, always valid JSON: NaN and the infinities become `null`.

    A server may put them in a result (Python's `json` writes them by default); JSON has no
    spelling for them, so they are printed as JavaScript's `JSON.stringify` does.
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    """A copy of `value` with every non-finite float replaced by None (iterative: any depth)."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[key] = None
        elif isinstance(item, dict):
            copy = dict(item)
            parent[key] = copy
            stack.extend((copy, k, v) for k, v in copy.items())
        elif isinstance(item, list | tuple):
            items = list(item)
            parent[key] = items
            stack.extend((items, i, v) for i, v in enumerate(items))
    return root[0]


def emit(text: str) -> None:
    """Print a line to stdout; a reader that went away (`| head`) is not an error.

    Args:
        text: the text to print (a newline is added).
    """
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet


def parse_headers(items: list[str]) -> dict[str, str]:
    """Turn repeated `--header NAME:VALUE` options into a dict.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for an item without a colon or with an empty name.
    """
    headers: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header must look like NAME:VALUE, got {item!r}", code="ERR_INVALID_INPUT")
        headers[name.strip()] = value.strip()
    return headers
