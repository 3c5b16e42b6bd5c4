"""`StdioClient`: an MCP server run as a child process, spoken to over its stdin and stdout.

The process is started lazily by the first call, in its own session (process group), and reused by
every later call. Its stderr goes line by line to the Python logger `toolbridge.server.<name>`
(never to the caller's stdout or stderr). If it dies, the calls in flight fail at once with
`TransportError` and the next call starts it again. Closing the client closes the server's stdin,
then sends SIGTERM to its process group, then SIGKILL once the grace period is over, so no child or
grandchild (the `node` under an `npx`) survives.

Bytes become messages in `_stdio_transport.StdioTransport` (linear-time reading, a message size
cap, malformed or oversized responses failing their own call at once); the SDK's `ClientSession`
keeps the JSON-RPC layer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp_types as types

from ..errors import ConfigError
from ..redact import redact
from ._base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT,
    DEFAULT_TOOLS_TTL,
    ConnectionClient,
    _Connection,
)
from ._handlers import ElicitationHandler, RootsSpec, SamplingHandler
from ._stdio_transport import StdioTransport

__all__ = ["StdioClient"]

STDIN_CLOSE_WAIT_S = 1.0
"""Seconds a server gets to exit by itself after its stdin closes, before SIGTERM."""


class StdioClient(ConnectionClient):
    """A client for an MCP server started as a child process (stdio transport).

    Args:
        command: the program to run (looked up on `PATH`).
        args: its arguments.
        env: environment variables for the server, added to the safe default set (see
            `inherit_env`).
        cwd: the server's working directory.
        client_info: name and version announced to the server.
        shutdown_grace_ms: how long the server may take to exit after SIGTERM before it is killed
            with SIGKILL. Before SIGTERM, the server gets `STDIN_CLOSE_WAIT_S` (or the grace, if
            shorter) to exit on its own once its stdin is closed.
        timeout: client-wide deadline of every request in seconds (default `DEFAULT_TIMEOUT`,
            300; None: none); a call's progress notifications push it back.
        max_message_bytes: the largest single message accepted from the server.
        sampling_handler: answers `sampling/createMessage` (default: not offered).
        elicitation_handler: answers `elicitation/create` (default: elicitation not offered).
        roots: roots to advertise (default: none).
        logger_name: logger for the server's stderr and log messages
            (default `toolbridge.server.<command name>`).
        connect_timeout: seconds allowed to start the server and finish the handshake.
        mode: `"auto"` (probe `server/discover`, fall back to `initialize`), `"legacy"` (the
            `initialize` handshake only, no probe) or `"modern"` (2026-07-28 only, no handshake).
        tools_ttl: seconds a cached tool list is trusted without a live change channel.
        inherit_env: False (default): the server gets only the official SDK's safe set
            (`mcp.client.stdio.get_default_environment()`: `HOME`, `LOGNAME`, `PATH`, `SHELL`,
            `TERM`, `USER`, those that are set) plus `env`, so the host's API keys never reach a
            server that was not given them; True: this process's whole environment plus `env`,
            as a shell would start it (an explicit opt-in).

    Raises:
        ConfigError: an argument is invalid (empty command, non-positive limits).
    """

    _net = "pipe"

    max_message_bytes: int  # always given here (the base also serves transports without a cap)

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        client_info: types.Implementation | Mapping[str, Any] | None = None,
        shutdown_grace_ms: int = 5000,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: RootsSpec | None = None,
        logger_name: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        mode: str = "auto",
        inherit_env: bool = False,
        tools_ttl: float | None = DEFAULT_TOOLS_TTL,
    ) -> None:
        if not isinstance(command, str) or not command.strip():
            raise ConfigError("StdioClient: command must be a non-empty string", code="ERR_INVALID_INPUT")
        if isinstance(args, str):
            raise ConfigError(
                "StdioClient: args must be a sequence of strings, not one string", code="ERR_INVALID_INPUT"
            )
        if shutdown_grace_ms < 0:
            raise ConfigError(f"StdioClient: shutdown_grace_ms must be >= 0, got {shutdown_grace_ms}")
        if env is not None and (
            not isinstance(env, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise ConfigError("StdioClient: env must map names to strings", code="ERR_INVALID_INPUT")
        super().__init__(
            client_info=client_info,
            timeout=timeout,
            sampling_handler=sampling_handler,
            elicitation_handler=elicitation_handler,
            roots=roots,
            logger_name=logger_name or f"toolbridge.server.{Path(command).name or 'stdio'}",
            connect_timeout=connect_timeout,
            mode=mode,
            tools_ttl=tools_ttl,
            max_message_bytes=max_message_bytes,
        )
        self.command = command
        self.args = [str(a) for a in args]
        self.env = dict(env) if env is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.inherit_env = inherit_env
        self._shutdown_grace_s = shutdown_grace_ms / 1000.0

    def __repr__(self) -> str:
        return redact(f"StdioClient({self.command!r}, {self.args!r})")

    def _describe(self) -> str:
        return f"stdio server {Path(self.command).name!r}"

    @property
    def pid(self) -> int | None:
        """The process id of the running server, when the transport knows it (else None)."""
        conn = self._conn
        transport = conn.transport if conn is not None else None
        return transport.pid if isinstance(transport, StdioTransport) else None

    def _make_transport(self) -> StdioTransport:
        """The stdio transport for one connection (a fresh process each time it is entered)."""
        return StdioTransport(
            self.command,
            self.args,
            self.env,
            self.cwd,
            max_message_bytes=self.max_message_bytes,
            shutdown_grace_s=min(STDIN_CLOSE_WAIT_S, self._shutdown_grace_s),
            term_grace_s=self._shutdown_grace_s,
            logger=self.logger,
            inherit_env=self.inherit_env,
        )

    async def _open(self, stack: AsyncExitStack, conn: _Connection) -> StdioTransport:
        transport = self._make_transport()
        conn.transport = transport
        return transport

    def _stderr_tail(self, conn: _Connection | None) -> str:
        transport = conn.transport if conn is not None else None
        return transport.stderr_tail() if isinstance(transport, StdioTransport) else ""

    def _transport_closed(self, conn: _Connection) -> bool:
        transport = conn.transport
        return transport.exited.is_set() if isinstance(transport, StdioTransport) else False
