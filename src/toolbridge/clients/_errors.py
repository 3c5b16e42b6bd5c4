"""The one boundary where foreign exceptions from the `mcp` SDK become toolbridge errors.

Every call into the SDK (connect, `tools/list`, `tools/call`) has its exceptions passed through
`map_exception` (the clients do it from an `except` clause, see `ConnectionClient._raise_mapped`;
`map_sdk_errors()` is the same boundary as a context manager). The mapping, in the order it is
tried:

- a `ToolbridgeError` (already translated): passed through unchanged;
- an `MCPError` whose `data` carries `{"toolbridge": "protocol"}` (synthesized by our transports
  for a malformed or oversized response): `ProtocolError`;
- an `MCPError` whose `data` carries `{"toolbridge": "invalid_input"}` (synthesized by the stdio
  transport for a request of ours it could not encode, so never sent): `ConfigError`
  (`ERR_INVALID_INPUT`);
- an `MCPError` with code `CONNECTION_CLOSED` raised because the connection really ended:
  `TransportError`;
- the `MCPError` "Session terminated" (Streamable HTTP 404 on a known session), or any
  `MCPError` for a request the HTTP layer saw rejected for its session (`session_rejected`: 404,
  410, or a 400 that names the session, which some servers send):
  `SessionInvalidError` (the client re-handshakes once before surfacing it);
- any other `MCPError`: `JsonRpcError(rpc_code, rpc_message, data)`;
- `pydantic_core.PydanticSerializationError` (the SDK could not encode a request of ours, before
  sending it): `ConfigError` (`ERR_INVALID_INPUT`);
- `pydantic.ValidationError`, and `RuntimeError` (the SDK's output-schema validation and other
  checks of what the server sent): `ProtocolError`;
- an OAuth flow error, or any `MCPError` for a request the HTTP layer saw refused for its
  credentials (`auth_rejected`: 401, or a 403 `insufficient_scope` after the SDK's step-up):
  `TransportError` with code `ERR_MCP_AUTH`;
- `OSError`, anyio stream errors, `httpx2` errors: `TransportError` (URLs in the message are
  cut to scheme, host and port);
- an `ExceptionGroup`: unwrapped to its first leaf that is not a cancellation, then mapped.

Cancellation (and any other `BaseException` that is not an `Exception`) is never mapped. The
foreign exception is always kept as `__cause__`.

A server may itself answer with code -32000 (the SDK's `CONNECTION_CLOSED`) as a generic error, so
that code alone does not mean the connection ended: the caller passes `connection_closed`, a probe of
the connection's real state, and the SDK's exact "Connection closed" message is accepted as a second
signal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx2
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from ..errors import (
    ConfigError,
    JsonRpcError,
    ProtocolError,
    SessionInvalidError,
    ToolbridgeError,
    TransportError,
    bounded,
)
from ..redact import shorten_urls

__all__ = [
    "INVALID_INPUT_MARKER",
    "PROTOCOL_MARKER",
    "is_session_terminated",
    "map_exception",
    "map_sdk_errors",
    "unwrap_group",
]

PROTOCOL_MARKER = "protocol"
"""Value of `data["toolbridge"]` in a JSON-RPC error our transports synthesize for a bad response."""

INVALID_INPUT_MARKER = "invalid_input"
"""Value of `data["toolbridge"]` in the error for a request of ours that could not be encoded."""

_SESSION_TERMINATED = "Session terminated"

AUTH_ERROR_CODE = "ERR_MCP_AUTH"
"""The code of the `TransportError` raised when the server refuses the credentials or OAuth fails."""


def unwrap_group(exc: BaseException) -> BaseException:
    """The first leaf of an exception group that is an `Exception` (not a cancellation or exit).

    Falls back to the first leaf when every leaf is a `BaseException` only.
    """
    while isinstance(exc, BaseExceptionGroup):
        leaves = list(exc.exceptions)
        if not leaves:
            break
        meaningful = [e for e in leaves if isinstance(e, Exception)]
        exc = (meaningful or leaves)[0]
    return exc


def is_session_terminated(exc: BaseException) -> bool:
    """Whether `exc` is the SDK's spelling of a Streamable HTTP session rejection (HTTP 404)."""
    return isinstance(exc, MCPError) and exc.code == INVALID_REQUEST and exc.message == _SESSION_TERMINATED


def _is_protocol_marker(data: Any) -> bool:
    return isinstance(data, dict) and data.get("toolbridge") == PROTOCOL_MARKER


def map_exception(
    exc: BaseException,
    *,
    what: str,
    connection_closed: Callable[[], bool] | None = None,
    stderr_tail: Callable[[], str] | None = None,
    session_rejected: Callable[[], bool] | None = None,
    auth_rejected: Callable[[], str | None] | None = None,
) -> BaseException:
    """Translate one foreign exception into a toolbridge error (or return it unchanged).

    Args:
        exc: the exception raised by the SDK or the transport.
        what: a short description of the operation, for the message (`"tools/call 'echo'"`).
        connection_closed: returns True when the connection has really ended.
        stderr_tail: returns the last lines of the server's stderr, quoted on transport failures.
        session_rejected: returns True when the HTTP layer saw the server reject the session.
        auth_rejected: returns why the HTTP layer saw the server refuse the credentials, or None.

    Returns:
        A `ToolbridgeError` (with `exc` as `__cause__`), or `exc` itself for cancellations and
        exceptions that are not the server's doing.
    """
    exc = unwrap_group(exc)
    if isinstance(exc, ToolbridgeError) or not isinstance(exc, Exception):
        return exc  # already ours, or a cancellation / exit signal: never translated

    def transport(message: str) -> TransportError:
        tail = stderr_tail() if stderr_tail is not None else ""
        if tail:
            message = f"{message}; server stderr (last lines):\n{tail}"
        return TransportError(bounded(message))

    mapped: ToolbridgeError
    if isinstance(exc, MCPError):
        closed = connection_closed() if connection_closed is not None else False
        refused = auth_rejected() if auth_rejected is not None else None
        if isinstance(exc.data, dict) and exc.data.get("toolbridge") == INVALID_INPUT_MARKER:
            mapped = ConfigError(
                bounded(f"{what}: {exc.message}"), code="ERR_INVALID_INPUT", details={"request_sent": False}
            )
        elif refused and not _is_protocol_marker(exc.data):
            mapped = TransportError(bounded(f"{what}: {refused}"), code=AUTH_ERROR_CODE)
        elif _is_protocol_marker(exc.data):
            mapped = ProtocolError(bounded(f"{what}: {exc.message}"), details={"data": exc.data})
        elif exc.code == CONNECTION_CLOSED and (
            closed or (exc.message == "Connection closed" and exc.data is None)
        ):
            mapped = transport(f"{what}: the connection to the server closed")
        elif is_session_terminated(exc) or (
            exc.code in (INVALID_REQUEST, INTERNAL_ERROR)
            and session_rejected is not None
            and session_rejected()
        ):
            mapped = SessionInvalidError(f"{what}: the server rejected the HTTP session")
        else:
            mapped = JsonRpcError(
                bounded(f"{what}: the server answered with JSON-RPC error {exc.code}: {exc.message}"),
                rpc_code=exc.code,
                rpc_message=exc.message,
                data=exc.data,
            )
    elif isinstance(exc, PydanticSerializationError):
        mapped = ConfigError(
            bounded(f"{what}: the request could not be encoded, so it was not sent: {exc}"),
            code="ERR_INVALID_INPUT",
            details={"request_sent": False},
        )
    elif isinstance(exc, ValidationError):
        mapped = ProtocolError(bounded(f"{what}: the server sent an invalid message: {exc}"))
    elif isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL):
        mapped = transport(f"{what}: HTTP failure: {type(exc).__name__}: {shorten_urls(str(exc))}")
    elif isinstance(exc, OAuthFlowError):
        mapped = TransportError(
            bounded(f"{what}: OAuth failed: {type(exc).__name__}: {shorten_urls(str(exc))}"),
            code=AUTH_ERROR_CODE,
        )
    elif isinstance(
        exc,
        OSError
        | EOFError
        | anyio.BrokenResourceError
        | anyio.ClosedResourceError
        | anyio.EndOfStream
        | anyio.BusyResourceError,
    ):
        detail = str(exc) or type(exc).__name__
        mapped = transport(f"{what}: {detail}")
    elif isinstance(exc, RuntimeError):
        mapped = ProtocolError(bounded(f"{what}: {exc}"))
    else:
        return exc
    mapped.__cause__ = exc
    return mapped


@contextlib.contextmanager
def map_sdk_errors(
    what: str,
    *,
    connection_closed: Callable[[], bool] | None = None,
    stderr_tail: Callable[[], str] | None = None,
    session_rejected: Callable[[], bool] | None = None,
    auth_rejected: Callable[[], str | None] | None = None,
) -> Iterator[None]:
    """Run a block that calls the SDK; re-raise whatever escapes as a toolbridge error.

    Raises:
        TransportError, ProtocolError, JsonRpcError, SessionInvalidError: see the module table.
    """
    try:
        yield
    except BaseException as exc:
        mapped = map_exception(
            exc,
            what=what,
            connection_closed=connection_closed,
            stderr_tail=stderr_tail,
            session_rejected=session_rejected,
            auth_rejected=auth_rejected,
        )
        if mapped is exc:
            raise
        raise mapped from unwrap_group(exc)
