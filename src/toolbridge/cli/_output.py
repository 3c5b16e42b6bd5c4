"""Output helpers shared by the command modules.

Every command prints its results through `emit`, so that a reader which stops early (`toolbridge
tools … | head`) ends the output quietly instead of raising `BrokenPipeError` at exit.
"""

from __future__ import annotations

import os
import sys

from ..errors import ConfigError

__all__ = ["emit", "parse_headers"]


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
