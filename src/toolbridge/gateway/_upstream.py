"""The gateway's side of one upstream MCP server: one call's context, passed explicitly from the
server handler down to the upstream call and back, and what the upstream asks during it.

`CallContext` is made by the server handler for each `tools/call`: who called (the identity),
on which downstream session, with which declared capabilities and protocol version, under which
request id, where progress goes. `GatewayCore.call` hands it to `GovernedSession.call_tool(...,
context=)`, which hands it to the provider (`accepts_context`), down to `UpstreamProvider`,
which calls the upstream's toolbridge client with the context's own `CallRequests`; the
upstream's answer in wire form comes back on the same object (`wire`, `result`,
`input_required`). Nothing travels in a context variable. An upstream tool error (`isError`)
raises `ToolError` with `details["is_error"]` (the runtime journals the call `failed`,
`TOOL_ERROR`) after its wire form is kept on the context (the gateway hands it to the client);
a JSON-RPC error answer is kept there too (`error`: the client gets its code and reason).

What the upstream asks during the call (see `toolbridge.clients._call_requests` for how the
client attributes it):

- A handshake-era downstream client gets real `sampling/createMessage`, `elicitation/create`
  and `roots/list` requests on its own request's stream (`related_request_id`), when it
  declared the capability. When it did not, the upstream's request is refused with -32021 and
  the call itself fails with -32021 (`missing`), as the 2026-07-28 spec says.
- A 2026-07-28 downstream client (no server-to-client channel) gets the upstream's
  `InputRequiredResult` relayed (`GatewayCore`); a handshake-era upstream's standalone request
  during its call suspends the call and becomes an `input_required` round (`_suspend`).
- Nothing reaches another call: the client gives a handshake-era request to a call only when it
  is the one call in flight on that connection; otherwise it is refused (logged at INFO).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import anyio
import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from ..bridge import McpToolProvider
from ..clients import CallRequestKind, CallRequests, ConnectionClient, ProgressHandler
from ..content import media_from_mcp, parts_from_mcp
from ..errors import ConfigError, JsonRpcError, ToolError
from ..tools import ToolResult

if TYPE_CHECKING:
    from ._core import Identity
    from ._sessions import CapabilityClients, IdentitySessions
    from ._suspend import InputAnswer, Suspend

__all__ = ["CallContext", "InFlight", "UpstreamProvider", "missing_capability"]

log = logging.getLogger("toolbridge.gateway")

DEFAULT_ASK_TIMEOUT_S = 120.0
"""How long a downstream client may take to answer what the upstream asked (approvalTimeoutMs)."""
LOGS_SENT_WAIT_S = 2.5
"""How long an answer waits for its call's log messages to be sent (each send gives up after
`_events.SEND_TIMEOUT_S`, 2 s)."""


_Answer = TypeVar("_Answer", bound=BaseModel)
"""The result type a server-to-client request expects (`ServerSession.send_request`)."""


def _mismatched(answer: InputAnswer) -> types.ErrorData:
    """The error for the upstream when the client answered its question with another kind."""
    log.info("a client answered a question with a %s", type(answer).__name__)
    return types.ErrorData(
        code=types.INVALID_REQUEST, message="the client's answer does not fit the question"
    )


@dataclass(eq=False, slots=True)
class CallContext:
    """One forwarded `tools/call`, from the server handler to the upstream and back.

    Attributes:
        identity: who called.
        session: the downstream request's SDK session (None: no client, as in tests of the core).
        request_id: the downstream request's id (server-to-client requests are related to it).
        progress: forwards the upstream's progress to the downstream client (or None).
        capabilities: what the downstream client declared (None: nothing).
        protocol_version: the downstream client's protocol version.
        ask_timeout_s: how long the downstream client may take to answer a request.
        upstream_responses, upstream_state: a 2026-07-28 round to resume upstream (the client's
            answers, and the upstream's own `request_state` the gateway kept for it).
        wire: the upstream's result in wire form, once it answered.
        result: the `ToolResult` made of it (compared by identity: a guard that rewrote the
            result makes the gateway serve the rewrite instead of `wire`).
        input_required: the upstream's `InputRequiredResult` (wire form) to relay, if it asked.
        missing: a capability the upstream needed that the client did not declare.
        pending_logs: log messages of this call waiting to be sent.
    """

    identity: Identity
    session: ServerSession | None = None
    request_id: types.RequestId | None = None
    progress: ProgressHandler | None = None
    capabilities: types.ClientCapabilities | None = None
    protocol_version: str | None = None
    ask_timeout_s: float = DEFAULT_ASK_TIMEOUT_S
    upstream_responses: Mapping[str, object] | None = None
    upstream_state: str | None = None
    wire: dict[str, object] | None = None
    result: ToolResult | None = None
    input_required: dict[str, object] | None = None
    error: JsonRpcError | None = None
    """The upstream's JSON-RPC error answer, when it gave one (the client gets its code and reason)."""
    missing: types.ClientCapabilities | None = None
    pending_logs: int = 0
    suspend: Suspend | None = None
    """Hands the upstream's question to a 2026-07-28 client as a round (`_suspend`), if set."""
    _requests: CallRequests | None = field(default=None, repr=False)
    _logs_idle: anyio.Event | None = field(default=None, repr=False)

    def log_started(self) -> None:
        """A log message of this call is being sent to its client."""
        self.pending_logs += 1

    def log_ended(self) -> None:
        """That message was sent (or given up at its send timeout)."""
        self.pending_logs -= 1
        if self.pending_logs == 0 and self._logs_idle is not None:
            self._logs_idle.set()

    async def logs_sent(self) -> None:
        """Wait until the log messages the upstream sent before its answer have gone to the client.

        They are sent beside the call, by other tasks; the answer must not overtake them, because
        over Streamable HTTP a message related to a request that was already answered has no
        stream left to go on. Bounded: each send gives up after its own timeout, and this wait
        after `LOGS_SENT_WAIT_S`.
        """
        if self.pending_logs <= 0:
            return
        idle = self._logs_idle = anyio.Event()
        with anyio.move_on_after(LOGS_SENT_WAIT_S):
            await idle.wait()

    @classmethod
    def of(
        cls,
        identity: Identity,
        session: ServerSession,
        request_id: types.RequestId | None = None,
        progress: ProgressHandler | None = None,
        ask_timeout_s: float = DEFAULT_ASK_TIMEOUT_S,
    ) -> CallContext:
        """The context of a request on `session` (its capabilities and version read from it)."""
        return cls(
            identity,
            session,
            request_id,
            progress,
            session.client_capabilities,
            session.protocol_version,
            ask_timeout_s,
        )

    @property
    def modern(self) -> bool:
        """Whether the downstream client speaks the 2026-07-28 era (no standalone requests)."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def requests(self) -> CallRequests:
        """This call's answers to the upstream's server-to-client requests."""
        if self._requests is None:
            self._requests = CallRequests(sampling=self.sample, elicitation=self.elicit, roots=self.roots)
        return self._requests

    # ------------------------------------------------------------------ server-to-client requests

    async def sample(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        result_type: type[types.CreateMessageResult | types.CreateMessageResultWithTools] = (
            types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        )
        answer = await self._answer(types.CreateMessageRequest(params=params), result_type)
        if isinstance(
            answer, (types.CreateMessageResult, types.CreateMessageResultWithTools, types.ErrorData)
        ):
            return answer
        return _mismatched(answer)

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        answer = await self._answer(types.ElicitRequest(params=params), types.ElicitResult)
        return answer if isinstance(answer, (types.ElicitResult, types.ErrorData)) else _mismatched(answer)

    async def roots(self) -> types.ListRootsResult | types.ErrorData:
        answer = await self._answer(types.ListRootsRequest(), types.ListRootsResult)
        return answer if isinstance(answer, (types.ListRootsResult, types.ErrorData)) else _mismatched(answer)

    async def _answer(self, request: types.InputRequest, result_type: type[_Answer]) -> _Answer | InputAnswer:
        """Ask this call's client (see the module docstring); the error for the upstream when
        it cannot be asked."""
        needed = missing_capability(self.capabilities, request)
        if needed is not None:
            self.missing = needed
            log.info("an upstream asked %s of a client that did not declare it", request.method)
            return types.ErrorData(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"the client did not declare the capability {request.method} needs",
                data={"requiredCapabilities": needed.model_dump(by_alias=True, exclude_none=True)},
            )
        if self.session is not None and self.session.can_send_request:
            return await self._ask(self.session, request, result_type, request.method)
        if self.suspend is not None:  # a 2026-07-28 client: the question becomes a round
            return await self.suspend(request)
        log.info("an upstream asked %s, but the client's connection cannot carry it", request.method)
        return types.ErrorData(
            code=types.INVALID_REQUEST,
            message=f"{request.method}: the client's connection cannot carry a request",
        )

    async def _ask(
        self, session: ServerSession, request: types.InputRequest, result_type: type[_Answer], what: str
    ) -> _Answer | types.ErrorData:
        try:
            with anyio.fail_after(self.ask_timeout_s):
                return await session.send_request(
                    request, result_type, metadata=ServerMessageMetadata(related_request_id=self.request_id)
                )
        except Exception as exc:  # the downstream refused, timed out or went away
            log.info("forwarding %s to the client failed: %s", what, type(exc).__name__)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client did not answer the {what}")


ALL_KINDS: frozenset[CallRequestKind] = frozenset({"sampling", "elicitation", "roots"})
"""What the gateway's shared upstream connections offer (each answered by its call)."""


def declared_kinds(capabilities: types.ClientCapabilities | None) -> frozenset[CallRequestKind]:
    """Which of sampling, elicitation and roots a downstream client declared."""
    if capabilities is None:
        return frozenset()
    declared: tuple[tuple[CallRequestKind, object], ...] = (
        ("sampling", capabilities.sampling),
        ("elicitation", capabilities.elicitation),
        ("roots", capabilities.roots),
    )
    return frozenset(kind for kind, offered in declared if offered is not None)


def missing_capability(
    capabilities: types.ClientCapabilities | None, request: types.InputRequest
) -> types.ClientCapabilities | None:
    """The capability `request` needs that `capabilities` lack (None: declared), as the
    `requiredCapabilities` of a -32021 error. A bare `elicitation: {}` counts as form support."""
    caps = capabilities
    if isinstance(request, types.ElicitRequest):
        elicitation = caps.elicitation if caps is not None else None
        if isinstance(request.params, types.ElicitRequestURLParams):
            if elicitation is not None and elicitation.url is not None:
                return None
            return types.ClientCapabilities(elicitation=types.ElicitationCapability(url={}))  # type: ignore[arg-type]
        if elicitation is not None and (elicitation.form is not None or elicitation.url is None):
            return None
        return types.ClientCapabilities(elicitation=types.ElicitationCapability(form={}))  # type: ignore[arg-type]
    if isinstance(request, types.CreateMessageRequest):
        sampling = caps.sampling if caps is not None else None
        wants_tools = bool(request.params.tools)
        if sampling is not None and (not wants_tools or sampling.tools is not None):
            return None
        return types.ClientCapabilities(sampling=types.SamplingCapability(tools={} if wants_tools else None))  # type: ignore[arg-type]
    if caps is not None and caps.roots is not None:
        return None
    return types.ClientCapabilities(roots=types.RootsCapability())


class UpstreamProvider(McpToolProvider):
    """A `McpToolProvider` for the gateway (see the module docstring).

    Args:
        client: the upstream's toolbridge client (offering sampling, elicitation and roots per
            call: `offer_call_requests`).
        inflight: the calls in flight on that client (shared by its bindings), for log messages.
    """

    accepts_context = True
    """`call_tool` takes the gateway's `CallContext` (`context=`)."""

    def __init__(
        self,
        client: ConnectionClient,
        inflight: InFlight | None = None,
        sessions: IdentitySessions | None = None,
        variants: CapabilityClients | None = None,
    ) -> None:
        super().__init__(client)
        self.upstream = client
        """The shared connection (`client`, as the gateway's own client type)."""
        self.inflight = inflight if inflight is not None else InFlight()
        self.sessions = sessions
        """Per-identity connections (`sessions: perIdentity`), or None: all share `client`."""
        self.variants = variants
        """For a 2026-07-28 upstream over HTTP: connections declaring a caller's capabilities."""

    async def call_tool(
        self, name: str, args: Mapping[str, object], context: CallContext | None = None
    ) -> ToolResult:
        if not isinstance(args, Mapping):
            raise ConfigError(f"arguments of tool {name!r} must be a JSON object", code="ERR_INVALID_INPUT")
        if context is None:  # used outside the gateway: behave like the plain provider
            return await super().call_tool(name, args)
        own = await self.sessions.acquire(context.identity.name) if self.sessions is not None else None
        calls = self.inflight.calls
        shared = own is None
        client = self.upstream if own is None else own
        if shared:  # the shared connection (a toolbridge client, `_build`), or its variant
            if self.variants is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                kinds = declared_kinds(context.capabilities)
                if kinds != ALL_KINDS:
                    client = await self.variants.acquire(kinds)
            calls.append(context)
        try:
            wire = await client.call_tool(
                name,
                args,
                progress=context.progress,
                requests=context.requests,
                input_responses=context.upstream_responses,
                request_state=context.upstream_state,
                allow_input_required=context.modern,
            )
        except JsonRpcError as exc:  # the gateway answers the client with it (code and reason)
            context.error = exc
            await context.logs_sent()
            raise
        finally:
            if shared:
                with contextlib.suppress(ValueError):
                    calls.remove(context)
            elif self.sessions is not None:
                self.sessions.release(context.identity.name)
        await context.logs_sent()
        if wire.get("resultType") == "input_required":  # journaled `failed` (INPUT_REQUIRED), relayed
            context.input_required = wire
            raise ToolError(f"tool {name!r} asked for input", details={"tool": name, "input_required": True})
        context.wire = wire
        content = wire.get("content") or []
        structured = wire.get("structuredContent")
        if wire.get("isError"):  # an answer: journaled `failed` (TOOL_ERROR); the client gets it whole
            raise ToolError(f"tool {name!r} reported an error", details={"tool": name, "is_error": True})
        if structured is not None:
            result = ToolResult.of_structured(structured, media_from_mcp(content))
        else:
            parts = parts_from_mcp(content)
            result = ToolResult.of_raw(content) if parts is None else ToolResult.of_parts(parts)
        context.result = result
        return result


@dataclass(eq=False)
class InFlight:
    """The gateway's calls in flight on one upstream client (its log messages' possible owners)."""

    calls: list[CallContext] = field(default_factory=list)

    def sole(self) -> CallContext | None:
        """The one call in flight, when there is exactly one (else nobody can be sure whose a
        message is)."""
        calls = self.calls
        return calls[0] if len(calls) == 1 else None
