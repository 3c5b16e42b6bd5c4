"""`TaskToolSet`: a tool file loaded, checked and ready to run, in process or behind a server.

A `TaskToolSet` owns everything a tool file needs at run time: the compiled tools, one
`TaskScheduler` (tasks one at a time), and the `TaskServices` (the browser, launched on first
use; the `http` allow list; the MCP servers of the `mcp` action). Close it (`aclose()` or
`async with`) to close the browser.

It implements the `ToolProvider` protocol, so an `Agent` can use task tools directly:
`list_tools()` gives `ToolSpec`s, and `call_tool(name, args)` returns a `ToolResult` — the task
envelope as structured content, or, when actions produced images, the envelope's JSON text
followed by the images — and raises `ToolError` (code `ERR_TOOL_TASK_FAILED`, the envelope in
`server_text` and `details["envelope"]`) when the status is not `success`. `run(name, args)`
gives the `TaskOutcome` itself, which is what the MCP server (`toolbridge serve-tasks`) returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from .._bounded import (
    MAX_DEPTH,
    MAX_JSON_FILE_BYTES,
    InputLimitError,
    depth_exceeds,
    loads_json,
    read_text_file,
)
from ..content import TextPart
from ..errors import ConfigError, ToolError
from ..tools import ToolResult, ToolSpec
from ._compat import TaskWarning
from ._parser import TaskTool
from ._scheduler import ElicitFn, ProgressFn, TaskOutcome, TaskScheduler
from ._tool_parser import ExtractedTool, McpToolParser
from .actions._context import McpServerConfig, TaskServices
from .actions._navigation import NavigationPolicy
from .actions._registry import ActionRegistry, default_registry
from .actions.browser import BrowserSession

__all__ = ["TaskToolSet", "load_mcp_servers", "read_tools_file"]


def read_tools_file(path: str | Path) -> Any:
    """The JSON content of a task tool file: the one place tool files are read.

    Raises:
        ConfigError: `ERR_TASK_FILE` when the file cannot be read, is not UTF-8 or is not JSON.
    """
    p = Path(path)
    try:
        return loads_json(read_text_file(p, max_bytes=MAX_JSON_FILE_BYTES))
    except InputLimitError as exc:
        raise ConfigError(
            f"{exc.where(str(p))}: the task tool file {exc.message}",
            code="ERR_TASK_FILE",
            details={"reason": exc.reason, "line": exc.line, "column": exc.column},
        ) from None


def load_mcp_servers(data: object) -> dict[str, McpServerConfig]:
    """Read `{"mcpServers": {name: {command, args, env, cwd} | {url}}}` (or the inner map).

    Raises:
        ConfigError: `ERR_CONFIG` naming the server that is malformed.
    """
    if isinstance(data, Mapping) and "mcpServers" in data:
        data = data["mcpServers"]
    if not isinstance(data, Mapping):
        raise ConfigError(
            "the MCP server configuration must be an object of servers by name", code="ERR_CONFIG"
        )
    if depth_exceeds(data):
        raise ConfigError(
            f"the MCP server configuration nests deeper than {MAX_DEPTH} levels", code="ERR_CONFIG"
        )
    return {str(name): McpServerConfig.from_json(str(name), cfg) for name, cfg in data.items()}


class TaskToolSet:
    """Task tools from one tool file, with their scheduler and services.

    Args:
        tools_json: the tool file's content (`{"tools": [...]}`).
        registry: the actions (default: `default_registry()`, with entry point actions).
        chromium: the Chromium executable (default: `$TOOLBRIDGE_CHROMIUM`, `/usr/bin/chromium`).
        headless: run Chromium without a window (default).
        http_allow: hosts (`name` or `name:port`) the `http` action may reach.
        browser_allow: where the browser may navigate: origins (`http://host:port`), hosts
            (`host`, `host:port`), `*` (any http(s) origin), or `file:` / `data:` /
            `javascript:`; nowhere but `about:blank` and the start page by default.
        start_url: a page the browser opens when it starts (its origin is allowed).
        mcp_servers: servers the `mcp` action may call, by name.
        step_delay_ms: pause between instructions (default 0).
        default_timeout_ms: how long element lookups retry (default 3000).
        instruction_timeout_s: the longest one instruction may run (default 120).
        strict: keys TinyAgent ignores are errors (`ERR_TASK_IGNORED_KEY`), not warnings.

    Attributes:
        warnings: what loading ignored (`TaskWarning`s), as TinyAgent ignores it.

    Raises:
        ConfigError: `ERR_TASK_*` when the tool file is invalid (every problem named);
            `ERR_TASK_FILE` when `tools_json` nests deeper than 100 levels or holds a cycle (the
            bound a tool file read from disk has); `ERR_CONFIG` for a bad allow list entry, start
            URL, or a delay or timeout that is not a number of the right sign.
    """

    generation = 0

    def __init__(
        self,
        tools_json: Mapping[str, object],
        *,
        registry: ActionRegistry | None = None,
        chromium: str | None = None,
        headless: bool = True,
        http_allow: Iterable[str] = (),
        browser_allow: Iterable[str] = (),
        start_url: str | None = None,
        mcp_servers: Mapping[str, McpServerConfig] | None = None,
        step_delay_ms: int = 0,
        default_timeout_ms: int = 3000,
        instruction_timeout_s: float = 120.0,
        strict: bool = False,
    ) -> None:
        numbers = (step_delay_ms, default_timeout_ms, instruction_timeout_s)
        if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
            raise ConfigError("delays and timeouts must be numbers", code="ERR_CONFIG")
        if step_delay_ms < 0 or default_timeout_ms < 0 or not instruction_timeout_s > 0:
            raise ConfigError("delays and timeouts must not be negative", code="ERR_CONFIG")
        if depth_exceeds(tools_json):  # what `read_tools_file` refuses in a file: the same bound here
            raise ConfigError(
                f"the task tool definitions nest deeper than {MAX_DEPTH} levels (or hold a cycle)",
                code="ERR_TASK_FILE",
                details={"reason": "too_deep"},
            )
        self.registry = registry if registry is not None else default_registry()
        self.services = TaskServices(
            browser=BrowserSession(
                chromium,
                headless=headless,
                navigation=NavigationPolicy.parse(browser_allow),
                start_url=start_url,
            ),
            http_allow=frozenset(h.lower() for h in http_allow),
            mcp_servers=dict(mcp_servers or {}),
            default_timeout_ms=default_timeout_ms,
        )
        self.scheduler = TaskScheduler(
            self.registry,
            self.services,
            step_delay_ms=step_delay_ms,
            instruction_timeout_s=instruction_timeout_s,
        )
        self.parser = McpToolParser(self.scheduler.run, registry=self.registry, strict=strict)
        self._tools: dict[str, ExtractedTool] = {t.name: t for t in self.parser.extract_all_tools(tools_json)}
        self.warnings: list[TaskWarning] = list(self.parser.warnings)

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> TaskToolSet:
        """Load a tool file (JSON). Options are those of the constructor.

        Raises:
            ConfigError: `ERR_TASK_FILE` when the file cannot be read or is not JSON;
                `ERR_TASK_*` when its content is invalid.
        """
        p = Path(path)
        data = read_tools_file(p)
        try:
            return cls(data, **options)
        except ConfigError as exc:
            raise ConfigError(f"{p.name}: {exc.message}", code=exc.code, details=exc.details) from None

    # -- the tools ------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The tool names, in file order."""
        return list(self._tools)

    def get(self, name: str) -> ExtractedTool | None:
        """The extracted tool named `name`, or None."""
        return self._tools.get(name)

    def task_tool(self, name: str) -> TaskTool:
        """The compiled tool named `name`.

        Raises:
            ConfigError: `ERR_TASK_UNKNOWN_TOOL` when there is none.
        """
        found = self._tools.get(name)
        if found is None:
            raise ConfigError(
                f"no task tool named {name!r} (tools: {', '.join(self._tools) or 'none'})",
                code="ERR_TASK_UNKNOWN_TOOL",
            )
        return found.tool

    def mcp_definitions(self) -> list[dict[str, object]]:
        """Every tool's MCP `Tool` object as JSON."""
        return [t.definition() for t in self._tools.values()]

    # -- running --------------------------------------------------------------------------

    async def run(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        progress: ProgressFn | None = None,
        *,
        elicit: ElicitFn | None = None,
    ) -> TaskOutcome:
        """Run a task tool and return its outcome (failures are outcomes, not exceptions).

        `elicit(message, schema)`, when given, asks a person (the `userGuide` action uses it).

        Raises:
            ConfigError: `ERR_TASK_UNKNOWN_TOOL` when there is no such tool.
        """
        return await self.parser.run(self.task_tool(name), arguments, progress, elicit)

    async def list_tools(self) -> list[ToolSpec]:
        """The task tools as `ToolSpec`s (`ToolProvider`)."""
        return [t.tool.spec() for t in self._tools.values()]

    async def call_tool(
        self, name: str, args: Mapping[str, object], *, progress: ProgressFn | None = None
    ) -> ToolResult:
        """Run a task tool (`ToolProvider`).

        Returns:
            The envelope as structured content, or its JSON text followed by the images the
            actions produced.

        Raises:
            ConfigError: `ERR_TASK_UNKNOWN_TOOL` when there is no such tool.
            ToolError: `ERR_TOOL_TASK_FAILED` when the task ended with `error` or
                `partial completed` (the envelope in `details["envelope"]`).
        """
        outcome = await self.run(name, args, progress)
        if not outcome.ok:
            env = outcome.envelope
            error = env.get("error")
            message = error.get("message", "") if isinstance(error, dict) else ""
            raise ToolError(
                f"task tool {name!r} ended with {env['status']!r} at instruction {env['index']}: {message}",
                code="ERR_TOOL_TASK_FAILED",
                server_text=outcome.text(),
                details={"envelope": env},
            )
        if outcome.parts:
            return ToolResult.of_parts([TextPart(outcome.text()), *outcome.parts])
        return ToolResult.of_structured(outcome.envelope)

    # -- lifetime -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the browser (if it was launched). Safe to call more than once."""
        await self.services.aclose()

    async def __aenter__(self) -> TaskToolSet:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
