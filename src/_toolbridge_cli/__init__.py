"""The `toolbridge` console script's entry point, outside the `toolbridge` package on purpose.

Importing `toolbridge.cli` runs `toolbridge/__init__.py` first, and the command's modules take a
noticeable part of a second to import. A Ctrl-C in that window would end in a Python traceback of
the import machinery. This module imports nothing heavy: it makes a Ctrl-C during start-up end
the process at once with one line and exit code 130 (nothing has been started yet), then hands
over to `toolbridge.cli.main`, which installs the normal handling before the command runs.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]


def _interrupted_while_starting(signum: int, frame: object) -> None:
    try:
        os.write(2, b"toolbridge: interrupted\n")
    finally:
        os._exit(130)


def main() -> int:
    """Run `toolbridge` (the console script)."""
    try:  # noqa: SIM105 - no contextlib: nothing more is imported before the handler
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    except (ValueError, OSError):  # not the main thread: nothing to install
        pass
    from toolbridge.cli import main as run

    return run(sys.argv[1:])
