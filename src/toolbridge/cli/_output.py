"""Output helpers shared by the command modules.

Every command prints its results through `emit`, so that a reader which stops early (`toolbridge
tools … | head`) ends the output quietly instead of raising `BrokenPipeError` at exit.
"""

from __future__ import annotations

import os
import sys

__all__ = ["emit"]


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
