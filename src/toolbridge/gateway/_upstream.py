"""The gateway's side of one upstream MCP server: calls that keep the whole result, progress, and
server-to-client requests (sampling, elicitation) routed to the downstream client that caused them.

`UpstreamProvider` is a `McpToolProvider` whose `call_tool` keeps what the gateway must pass
back unchanged (the upstream's content blocks, `structuredContent` and `isError`) in the
`CallBox` of the forwarded call, and forwards the upstream's progress notifications to the
downstream client through it. An upstream tool error is an answer, not a failure of the call: it
is returned (and journaled as answered), and the gateway hands the client an `isError` result
with the text cleaned and bounded.

The box travels in a context variable: the gateway sets it around `GovernedSession.call_tool`,
which runs the provider's `call_tool` in the same task (one call per session), so nothing of one
call can reach another.

Sampling and elicitation: an upstream asks its client (the gateway) while one of the gateway's
calls to it is in flight. `ServerRequestRouter` sends the request on to the downstream client of
the most recent call in flight on that upstream, when that client declared the capability and
its connection can carry a server-to-client request; otherwise it declines (sampling: an error
answer; elicitation: `decline`). Nothing else can reach a downstream client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types

from ..bridge import McpToolProvider
from ..clients import ProgressHandler
from ..content import media_from_mcp, parts_from_mcp
from ..errors import ConfigError
from ..tools import ToolResult

__all__ = ["CURRENT_CALL", "CallBox", "ServerRequestRouter", "UpstreamProvider", "attach_router"]

log = logging.getLogger("toolbridge.gateway")


@dataclass
class CallBox:
    """What one forwarded call shares with the provider that runs it.

    Attributes:
        progress: forwards the upstream's progress to the downstream client (or None).
        downstream: the downstream request's SDK session (for sampling and elicitation).
        wire: the upstream's result in wire form, once it answered.
        result: the `ToolResult` made of it (compared by identity: a guard that rewrote the
            result makes the gateway serve the rewrite instead of `wire`).
    """

    progress: ProgressHandler | None = None
    downstream: Any = None
    request_id: Any = None
    identity: Any = None
    """Who called (the gateway's `Identity`), for what may reach them during the call."""
    pending_logs: int = 0
    wire: dict[str, Any] | None = None
    result: ToolResult | None = None


CURRENT_CALL: ContextVar[CallBox | None] = ContextVar("toolbridge_gateway_call", default=None)


class UpstreamProvider(McpToolProvider):
    """A `McpToolProvider` for the gateway (see the module docstring).

    Args:
        client: the upstream's toolbridge client.
        router: where the upstream's sampling and elicitation requests go.
    """

    def __init__(self, client: Any, router: ServerRequestRouter | None = None) -> None:
        super().__init__(client)
        self.router = router

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        if not isinstance(args, Mapping):
            raise ConfigError(f"arguments of tool {name!r} must be a JSON object", code="ERR_INVALID_INPUT")
        box = CURRENT_CALL.get()
        if box is None:  # used outside the gateway: behave like the plain provider
            return await super().call_tool(name, args)
        entry = self.router.enter(box) if self.router is not None else None
        try:
            wire = await self.client.call_tool(name, args, progress=box.progress)
        finally:
            if entry is not None and self.router is not None:
                self.router.leave(entry)
        box.wire = wire
        content = wire.get("content") or []
        structured = wire.get("structuredContent")
        if wire.get("isError"):
            result = ToolResult.of_raw(content)
        elif structured is not None:
            result = ToolResult.of_structured(structured, media_from_mcp(content))
        else:
            parts = parts_from_mcp(content)
            result = ToolResult.of_raw(content) if parts is None else ToolResult.of_parts(parts)
        box.result = result
        return result


@dataclass
class _Entry:
    box: CallBox
    seq: int = 0


@dataclass
class ServerRequestRouter:
    """Routes one upstream's sampling and elicitation requests (see the module docstring).

    Attributes:
        timeout_s: the longest a downstream client may take to answer.
    """

    timeout_s: float = 120.0
    _inflight: list[_Entry] = field(default_factory=list)
    _seq: int = 0

    def enter(self, box: CallBox) -> _Entry:
        self._seq += 1
        entry = _Entry(box, self._seq)
        self._inflight.append(entry)
        return entry

    def leave(self, entry: _Entry) -> None:
        with contextlib.suppress(ValueError):
            self._inflight.remove(entry)

    def inflight(self) -> list[CallBox]:
        """The boxes of the calls in flight on this upstream, most recent last."""
        return [entry.box for entry in self._inflight]

    def _target(self, capability: str) -> CallBox | None:
        for entry in reversed(self._inflight):
            session = entry.box.downstream
            if session is None:
                continue
            caps = getattr(session, "client_capabilities", None)
            if caps is None or getattr(caps, capability, None) is None:
                continue
            if not getattr(session, "can_send_request", False):
                continue
            return entry.box
        return None

    async def sampling(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        box = self._target("sampling")
        if box is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="the gateway's client does not offer sampling"
            )
        request = types.CreateMessageRequest(params=params)
        answer: types.CreateMessageResult | types.ErrorData = await self._ask(
            box, request, types.CreateMessageResult, "sampling"
        )
        return answer

    async def elicitation(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        box = self._target("elicitation")
        if box is None:
            return types.ElicitResult(action="decline")
        request = types.ElicitRequest(params=params)
        answer: types.ElicitResult | types.ErrorData = await self._ask(
            box, request, types.ElicitResult, "elicitation"
        )
        return answer

    async def _ask(self, box: CallBox, request: Any, result_type: Any, what: str) -> Any:
        from mcp.shared.message import ServerMessageMetadata

        try:
            with anyio.fail_after(self.timeout_s):
                return await box.downstream.send_request(
                    request, result_type, metadata=ServerMessageMetadata(related_request_id=box.request_id)
                )
        except Exception as exc:  # the downstream refused, timed out or went away
            log.info("forwarding %s to the client failed: %s", what, type(exc).__name__)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client did not answer the {what}")


def attach_router(client: Any, router: ServerRequestRouter) -> None:
    """Make `client` offer sampling and elicitation upstream, answered through `router`.

    Only before the client's first connection (the capabilities are declared at connecting).
    """
    client._sampling_handler = router.sampling
    client._elicitation_handler = router.elicitation
