"""The `toolbridge` command.

Each group of subcommands lives in its own module with a `register(subparsers)` function that
adds its parsers and sets `handler` (a function `argparse.Namespace -> int`, the exit code).

Whatever happens, the command ends with at most one line on stderr and a documented exit code
(`EXIT_*` below, the table in docs/cli.md), never a traceback (except with `-vv`, for an
unexpected error):

- a Ctrl-C before the command starts (while Python imports the command modules) ends the process
  at once with 130; handling is in place before anything heavy is imported;
- a toolbridge error is `toolbridge: CODE: message`, with any control character from its text
  shown as an escape (`toolbridge.sanitize.visible_text`);
- stdout that cannot be written (closed, disk full) is `EXIT_OUTPUT`; a reader that goes away
  (`| head`) is not an error.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_USAGE",
    "main",
]

EXIT_OK = 0
"""The command did what was asked (a run succeeded, a check found no error, a lock matches)."""
EXIT_FAILURE = 1
"""It ran and failed: a toolbridge error (`ERR_*`), a tool error, a check error, a run that did not
succeed or saw a failed tool call, a lock that differs."""
EXIT_USAGE = 2
"""The command line itself is wrong (unknown option, missing argument, a bad value)."""
EXIT_INTERNAL = 70
"""An unexpected error inside toolbridge (a bug): one line; `-vv` shows the traceback."""
EXIT_OUTPUT = 74
"""Standard output cannot be written (closed, or the disk is full)."""
EXIT_INTERRUPTED = 130
"""Interrupted by Ctrl-C (SIGINT); every server the command started was shut down."""

_COMMAND_MODULES = (
    "toolbridge.cli._tools",  # tools, call
    "toolbridge.cli._manifest",  # check, run, schema
    "toolbridge.cli._tasks",  # serve-tasks
    "toolbridge.cli._runs",  # runs
    "toolbridge.cli._lock",  # lock
    "toolbridge.cli._batch",  # batch
    "toolbridge.cli._journal",  # journal
    "toolbridge.cli._gateway",  # gateway
    "toolbridge.cli._console",  # console
)


def _interrupted_while_starting(signum: int, frame: Any) -> None:
    # Nothing has been started yet: no server, no file written. Leave at once and quietly.
    try:
        os.write(2, b"toolbridge: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def _install_sigint(handler: Any) -> Any:
    try:
        return signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):  # not the main thread (an embedding program): leave it alone
        return None


def build_parser() -> Any:
    import importlib

    from .._version import __version__
    from ._parsing import CommandParser

    parser = CommandParser(
        prog="toolbridge",
        description="Bring the tools of MCP servers to AI agents, safely and fast.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    parser.add_argument("--version", action="version", version=f"toolbridge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # that command group is not part of this build
            raise
        module.register(sub)
    for command in sub.choices.values():  # `-v` also after the subcommand: `toolbridge run -v …`
        command.add_argument(
            "-v", "--verbose", dest="verbose_after", action="count", default=0, help="more logging on stderr"
        )
    parser.set_defaults(commands=dict(sub.choices))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used as the console script).

    Everything the command writes to stdout and stderr passes through the redactor
    (`toolbridge.redact`): no registered secret value reaches the terminal or a `--json` reader.
    """
    previous = _install_sigint(_interrupted_while_starting)
    out, err = sys.stdout, sys.stderr
    try:
        from ..redact import RedactingStream

        if out is not None:  # a closed stdout stays None: `emit` says so
            sys.stdout = RedactingStream(out)
        if err is not None:
            sys.stderr = RedactingStream(err)
        return _main(argv)
    except KeyboardInterrupt:
        _say("toolbridge: interrupted")
        return EXIT_INTERRUPTED
    finally:
        if isinstance(sys.stdout, RedactingStream):
            sys.stdout = out
        if isinstance(sys.stderr, RedactingStream):
            sys.stderr = err
        if previous is not None:
            _install_sigint(previous)


def _say(line: str) -> None:
    """One line on stderr; a closed stderr is not an error."""
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(line + "\n")
            stream.flush()
    except (OSError, ValueError):
        pass


def _main(argv: Sequence[str] | None) -> int:
    import logging

    from ..errors import ToolbridgeError
    from ..sanitize import visible_text
    from ._logs import setup_logging
    from ._output import OutputError
    from ._parsing import action_help, split_argv

    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # options anywhere before `--`; after it, the server's command line (see `_parsing`)
    commands = parser.get_default("commands")
    head, server_command = split_argv(commands, args_list)
    if action_help(commands, head):  # `runs show --help`: the action's own help
        return EXIT_OK
    try:
        args = parser.parse_args(head)
    except SystemExit as exc:  # --help, --version, or a usage error (argparse printed it)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if server_command is not None:
        args.server_command = server_command
    verbose = int(args.verbose) + int(getattr(args, "verbose_after", 0) or 0)
    level = logging.WARNING - 10 * min(verbose, 2)
    setup_logging(level)  # log lines show control characters as escapes (`_logs`)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _install_sigint(signal.default_int_handler)  # from here on, Ctrl-C cancels the command cleanly
    try:
        try:
            code: int = _handle(handler, args)
        except ExceptionGroup as group:  # one error out of a task group is that error
            raise _sole(group) from None
    except ToolbridgeError as exc:
        _say(f"toolbridge: {visible_text(str(exc))}")
        return EXIT_FAILURE
    except OutputError as exc:
        _say(f"toolbridge: cannot write the output: {exc}")
        return EXIT_OUTPUT
    except KeyboardInterrupt:
        _say("toolbridge: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if verbose >= 2:
            raise
        _say(
            f"toolbridge: internal error: {type(exc).__name__}: {visible_text(str(exc))[:300]} "
            "(run with -vv for the traceback)"
        )
        return EXIT_INTERNAL
    return code


def _sole(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one exception inside nested exception groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


def _handle(handler: Any, args: Any) -> int:
    """Run a command with the telemetry it asked for (`--trace`, OTLP variables; see `_trace`)."""
    from ._trace import setup

    tracing = setup(bool(getattr(args, "trace", False)))
    if tracing is None:
        code: int = handler(args)
        return code
    try:
        code = handler(args)
    finally:
        tracing.finish()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
