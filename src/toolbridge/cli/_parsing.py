"""How every subcommand reads its command line: one placement rule, and help for each action.

Placement: a subcommand's options may come anywhere before `--`, before, between or after its
positional arguments (`call TOOL --env A=1 '{"x": 1}' --timeout 5 -- …` as `call --env A=1
--timeout 5 TOOL '{"x": 1}' -- …`): `CommandParser` parses each subcommand's arguments
intermixed. For the commands that start a server (`tools`, `call`, `lock`; they
`set_defaults(server_command=[])`), everything after the first `--` is the server's command line,
taken literally: `split_argv` cuts it off before argparse sees the rest.

Actions: a subcommand whose first positional names an action (`runs show`, `batch status`,
`journal migrate`) registers a parser per action with `add_action_help`; `COMMAND ACTION --help`
prints that action's own usage and options (`action_help`), not its parent's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn, TypeAlias

__all__ = ["CommandParser", "Subcommands", "action_help", "action_parsers", "add_action_help", "split_argv"]

_ACTIONS = "_action_parsers"

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What `register(subparsers)` of each command module is given: `add_subparsers()`'s action."""


class CommandParser(argparse.ArgumentParser):
    """A usage error is one line (`toolbridge: PROG: error … (see --help)`) and exit code 2;
    a subcommand's options and positionals may be intermixed (see the module)."""

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        from ..sanitize import visible_text
        from . import EXIT_USAGE, _say

        _say(f"toolbridge: {self.prog}: {visible_text(message)} (see --help)")
        raise SystemExit(EXIT_USAGE)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing or any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions):
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls parse_known_args twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def _command_at(commands: dict[str, argparse.ArgumentParser], words: list[str]) -> int | None:
    """Where the subcommand's name is in `words` (the first word that is no global option)."""
    at = next((i for i, word in enumerate(words) if not word.startswith("-")), None)
    return at if at is not None and words[at] in commands else None


def split_argv(
    commands: dict[str, argparse.ArgumentParser], argv: Sequence[str]
) -> tuple[list[str], list[str] | None]:
    """`(argv before the first "--", the server command after it)` for a server-starting command.

    The server command is None when the command starts no server or no `--` was given (then
    argv is returned whole, for argparse).
    """
    words = list(argv)
    at = _command_at(commands, words)
    if at is None or commands[words[at]].get_default("server_command") is None:
        return words, None
    try:
        cut = words.index("--", at + 1)
    except ValueError:
        return words, None
    return words[:cut], words[cut + 1 :]


def add_action_help(parent: argparse.ArgumentParser, name: str, *, usage: str, description: str) -> Any:
    """A parser for `PARENT NAME …`, whose help `PARENT NAME --help` prints.

    The caller adds the action's arguments to the returned parser (for its help: the parent
    still parses the command line).
    """
    actions: dict[str, argparse.ArgumentParser] = dict(parent.get_default(_ACTIONS) or {})
    child = argparse.ArgumentParser(prog=f"{parent.prog} {name}", usage=usage, description=description)
    actions[name] = child
    parent.set_defaults(**{_ACTIONS: actions})
    return child


def action_parsers(parent: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The action parsers registered on `parent`, by action name."""
    return dict(parent.get_default(_ACTIONS) or {})


def action_help(commands: dict[str, argparse.ArgumentParser], argv: Sequence[str]) -> bool:
    """Print the help of the action `argv` names when it asks for help (`runs show --help`).

    The action is the first word after the subcommand that names one of its actions. Returns
    whether help was printed.
    """
    words = list(argv)
    if "--" in words:
        words = words[: words.index("--")]
    if "-h" not in words and "--help" not in words:
        return False
    at = _command_at(commands, words)
    if at is None:
        return False
    actions = action_parsers(commands[words[at]])
    name = next((word for word in words[at + 1 :] if word in actions), None)
    if name is None:
        return False
    actions[name].print_help()
    return True
