"""What an action sees while it runs: `ActionContext`, and the server-wide `TaskServices`.

`TaskServices` is owned by a task tool set (one per served tool file): the shared browser
session (launched lazily, closed by `aclose()`), the allow list of the `http` action, and the
MCP servers the `mcp` action may call. `ActionContext` is made per instruction: it names the
tool, the task and the instruction, gives the earlier results by instruction id, and reaches the
services.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError, ToolError

if TYPE_CHECKING:
    from playwright.async_api import Page

    from ...clients import McpClient
    from .browser import BrowserSession

__all__ = ["ActionContext", "McpServerConfig", "TaskServices"]


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """An MCP server the `mcp` action may call.

    Give either `command` (a stdio server: `command` and `args`, optional `env` and `cwd`) or
    `url` (a Streamable HTTP endpoint). A stdio server gets the safe environment set plus `env`,
    or the whole environment with `inherit_env` (as `StdioClient`).
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    inherit_env: bool = False

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigError(
                "an MCP server for the mcp action needs exactly one of command or url", code="ERR_CONFIG"
            )

    @classmethod
    def from_json(cls, name: str, data: object) -> McpServerConfig:
        """Build from `{"command": ..., "args": [...], "env": {...}}` or `{"url": ...}`.

        Raises:
            ConfigError: `ERR_CONFIG` naming the server when the object is malformed.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"mcp server {name!r}: expected an object", code="ERR_CONFIG")
        unknown = set(data) - {"command", "args", "env", "cwd", "url"}
        if unknown:
            raise ConfigError(f"mcp server {name!r}: unknown keys {sorted(unknown)}", code="ERR_CONFIG")
        args = data.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"mcp server {name!r}: args must be a list of strings", code="ERR_CONFIG")
        env = data.get("env")
        if env is not None and not (
            isinstance(env, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise ConfigError(f"mcp server {name!r}: env must map strings to strings", code="ERR_CONFIG")
        for key in ("command", "cwd", "url"):
            if key in data and not isinstance(data[key], str):
                raise ConfigError(f"mcp server {name!r}: {key} must be a string", code="ERR_CONFIG")
        try:
            return cls(
                command=data.get("command"),
                args=tuple(args),
                env=dict(env) if env is not None else None,
                cwd=data.get("cwd"),
                url=data.get("url"),
            )
        except ConfigError as exc:
            raise ConfigError(f"mcp server {name!r}: {exc.message}", code=exc.code) from None


@dataclass
class TaskServices:
    """The server-wide things actions use.

    Attributes:
        browser: the shared browser session (launched on first use).
        http_allow: host names (or `host:port`) the `http` action may reach; empty means none.
        mcp_servers: servers the `mcp` action may call, by name.
        default_timeout_ms: how long element lookups retry by default.
    """

    browser: BrowserSession
    http_allow: frozenset[str] = frozenset()
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    default_timeout_ms: int = 3000
    _clients: dict[str, McpClient] = field(default_factory=dict, init=False, repr=False)

    def mcp_client(self, name: str) -> McpClient:
        """The toolbridge client of the configured MCP server `name`, created on first use.

        The client keeps one connection (a stdio server is started by the first call) until
        `aclose()`.

        Raises:
            ToolError: `ERR_TOOL_ACTION_FAILED` when no server of that name is configured.
        """
        client = self._clients.get(name)
        if client is not None:
            return client
        config = self.mcp_servers.get(name)
        if config is None:
            known = ", ".join(sorted(self.mcp_servers)) or "none"
            raise ToolError(
                f"mcp: no server named {name!r} is configured (configured: {known})",
                code="ERR_TOOL_ACTION_FAILED",
            )
        from ...clients import HttpClient, StdioClient

        if config.url is not None:
            client = HttpClient(config.url)
        else:
            assert config.command is not None
            client = StdioClient(
                config.command, config.args, env=config.env, cwd=config.cwd, inherit_env=config.inherit_env
            )
        self._clients[name] = client
        return client

    async def aclose(self) -> None:
        """Close what was opened (MCP connections, the browser). Safe to call more than once."""
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            with contextlib.suppress(Exception):  # a server that is already gone
                await client.aclose()
        await self.browser.aclose()


@dataclass(frozen=True, slots=True)
class ActionContext:
    """The context of one running instruction.

    Attributes:
        tool: the task tool's name.
        task_id: the id of this run of the task.
        index: the index of the top-level instruction running (a `catchInstruction` shares it).
        path: where the instruction is in the tool (`task.instructions[2].catchInstruction`).
        results: the results of earlier instructions that have an `id`, by id.
        previous: the results of all earlier top-level instructions, in order.
        services: the server-wide services.
        elicit: `await elicit(message, schema)` asks the person at the MCP client, when the
            client offers elicitation (None otherwise).
        task_state: a dict shared by the instructions of this run of the task (for actions that
            work in pairs, such as `apiConfirmStart` / `apiConfirmEnd`).
        cleanups: async functions run when the task ends, however it ends (newest first).
    """

    tool: str
    task_id: str
    index: int
    path: str
    results: Mapping[str, object]
    previous: Sequence[Any]
    services: TaskServices
    elicit: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    task_state: dict[str, Any] = field(default_factory=dict)
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def page(self) -> Page:
        """The shared browser page (launching the browser on first use).

        Raises:
            ToolError: `ERR_TOOL_BROWSER` when Chromium cannot be started.
        """
        return await self.services.browser.page()

    @property
    def timeout_ms(self) -> int:
        """The default element lookup timeout of the server, in milliseconds."""
        return self.services.default_timeout_ms
