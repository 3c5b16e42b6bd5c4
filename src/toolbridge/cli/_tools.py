"""`toolbridge tools` and `toolbridge call`: look at an MCP server's tools and call one.

```
toolbridge tools [--json] [--mode auto|legacy|modern] -- COMMAND [ARGS...]   # a stdio server
toolbridge tools [--json] --url URL                     # a Streamable HTTP server
toolbridge call --url URL TOOL ['{"json": "arguments"}']
toolbridge call TOOL ['{"json": "arguments"}'] -- COMMAND [ARGS...]
```

Everything after the first `--` is the server's command line, taken literally (its own options
included), so for a stdio server the tool name and its arguments come *before* the `--`. The
arguments are one JSON object (default `{}`). Every option of `tools` and `call` may come before
or after the tool name and its arguments, but always before the `--` (`cli._parsing`). `--mode
legacy` skips the 2026-07-28 `server/discover` probe (older servers log a validation error for it).

`call` prints text parts as text, structured content as indented JSON, an image or audio part as
one line with its media type and size (also beside structured content, whose JSON then shows that
line in place of the media's base64), and a passed-through content array as JSON. A tool error
prints the server's message on stderr and exits with 1. A bad command, an unreachable URL or
invalid JSON arguments give one line on stderr and a non-zero exit, never a traceback.

The JSON arguments are read with the bounded JSON reader (`toolbridge._bounded.loads_json`): at
most 100 levels of nesting, and no `NaN` / `Infinity` (JSON has none; `ERR_INVALID_INPUT`). What
the server sends is shown through `visible_text` (tool names, descriptions, error texts, result
text), and JSON output is always valid JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from typing import TYPE_CHECKING, Any

from .._bounded import InputLimitError, loads_json
from ..content import media_placeholder
from ..errors import ConfigError, ToolbridgeError, ToolError
from ..sanitize import visible_text
from ._output import dumps, emit, parse_headers, warn
from ._parsing import Subcommands

if TYPE_CHECKING:
    from ..bridge import McpToolProvider
    from ..tools import ToolResult, ToolSpec

__all__ = ["register"]

_DESCRIPTION_WIDTH = 72


def register(subparsers: Subcommands) -> None:
    """Add the `tools` and `call` subcommands."""
    tools = subparsers.add_parser(
        "tools",
        help="list the tools of an MCP server",
        description="List the tools of an MCP server: `tools -- COMMAND [ARGS...]` or `tools --url URL`.",
    )
    _add_server_options(tools)
    tools.add_argument("--json", action="store_true", help="print the tools as JSON")
    tools.add_argument(
        "stray", nargs="*", metavar="-- COMMAND [ARGS...]", help="the stdio server's command line"
    )
    tools.set_defaults(handler=_run_tools, server_command=[])

    call = subparsers.add_parser(
        "call",
        help="call one tool of an MCP server",
        description=(
            "Call one tool: `call --url URL TOOL [JSON]` or `call TOOL [JSON] -- COMMAND [ARGS...]` "
            "(the tool and its JSON arguments come before the `--`)."
        ),
    )
    _add_server_options(call)
    call.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="deadline for the call (seconds)")
    call.add_argument("words", nargs="*", metavar="TOOL [JSON]", help="the tool and its JSON arguments")
    call.set_defaults(handler=_run_call, server_command=[])


def add_mode_option(parser: argparse.ArgumentParser) -> None:
    """`--mode auto|legacy|modern`: how the client negotiates the protocol with the server."""
    parser.add_argument(
        "--mode",
        choices=("auto", "legacy", "modern"),
        default="auto",
        help="protocol negotiation: auto (probe server/discover, fall back to initialize), "
        "legacy (initialize only: no probe), modern (2026-07-28 only)",
    )


class _Once(argparse.Action):
    """An option that names one thing: given twice with two values is a usage error."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None
    ) -> None:
        if getattr(namespace, self.dest, None) not in (None, values):
            parser.error(f"{option} given twice")
        setattr(namespace, self.dest, values)


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    add_mode_option(parser)
    parser.add_argument(
        "--url", action=_Once, help="Streamable HTTP endpoint of the server (http://host:port/mcp)"
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an HTTP header for --url (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="a variable for the stdio server, from VALUE or from this environment (repeatable); "
        "the server otherwise gets only HOME, LOGNAME, PATH, SHELL, TERM and USER",
    )
    parser.add_argument(
        "--inherit-env",
        action="store_true",
        help="pass this whole environment to the stdio server",
    )


def _server_env(items: list[str]) -> dict[str, str]:
    """`--env NAME[=VALUE]` options as a dict; values of credential-named variables become secrets.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for a bad name, or a NAME not set in this environment.
    """
    import os
    import re

    from ..redact import is_credential_name, register_secret

    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError("--env expects NAME or NAME=VALUE", code="ERR_INVALID_INPUT")
        if not sep:
            if name not in os.environ:
                raise ConfigError(f"--env {name}: not set in this environment", code="ERR_INVALID_INPUT")
            value = os.environ[name]
        if is_credential_name(name):
            register_secret(value, name=name)
        env[name] = value
    return env


def _seconds(text: str) -> float:
    """A `--timeout`: a finite number of seconds above zero (`nan`, `inf`, `0`, `-1` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {visible_text(text)[:40]}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text[:40]!r}")
    return value


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _fail(message: str, code: int = 2) -> int:
    warn(f"toolbridge: {visible_text(_one_line(message))}")
    return code


def _provider(
    url: str | None,
    headers: list[str],
    command: list[str],
    timeout: float | None,
    mode: str = "auto",
    env: list[str] | None = None,
    inherit_env: bool = False,
) -> McpToolProvider:
    from ..bridge import McpToolProvider
    from ..clients import DEFAULT_TIMEOUT, HttpClient, StdioClient

    if url and command:
        raise ConfigError("give either --url URL or `-- COMMAND`, not both", code="ERR_INVALID_INPUT")
    # Without --timeout the clients' own default deadline applies (never "wait forever").
    limit = timeout if timeout is not None else DEFAULT_TIMEOUT
    if url:
        return McpToolProvider(HttpClient(url, headers=parse_headers(headers), mode=mode, timeout=limit))
    if not command:
        raise ConfigError("no server: give --url URL or `-- COMMAND [ARGS...]`", code="ERR_INVALID_INPUT")
    if headers:
        raise ConfigError("--header applies to --url only", code="ERR_INVALID_INPUT")
    client = StdioClient(
        command[0],
        command[1:],
        env=_server_env(env or []),
        mode=mode,
        timeout=limit,
        inherit_env=inherit_env,
    )
    return McpToolProvider(client)


def _parse_arguments(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = loads_json(text)
        text.encode("utf-8")
    except InputLimitError as exc:
        where = f" (line {exc.line} column {exc.column})" if exc.line is not None else ""
        raise ConfigError(
            f"the JSON of the tool arguments {exc.message}{where}", code="ERR_INVALID_INPUT"
        ) from None
    except UnicodeEncodeError:
        raise ConfigError("the tool arguments are not UTF-8 text", code="ERR_INVALID_INPUT") from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"the tool arguments must be a JSON object, got {type(value).__name__}", code="ERR_INVALID_INPUT"
        )
    return value


def _spec_json(spec: ToolSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": dict(spec.parameters),
    }
    if spec.output_schema is not None:
        out["outputSchema"] = dict(spec.output_schema)
    if spec.annotations is not None:
        out["annotations"] = dict(spec.annotations)
    return out


def _table(specs: list[ToolSpec]) -> str:
    if not specs:
        return "(no tools)"
    names = [visible_text(s.name) for s in specs]
    width = max(len("NAME"), *(len(n) for n in names))
    lines = [f"{'NAME'.ljust(width)}  DESCRIPTION"]
    for name, spec in zip(names, specs, strict=True):
        first = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        if len(first) > _DESCRIPTION_WIDTH:
            first = first[: _DESCRIPTION_WIDTH - 1] + "…"
        lines.append(f"{name.ljust(width)}  {visible_text(first)}")
    return "\n".join(lines)


def _render(result: ToolResult) -> str:
    if result.kind == "structured":
        # Media beside structured content: one placeholder line each, never their base64.
        shown = dumps(result.structured_shown())
        return "\n".join([shown, *(media_placeholder(m) for m in result.media)])
    if result.kind == "raw":
        return dumps(list(result.raw))
    return visible_text(result.to_text(), multiline=True)


async def _list(provider: McpToolProvider) -> list[ToolSpec]:
    async with provider:
        return await provider.list_tools()


async def _call(provider: McpToolProvider, tool: str, arguments: dict[str, Any]) -> ToolResult:
    async with provider:
        return await provider.call_tool(tool, arguments)


def _run_tools(args: argparse.Namespace) -> int:
    command = list(args.server_command)
    if args.stray:
        return _fail(f"unexpected arguments {args.stray!r}: put the server command after `--`")
    try:
        provider = _provider(args.url, args.header, command, None, args.mode, args.env, args.inherit_env)
        specs = asyncio.run(_list(provider))
    except ToolbridgeError as exc:
        return _fail(str(exc), 1)
    if args.json:
        emit(dumps([_spec_json(s) for s in specs]))
    else:
        emit(_table(specs))
    return 0


def _run_call(args: argparse.Namespace) -> int:
    before, command = list(args.words), list(args.server_command)
    if not before:
        return _fail("no tool named: `call --url URL TOOL [JSON]` or `call TOOL [JSON] -- COMMAND`")
    if len(before) > 2:
        return _fail(f"too many arguments before the server command: {before[2:]!r}")
    tool = before[0]
    try:
        arguments = _parse_arguments(before[1] if len(before) > 1 else None)
        provider = _provider(
            args.url, args.header, command, args.timeout, args.mode, args.env, args.inherit_env
        )
        result = asyncio.run(_call(provider, tool, arguments))
    except ToolError as exc:
        warn(visible_text(exc.server_text or exc.message, multiline=True))
        return 1
    except ToolbridgeError as exc:
        return _fail(str(exc), 1)
    emit(_render(result))
    return 0
