"""The `toolbridge` command.

Each group of subcommands lives in its own module with a `register(subparsers)` function that
adds its parsers and sets `handler` (a function `argparse.Namespace -> int`, the exit code).
Errors from toolbridge become one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ..errors import ToolbridgeError

__all__ = ["main"]

_COMMAND_MODULES = (
    "toolbridge.cli._tools",  # tools, call
    "toolbridge.cli._manifest",  # check, run, schema
    "toolbridge.cli._tasks",  # serve-tasks
    "toolbridge.cli._runs",  # runs
    "toolbridge.cli._lock",  # lock
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolbridge",
        description="Bring the tools of MCP servers to AI agents, safely and fast.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # that command group is not part of this build
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used as the console script).

    Everything the command writes to stdout and stderr passes through the redactor
    (`toolbridge.redact`): no registered secret value reaches the terminal or a `--json` reader.
    """
    from ..redact import RedactingStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        return _main(argv)
    finally:
        if isinstance(sys.stdout, RedactingStream):
            sys.stdout = out
        if isinstance(sys.stderr, RedactingStream):
            sys.stderr = err


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(args_list)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = handler(args)
    except ToolbridgeError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("toolbridge: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
