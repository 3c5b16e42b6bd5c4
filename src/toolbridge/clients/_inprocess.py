"""`InProcessClient`: an MCP server object living in the same process (tests, embedding).

The server is an SDK `mcp.server.Server` (low level) or `mcp.server.mcpserver.MCPServer`. In
`"auto"` mode the SDK dispatches requests to it directly (the 2026-07-28 protocol, no JSON-RPC
framing); in `"legacy"` mode the two sides exchange JSON-RPC messages over in-memory streams after
an `initialize` handshake, exactly as over a pipe.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from ..errors import ConfigError
from ._base import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, DEFAULT_TOOLS_TTL, ConnectionClient, _Connection
from ._handlers import ElicitationHandler, RootsSpec, SamplingHandler

__all__ = ["InProcessClient"]


class InProcessClient(ConnectionClient):
    """A client for an SDK server object in this process.

    Args:
        server: an `mcp.server.Server` or `mcp.server.mcpserver.MCPServer`.
        client_info: name and version announced to the server.
        timeout: client-wide deadline of every request in seconds (default `DEFAULT_TIMEOUT`,
            300; None: none); a call's progress notifications push it back.
        sampling_handler: answers `sampling/createMessage` (default: not offered).
        elicitation_handler: answers `elicitation/create` (default: elicitation not offered).
        roots: roots to advertise (default: none).
        logger_name: logger for the server's log messages (default `toolbridge.server.<name>`).
        connect_timeout: seconds allowed for the handshake.
        mode: `"auto"` (direct 2026-07-28 dispatch) or `"legacy"` (JSON-RPC over memory streams).
        tools_ttl: seconds a cached tool list is trusted without a live change channel.

    Raises:
        ConfigError: `server` is not an SDK server object.
    """

    def __init__(
        self,
        server: Server[Any] | MCPServer,
        client_info: types.Implementation | Mapping[str, Any] | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: RootsSpec | None = None,
        logger_name: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        mode: str = "auto",
        tools_ttl: float | None = DEFAULT_TOOLS_TTL,
    ) -> None:
        if not isinstance(server, Server | MCPServer):
            raise ConfigError(
                f"InProcessClient: expected an mcp Server or MCPServer, got {type(server).__name__}",
                code="ERR_INVALID_INPUT",
            )
        super().__init__(
            client_info=client_info,
            timeout=timeout,
            sampling_handler=sampling_handler,
            elicitation_handler=elicitation_handler,
            roots=roots,
            logger_name=logger_name or f"toolbridge.server.{server.name}",
            connect_timeout=connect_timeout,
            mode=mode,
            tools_ttl=tools_ttl,
        )
        self.server = server

    def __repr__(self) -> str:
        return f"InProcessClient({self.server.name!r})"

    def _describe(self) -> str:
        return f"in-process server {self.server.name!r}"

    async def _open(self, stack: AsyncExitStack, conn: _Connection) -> Any:
        return self.server
