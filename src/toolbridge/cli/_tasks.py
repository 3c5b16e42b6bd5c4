"""`toolbridge serve-tasks TOOLS.json`: serve task tools as an MCP server.

The tool file is loaded and checked completely before serving starts, so a bad file fails the
command at once (one line on stderr, exit 1) instead of failing a model's call later. Serving
is over stdio by default, or Streamable HTTP at `http://HOST:PORT/mcp` with `--transport http`.
Chromium is launched on the first browser action, headless unless `--headed`; it may navigate
only to the origins given with `--allow-origin` (and the `--start-url` page's).

Keys TinyAgent ignores (`task.id`, params an action does not take) are warnings: `--check` lists
them, serving prints them on stderr, and `--strict` makes them errors. `--actions MODULE[:ATTR]`
(repeatable) adds actions of your own: a module whose `@action` decorators register them, or a
`.py` file, and optionally a `register(registry)` function, an `ActionSpec` or a list of them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio

from ..errors import ConfigError
from ..sanitize import visible_text
from ._output import emit, warn
from ._parsing import Subcommands

__all__ = ["register"]


def register(subparsers: Subcommands) -> None:
    """Add the `serve-tasks` command."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve-tasks",
        help="serve JSON task tools (TinyAgent format) as an MCP server",
        description="Serve the task tools of TOOLS.json as an MCP server (stdio or Streamable HTTP).",
    )
    p.add_argument("tools", metavar="TOOLS.json", help="the task tool file")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument(
        "--chromium",
        metavar="PATH",
        help="Chromium executable (default $TOOLBRIDGE_CHROMIUM or /usr/bin/chromium)",
    )
    p.add_argument("--headed", action="store_true", help="show the browser window (needs a display)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a host the http action may reach (repeatable)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="where the browser may navigate: http://host:port, host[:port], '*', or file:/data:/javascript: "
        "(repeatable; default: nowhere but the start page)",
    )
    p.add_argument(
        "--start-url", metavar="URL", help="a page the browser opens when it starts (origin allowed)"
    )
    p.add_argument(
        "--actions",
        action="append",
        default=[],
        metavar="MODULE[:ATTR]",
        help="actions of your own: a module or .py file, optionally :register / :SPEC (repeatable)",
    )
    p.add_argument("--strict", action="store_true", help="keys TinyAgent ignores are errors, not warnings")
    p.add_argument("--mcp-config", metavar="FILE", help='JSON {"mcpServers": {...}} for the mcp action')
    p.add_argument("--step-delay-ms", type=int, default=0, help="pause between instructions (default 0)")
    p.add_argument("--timeout-ms", type=int, default=3000, help="element lookup timeout (default 3000)")
    p.add_argument("--check", action="store_true", help="only load and check the tool file, then exit")
    p.set_defaults(handler=_serve_tasks)


def _load_mcp_config(path: str) -> Any:
    from .._bounded import MAX_JSON_FILE_BYTES, InputLimitError, loads_json, read_text_file

    try:
        return loads_json(read_text_file(path, max_bytes=MAX_JSON_FILE_BYTES))
    except InputLimitError as exc:
        raise ConfigError(
            f"{exc.where(path)}: the --mcp-config file {exc.message}", code="ERR_CONFIG"
        ) from None


def _serve_tasks(args: argparse.Namespace) -> int:
    from ..tasks import TaskToolSet, load_mcp_servers
    from ..tasks.actions import registry_with
    from ..tasks.server import serve_http, serve_stdio

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a TCP port", code="ERR_CONFIG")
    servers = load_mcp_servers(_load_mcp_config(args.mcp_config)) if args.mcp_config else {}
    registry = registry_with(args.actions, Path.cwd()) if args.actions else None
    toolset = TaskToolSet.from_file(
        args.tools,
        registry=registry,
        chromium=args.chromium,
        headless=not args.headed,
        http_allow=args.allow_host,
        browser_allow=args.allow_origin,
        start_url=args.start_url,
        mcp_servers=servers,
        step_delay_ms=args.step_delay_ms,
        default_timeout_ms=args.timeout_ms,
        strict=args.strict,
    )
    for warning in toolset.warnings:
        warn(visible_text(f"toolbridge: warning: {args.tools}: {warning} [{warning.code}]"))
    if args.check:
        summary = f"{args.tools}: {len(toolset.names)} task tools ok: {', '.join(toolset.names)}"
        if toolset.warnings:
            summary += f" ({len(toolset.warnings)} warnings)"
        emit(summary)
        return 0
    if args.transport == "stdio":
        anyio.run(lambda: serve_stdio(toolset))
    else:
        anyio.run(lambda: serve_http(toolset, host=args.host, port=args.port))
    return 0
