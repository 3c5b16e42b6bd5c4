"""Server-to-client requests answered by the call they belong to, not by the connection.

A server may ask its client something while serving a call: sampling, elicitation, roots. The
client-wide handlers (`sampling_handler=`, ...) answer for the whole connection; a caller that
serves several people over one connection (the gateway) needs each question to reach the person
whose call it is. `CallRequests` holds one call's handlers:

```python
client.offer_call_requests("elicitation", "sampling")      # before the first connection
result = await client.call_tool("pay", {"eur": 5000}, requests=CallRequests(elicitation=ask_alice))
```

Which call a request belongs to:

- **2026-07-28**: the server returns an `InputRequiredResult` as the call's own answer, so the
  attribution is certain. The call's handlers answer its `input_requests` and the call is retried
  with the answers and the server's `request_state` (at most `max_rounds` rounds), or, with
  `allow_input_required=True`, the caller receives the `InputRequiredResult` itself (wire form,
  `resultType: "input_required"`) and resumes with `input_responses=` and `request_state=`.
- **Handshake era**: a standalone `sampling/createMessage`, `elicitation/create` or `roots/list`
  request carries nothing that names the call it belongs to (the SDK's `ClientRequestContext`
  has none, and over stdio the wire has no relation either). It goes to a call's handler only
  when exactly one tool call is in flight on that connection; otherwise it is refused with a
  JSON-RPC error (-32600, logged at INFO with the reason), never guessed. A request that is not a
  tool call (a prompt, a resource read, a completion, a listing) sent through `sdk_request()`
  counts as in flight too, with no handlers: while it runs, no question of the server can be
  attributed to a tool call beside it, and a question asked during it alone is refused.

A kind offered with `offer_call_requests` is announced to the server (the capability), whether
or not a given call answers it; a call without a handler for it refuses it. A handler that
raises is logged and answered with -32603, as the client-wide handlers are.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from ..errors import ConfigError, ProtocolError

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientSession, ListRootsFnT
    from mcp.shared.dispatcher import ProgressFnT

    from ._base import _Connection
from ._handlers import (
    ElicitationHandler,
    SamplingHandler,
    _failure,
    elicitation_callback,
    sampling_callback,
)

__all__ = [
    "DEFAULT_INPUT_ROUNDS",
    "CallRequestKind",
    "CallRequests",
    "InFlightCalls",
    "PerCallRequests",
    "RootsHandler",
    "answer_input_request",
    "call_with_requests",
    "routed_callbacks",
]

_log = logging.getLogger("toolbridge.clients")

CallRequestKind: TypeAlias = Literal["sampling", "elicitation", "roots"]
KINDS: tuple[CallRequestKind, ...] = ("sampling", "elicitation", "roots")

RootsHandler: TypeAlias = Callable[[], Awaitable[types.ListRootsResult | types.ErrorData]]
"""Answers `roots/list` for one call."""

DEFAULT_INPUT_ROUNDS = 10
"""The most `InputRequiredResult` rounds one call answers itself (as the SDK's driver)."""


@dataclass(frozen=True, slots=True)
class CallRequests:
    """One call's answers to what its server asks (see the module docstring).

    Attributes:
        sampling: answers `sampling/createMessage` (None: refused).
        elicitation: answers `elicitation/create` (None: refused).
        roots: answers `roots/list` (None: refused).
    """

    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    roots: RootsHandler | None = None


class InFlightCalls:
    """The tool calls in flight on one connection that take server-to-client requests."""

    __slots__ = ("_calls", "_next")

    def __init__(self) -> None:
        self._calls: dict[int, CallRequests | None] = {}
        self._next = 0

    def enter(self, requests: CallRequests | None) -> int:
        self._next += 1
        self._calls[self._next] = requests
        return self._next

    def leave(self, token: int) -> None:
        self._calls.pop(token, None)

    def __len__(self) -> int:
        return len(self._calls)

    def sole(self) -> tuple[CallRequests | None, str | None]:
        """The one call's requests, or why a request cannot be attributed."""
        if len(self._calls) == 1:
            return next(iter(self._calls.values())), None
        if not self._calls:
            return None, "no call is in flight on this connection"
        return None, f"{len(self._calls)} calls are in flight on this connection; it is not known whose it is"


def _refused(kind: str, why: str) -> types.ErrorData:
    _log.info("a %s request of the server was refused: %s", kind, why)
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"{kind} refused: {why}")


async def answer_input_request(
    requests: CallRequests | None, request: types.InputRequest
) -> types.InputResponse | types.ErrorData:
    """Answer one server-to-client request with a call's handlers (refused when it has none)."""
    try:
        if isinstance(request, types.CreateMessageRequest):
            if requests is None or requests.sampling is None:
                return _refused("sampling", "the call does not take sampling requests")
            return await requests.sampling(request.params)
        if isinstance(request, types.ElicitRequest):
            if requests is None or requests.elicitation is None:
                return _refused("elicitation", "the call does not take elicitation requests")
            return await requests.elicitation(request.params)
        if requests is None or requests.roots is None:
            return _refused("roots", "the call does not take roots requests")
        return await requests.roots()
    except Exception as exc:
        return _failure(type(request).__name__.removesuffix("Request").lower(), exc)


class PerCallRequests:
    """The part of a toolbridge client that offers per-call server-to-client requests."""

    _call_requests: frozenset[str] = frozenset()
    _sampling_handler: SamplingHandler | None
    _elicitation_handler: ElicitationHandler | None
    _roots_callback: ListRootsFnT | None
    # the connection's state, kept by `ConnectionClient` (`sdk_request` reads it)
    _ready_connection: Callable[[], _Connection | None]
    _connection: Callable[[], Awaitable[_Connection]]
    _sdk_of: Callable[[_Connection], Client]

    def offer_call_requests(self, *kinds: CallRequestKind) -> None:
        """Offer the server `kinds` of requests ("sampling", "elicitation", "roots"), each answered
        by the call it belongs to (`call_tool(requests=)`; see `toolbridge.clients._call_requests`).
        Takes effect at the next connection (capabilities are declared when connecting).

        Raises:
            ConfigError: an unknown kind.
        """
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ConfigError(f"unknown kinds of server-to-client requests: {unknown!r}")
        self._call_requests = self._call_requests | frozenset(kinds)

    @asynccontextmanager
    async def sdk_request(self) -> AsyncIterator[Client]:
        """The SDK `Client` of the live connection (connecting if needed), for one request that is
        not a tool call: a prompt, a resource read, a completion, a listing.

        While the block runs the request counts among the connection's calls in flight, with no
        handlers, so a server-to-client request of the handshake era is never attributed to a tool
        call beside it (nor answered by anyone, when it is asked during this request alone).
        """
        conn = self._ready_connection() or await self._connection()
        token = conn.calls.enter(None)
        try:
            yield self._sdk_of(conn)
        finally:
            conn.calls.leave(token)

    def _sdk_callbacks(self, calls: InFlightCalls) -> dict[str, Any]:
        """The SDK client's callbacks: the client-wide handlers (only what has a handler is
        offered, so the server sees what a plain SDK client shows), and the kinds offered per call."""
        callbacks: dict[str, Any] = {
            "sampling_callback": sampling_callback(self._sampling_handler)
            if self._sampling_handler
            else None,
            "elicitation_callback": (
                elicitation_callback(self._elicitation_handler) if self._elicitation_handler else None
            ),
            "list_roots_callback": self._roots_callback,
        }
        if self._call_requests:
            callbacks.update(routed_callbacks(calls, self._call_requests, dict(callbacks)))
        return callbacks


_SDK_KEY = {
    "sampling": "sampling_callback",
    "elicitation": "elicitation_callback",
    "roots": "list_roots_callback",
}


def routed_callbacks(
    calls: InFlightCalls,
    kinds: frozenset[str],
    fallback: Mapping[str, Any],
) -> dict[str, Any]:
    """The SDK callbacks of the offered `kinds`: each answers through the sole call in flight
    (see the module docstring); `fallback` holds the client-wide SDK callbacks, which answer
    what no call can (when given)."""

    async def route(kind: str, context: ClientRequestContext, request: types.InputRequest) -> Any:
        requests, why = calls.sole()
        if why is not None:
            other = fallback.get(_SDK_KEY[kind])
            if other is not None:
                return await (other(context) if kind == "roots" else other(context, request.params))
            return _refused(kind, why)
        return await answer_input_request(requests, request)

    out: dict[str, Any] = {}
    if "sampling" in kinds:

        async def sampling(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
            return await route("sampling", context, types.CreateMessageRequest(params=params))

        out["sampling_callback"] = sampling
    if "elicitation" in kinds:

        async def elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
            return await route("elicitation", context, types.ElicitRequest(params=params))

        out["elicitation_callback"] = elicitation
    if "roots" in kinds:

        async def roots(context: ClientRequestContext) -> Any:
            return await route("roots", context, types.ListRootsRequest())

        out["list_roots_callback"] = roots
    return out


async def call_with_requests(
    calls: InFlightCalls,
    session: ClientSession,
    progress: ProgressFnT | None,
    name: str,
    arguments: dict[str, object],
    requests: CallRequests | None,
    input_responses: Mapping[str, types.InputResponse] | None,
    request_state: str | None,
    relay: bool,
    max_rounds: int = DEFAULT_INPUT_ROUNDS,
) -> types.CallToolResult | types.InputRequiredResult:
    """One `tools/call`, in flight in `calls` (so a handshake-era request finds it), whose
    2026-07-28 input rounds are answered by `requests` (or, with `relay`, handed back).

    Raises:
        ProtocolError: the server kept asking past `max_rounds` rounds, or answered with neither.
        MCPError: a request was refused (the server is not asked again).
    """
    token = calls.enter(requests)
    try:
        return await _rounds(
            session, name, arguments, progress, requests, input_responses, request_state, relay, max_rounds
        )
    finally:
        calls.leave(token)


async def _rounds(
    session: ClientSession,
    name: str,
    arguments: dict[str, object],
    progress: ProgressFnT | None,
    requests: CallRequests | None,
    input_responses: Mapping[str, types.InputResponse] | None,
    request_state: str | None,
    relay: bool,
    max_rounds: int,
) -> types.CallToolResult | types.InputRequiredResult:
    responses: types.InputResponses | None = dict(input_responses) if input_responses is not None else None
    state = request_state
    delay = 0.05
    for _ in range(max_rounds + 1):
        result = await session.call_tool(
            name,
            arguments,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
        )
        if not isinstance(result, types.InputRequiredResult):
            if not isinstance(result, types.CallToolResult):
                raise ProtocolError(f"tools/call {name!r}: the server answered with an unknown result")
            return result
        if relay:
            return result
        state = result.request_state
        if result.input_requests:
            delay = 0.05
            responses = await _answer_all(requests, result.input_requests)
        else:  # only state: the server is working; ask again shortly
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.25)
            responses = None
    raise ProtocolError(f"tools/call {name!r}: the server asked for input more than {max_rounds} times")


async def _answer_all(
    requests: CallRequests | None, asked: Mapping[str, types.InputRequest]
) -> dict[str, types.InputResponse]:
    """Answer every input request concurrently; the first refusal ends the call (`MCPError`)."""
    answers: dict[str, types.InputResponse] = {}
    refused: types.ErrorData | None = None

    async def one(tg: anyio.abc.TaskGroup, key: str, request: types.InputRequest) -> None:
        nonlocal refused
        answer = await answer_input_request(requests, request)
        if isinstance(answer, types.ErrorData):
            refused = answer
            tg.cancel_scope.cancel()
        else:
            answers[key] = answer

    async with anyio.create_task_group() as tg:
        for key, request in asked.items():
            tg.start_soon(one, tg, key, request)
    if refused is not None:
        raise MCPError.from_error_data(refused)
    return answers
