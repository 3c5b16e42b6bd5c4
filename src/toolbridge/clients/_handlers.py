"""Answers to what an MCP server asks of its client: sampling, elicitation, roots, and log messages.

The public handler types take the SDK's own request and result types (from `mcp_types`) and nothing
else, so a handler is a plain `async def`:

```python
async def sampling_handler(params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult: ...
async def elicitation_handler(params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult: ...
```

A handler may also return `mcp_types.ErrorData` to refuse. An exception raised by a handler is
logged and becomes a JSON-RPC error for the server (code -32603), never a failure of the client.

Defaults: a capability is advertised only when it is handled. With no sampling or elicitation
handler, sampling or elicitation is not advertised; roots are advertised only when a list of roots
is given. So without any, the server sees the capabilities of a plain SDK client (and does not
offer tools that would need what nobody answers). `decline_elicitation` is a handler that declines
every request (`action: "decline"`), for a client that should offer elicitation with nobody there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeAlias

import mcp_types as types
from mcp.client.session import ClientRequestContext, ElicitationFnT, ListRootsFnT, SamplingFnT

__all__ = [
    "ElicitationHandler",
    "RootsSpec",
    "SamplingHandler",
    "decline_elicitation",
    "elicitation_callback",
    "roots_callback",
    "sampling_callback",
]

SamplingHandler: TypeAlias = Callable[
    [types.CreateMessageRequestParams],
    Awaitable[types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData],
]
"""Answers `sampling/createMessage`: given the request parameters, return the model's message."""

ElicitationHandler: TypeAlias = Callable[
    [types.ElicitRequestParams],
    Awaitable[types.ElicitResult | types.ErrorData],
]
"""Answers `elicitation/create` (form or URL mode): accept with content, decline, or cancel."""

RootsSpec: TypeAlias = Sequence[str | Path]
"""Roots to advertise: file paths (made absolute) or URIs (`file:///…`)."""

_log = logging.getLogger("toolbridge.clients")


async def decline_elicitation(params: types.ElicitRequestParams) -> types.ElicitResult:
    """An elicitation handler that declines every request, since nobody is there to answer."""
    return types.ElicitResult(action="decline")


def _failure(kind: str, exc: Exception) -> types.ErrorData:
    """The error answer for a handler that raised.

    The server is untrusted: it learns only that the handler failed and, for a toolbridge error,
    its stable code. The exception's own text (paths, provider messages) stays in the local log.
    """
    _log.warning("%s handler raised %s: %s", kind, type(exc).__name__, exc)
    code = getattr(exc, "code", None)
    reason = code if isinstance(code, str) else type(exc).__name__
    return types.ErrorData(code=types.INTERNAL_ERROR, message=f"{kind} handler failed ({reason})")


def sampling_callback(handler: SamplingHandler) -> SamplingFnT:
    """Adapt a toolbridge sampling handler to the SDK's callback signature."""

    async def callback(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        try:
            return await handler(params)
        except Exception as exc:
            return _failure("sampling", exc)

    return callback


def elicitation_callback(handler: ElicitationHandler | None) -> ElicitationFnT:
    """Adapt a toolbridge elicitation handler (None: `decline_elicitation`) to the SDK's signature."""
    chosen: ElicitationHandler = handler if handler is not None else decline_elicitation

    async def callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        try:
            return await chosen(params)
        except Exception as exc:
            return _failure("elicitation", exc)

    return callback


def _root_uri(root: str | Path) -> str:
    text = str(root)
    if "://" in text:
        return text
    return Path(text).expanduser().resolve().as_uri()


def roots_callback(roots: RootsSpec) -> ListRootsFnT:
    """An SDK `roots/list` callback that always answers with `roots`.

    Raises:
        pydantic.ValidationError: a root is not a valid `file://` URI.
    """
    items = [types.Root(uri=_root_uri(r), name=Path(str(r)).name or None) for r in roots]  # type: ignore[arg-type]
    result = types.ListRootsResult(roots=items)

    async def callback(context: ClientRequestContext) -> types.ListRootsResult:
        return result

    return callback
