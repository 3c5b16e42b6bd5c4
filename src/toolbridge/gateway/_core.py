"""The gateway's decisions, independent of any transport: what a client may list and call.

`GatewayCore` holds the union of the sources (one `ToolCatalog` shared by every client), the
identities (each with its own `Runtime`: permissions and limits, over one shared journal), and
the approval settings. The MCP server (`_server`) hands it each `tools/list` and `tools/call`.

- Listing: the union, namespaced by each binding's prefix, include/exclude applied, pinned
  (`PinnedToolProvider` withholds changed and new tools), sorted by name (a stable order
  whatever the upstreams do), then paginated with an opaque cursor.
- Calling: one governed session (`GovernedSession`, a journal run whose principal is the
  identity) per forwarded call, so one refused or failed call never closes a client's
  connection; the runtime's rules decide (grants, limits, budget, timeout, guards) before
  anything is sent. A tool whose binding needs approval asks the client first (elicitation).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS as MODERN

from ..calls import DeclaredToolLike, ToolBinding, ToolTarget
from ..catalog import Catalog, ToolCatalog
from ..clients import ConnectionClient
from ..errors import PolicyError, ToolbridgeError, bounded
from ..runtime import CODES, GovernedSession, Quota, Runtime, ToolGrantNeeds, effective_effects
from ._answers import error_result, from_tool_result, refusal, served_tool, upstream_error, upstream_rpc_error
from ._operator_approval import NOT_DECIDED, can_elicit
from ._replica_state import ReplicaState, SharedStateUnavailable
from ._rounds import (
    APPROVAL_KEY,
    APPROVAL_SCHEMA,
    MAX_ROUNDS,
    MAX_UPSTREAM_STATE,
    Round,
    RoundStates,
    approval_message,
    arguments_digest,
    too_large_to_show,
)
from ._suspend import CallOutcome, Question, Suspend, Suspensions
from ._upstream import CallContext, missing_capability

if TYPE_CHECKING:
    from ._operator_approval import OperatorApprovals

__all__ = ["GatewayCore", "Identity", "Source"]

log = logging.getLogger("toolbridge.gateway")

STALE_WAIT_S = 1.0
"""How long a listing waits for another caller's listing of a changed upstream before it is
served the last built union."""
REFUSAL_ROWS_AT_ONCE = 4
"""Journal rows of calls refused before governing (`GatewayCore.refused`) written at once, per
identity."""

Approval = Literal["never", "write", "always"]


@dataclass(frozen=True)
class Identity:
    """Who calls: a name (the journal's principal) and the runtime of its grants and limits."""

    name: str
    runtime: Runtime
    quota: Quota | None = None
    """Its cumulative cap per period, counted in the shared journal (`runtime.Quota`)."""


@dataclass
class Source:
    """One served source: its binding, its approval rule, and its upstream client (if MCP)."""

    binding: ToolBinding
    approval: Approval = "never"
    client: ConnectionClient | None = None
    """The upstream MCP client (resources and prompts pass through it), or None."""
    resources: bool = True
    name: str = ""
    """The source's document name (for messages)."""


@dataclass(frozen=True)
class _Listing:
    """The served tools of one catalog, and their signature."""

    catalog: Catalog
    tools: list[tuple[str, ToolTarget, types.Tool]]
    signature: tuple[tuple[str, str], ...]
    schemas: dict[str, dict[str, object]]
    """Each served tool's `inputSchema` by name (`GatewayCore.input_schema`)."""


@dataclass
class GatewayCore:
    """The union, the identities and the rules (see the module docstring)."""

    name: str
    sources: list[Source]
    declared: Sequence[DeclaredToolLike] = ()
    declared_approval: Approval = "never"
    identities: Mapping[str, Identity] = field(default_factory=dict)
    page_size: int = 100
    approval_timeout_s: float = 120.0
    operators: OperatorApprovals | None = None
    """The console's approval route (`_operator_approval.OperatorApprovals`), or None: a client
    that cannot be asked is then refused at once."""
    catalog: ToolCatalog = field(init=False)
    _approval: dict[int, Approval] = field(init=False, default_factory=dict)
    _rounds: RoundStates = field(init=False, repr=False, default_factory=RoundStates)
    _servers: dict[int, str] = field(init=False, repr=False, default_factory=dict)
    _clients: dict[int, ConnectionClient] = field(init=False, repr=False, default_factory=dict)
    _suspensions: Suspensions = field(init=False, repr=False, default_factory=Suspensions)
    _warned_at: float = field(init=False, repr=False, default=-1e9)
    _refreshing: anyio.Event | None = field(init=False, repr=False, default=None)
    _listed: _Listing | None = field(init=False, repr=False, default=None)
    _refusal_rows: dict[str, anyio.CapacityLimiter] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.catalog = ToolCatalog([s.binding for s in self.sources], list(self.declared))
        self._approval = {id(s.binding): s.approval for s in self.sources}
        self._servers = {id(s.binding): s.name for s in self.sources}
        self._clients = {id(s.binding): s.client for s in self.sources if s.client is not None}
        self._suspensions.wait_s = self.approval_timeout_s

    # ---------------------------------------------------------------------------------- listing

    async def resolve(self) -> Catalog | None:
        """The current union, or None when a source cannot be listed (logged).

        Each upstream is listed within its own deadline (`_breaker.Watched`). While one caller
        lists a changed upstream, the others wait at most `STALE_WAIT_S` for it, then get the
        last built union: a slow upstream delays one listing, not every client's.
        """
        cached = self.catalog.current()
        if cached is not None:
            return cached
        last = self.catalog.last()
        busy = self._refreshing
        if last is not None and busy is not None:
            with anyio.move_on_after(STALE_WAIT_S):
                await busy.wait()
            return self.catalog.current() or last
        done = self._refreshing = anyio.Event()
        try:
            return await self.catalog.resolve()
        except ToolbridgeError as exc:
            now = time.monotonic()
            if now - self._warned_at >= 60:  # the watcher asks every second: say it once a minute
                self._warned_at = now
                log.warning("the gateway's tools could not be listed: %s", bounded(str(exc), 300))
            return None
        finally:
            if self._refreshing is done:
                self._refreshing = None
            done.set()

    async def route(self, name: str) -> tuple[Catalog | None, ToolCatalog]:
        """The union to find `name` in, and the catalog its governed session runs against.

        The shared catalog when it is current (every call, normally); else the last built union
        when `name`'s own source has not changed since (a call to one upstream never waits on
        another's listing); else the union as `resolve` gives it.
        """
        cached = self.catalog.current()
        if cached is not None:
            return cached, self.catalog
        catalog = self.catalog.settled(name) or await self.resolve()
        return catalog, (ToolCatalog.of(catalog) if catalog is not None else self.catalog)

    @staticmethod
    def _needs(target: ToolTarget) -> ToolGrantNeeds:
        source = target.source
        if target.declared:
            return ToolGrantNeeds(source.id, source.effects, tuple(source.capabilities))
        binding = target.binding  # a provider's target always carries its binding
        try:
            effects = effective_effects(binding.effects if binding else None, target.spec.annotations)
        except ToolbridgeError:
            effects = "host"
        return ToolGrantNeeds(target.model_name, effects, tuple(binding.capabilities) if binding else ())

    def share_rounds(self, shared: ReplicaState) -> None:
        """Seal and check 2026-07-28 rounds as every replica sharing `shared` does (`_rounds`)."""

        async def claim(nonce: str, until: float, now: float) -> bool:
            return await shared.first_use_of("round", nonce, until, now)

        self._rounds.share(shared.key_for("rounds"), claim)

    def granted(self, identity: Identity, target: ToolTarget) -> bool:
        """Whether `identity`'s permissions grant every need of `target`."""
        return not identity.runtime.permissions.missing(self._needs(target).required())

    def _listing(self, catalog: Catalog) -> _Listing:
        """Every tool of `catalog` as the gateway serves it, built once per catalog."""
        cached = self._listed
        if cached is not None and cached.catalog is catalog:
            return cached
        tools: list[tuple[str, ToolTarget, types.Tool]] = []
        for name in sorted(catalog.targets):
            target = catalog.targets[name]
            tool = served_tool(name, target.spec)
            if tool is None:
                log.warning("tool %r has a definition the gateway cannot serve; left out", bounded(name, 100))
                continue
            tools.append((name, target, tool))
        signature = tuple(
            (name, json.dumps(tool.model_dump(by_alias=True, mode="json", exclude_none=True), sort_keys=True))
            for name, _, tool in tools
        )
        schemas = {name: tool.input_schema for name, _, tool in tools}
        self._listed = _Listing(catalog, tools, signature, schemas)
        return self._listed

    def input_schema(self, name: str) -> dict[str, object] | None:
        """The `inputSchema` of served tool `name` in the last built union, or None: the SDK's
        2026-07-28 HTTP server checks a call's `Mcp-Param-*` headers against it. Without this
        lookup it runs the whole `tools/list` handler for every `tools/call` with arguments."""
        catalog = self.catalog.last()
        return None if catalog is None else self._listing(catalog).schemas.get(name)

    async def tools(self, identity: Identity) -> list[types.Tool]:
        """The tools `identity` may call, sorted by name (see `served_tool`)."""
        catalog = await self.resolve()
        if catalog is None:
            return []
        return [tool for _, target, tool in self._listing(catalog).tools if self.granted(identity, target)]

    async def signature(self) -> tuple[tuple[str, str], ...]:
        """What a client's listing depends on (names and whole definitions), to notice changes."""
        catalog = await self.resolve()
        if catalog is None:
            return ()
        return self._listing(catalog).signature

    # ---------------------------------------------------------------------------------- calling

    def _approval_for(self, target: ToolTarget) -> Approval:
        if target.declared:
            return self.declared_approval
        return self._approval.get(id(target.binding), "never")

    async def call(
        self,
        identity: Identity,
        name: str,
        arguments: Mapping[str, object] | None,
        *,
        context: CallContext | None = None,
        input_responses: Mapping[str, object] | None = None,
        request_state: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Forward one call under `identity`'s governed session, with its `context` (who asked,
        on which session; see `_upstream`) passed down to the upstream and back.

        A 2026-07-28 client's input rounds (the gateway's approval, the upstream's own
        `InputRequiredResult`) are `InputRequiredResult`s sealed by the gateway (`_rounds`); the
        client's retry carries the answers (`input_responses`, `request_state`).

        Raises:
            MCPError: -32602 (invalid params) for a tool the gateway does not serve or a
                `request_state` it does not honour; -32021 when the upstream needed a client
                capability the client did not declare.
        """
        catalog, routed = await self.route(name)
        target = catalog.targets.get(name) if catalog is not None else None
        if target is None:
            if catalog is None:
                return error_result("TOOLS_UNAVAILABLE: the gateway's tools could not be listed")
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {bounded(name, 200)!r}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise MCPError(types.INVALID_PARAMS, "arguments must be an object")
        args = dict(arguments or {})
        if context is None:
            context = CallContext(identity, ask_timeout_s=self.approval_timeout_s)
        needs = self._needs(target)
        approval = self._approval_for(target)
        ask = (approval == "always" or (approval == "write" and needs.effects != "none")) and self.granted(
            identity, target
        )
        why: str | None = None
        digest = ""
        resumed: Round | None = None
        if context.modern and (ask or request_state is not None):
            digest = arguments_digest(name, args)
            if request_state is not None:
                try:
                    opened = await self._rounds.open(request_state, identity.name, name, digest)
                except SharedStateUnavailable as exc:  # replicas: never resumed unchecked
                    log.warning("a round could not be checked: %s", exc)
                    why = "request_state could not be checked; retry"
                    raise MCPError(types.INTERNAL_ERROR, why) from None
                resumed, not_honoured = opened
                if resumed is None:
                    log.info("a client's request_state was not honoured: %s", not_honoured)
                    if not ask:
                        raise MCPError(types.INVALID_PARAMS, f"request_state not honoured ({not_honoured})")
        if ask:
            if self.operators is not None and not can_elicit(context):  # an operator decides
                why = (
                    TOO_LARGE
                    if too_large_to_show(args)
                    else await self.operators.wait(
                        context, name, self._server_of(target), needs.effects, args, self.approval_timeout_s
                    )
                )
            elif not context.modern:
                why = await self._ask(context, target, needs.effects, name, args)
            elif resumed is None:
                asked = self._approval_round(context, target, needs.effects, name, args, digest)
                if not isinstance(asked, str):
                    return asked
                why = asked  # cannot be asked: refused, with its call row (`_governed`)
            elif not resumed.approved:
                why = _judge_response((input_responses or {}).get(APPROVAL_KEY))
                if why is None:
                    resumed = Round(resumed.number, True, None, False)
        if resumed is not None and resumed.upstream_asked:
            context.upstream_state = resumed.upstream_state
            context.upstream_responses = {
                k: v for k, v in (input_responses or {}).items() if k != APPROVAL_KEY
            }
        elif request_state is None and input_responses and context.modern and self._modern(target):
            # answers given up front (a stateless client's first request) are the client's own,
            # for its own call: they go to a 2026 upstream as they are (never the approval key)
            given = {k: v for k, v in input_responses.items() if k != APPROVAL_KEY}
            context.upstream_responses = given or None
        if why is not None:  # refused: journaled by the session, nothing sent
            return await self._governed(routed, context, name, args, why, digest, resumed, ask)
        if resumed is not None and resumed.suspended is not None:
            try:
                waited = await self._suspensions.resume(resumed.suspended, input_responses or {})
            except LookupError:
                raise MCPError(types.INVALID_PARAMS, "request_state not honoured (expired)") from None
            return self._suspended_round(waited, context, name, digest, resumed.number)
        if context.modern and self._suspendable(target, context):
            digest = digest or arguments_digest(name, args)

            def run(suspend: Suspend) -> Awaitable[CallOutcome]:
                context.suspend = suspend
                return self._governed(routed, context, name, args, why, digest, resumed, ask)

            waited = await self._suspensions.start(run)
            number = 0 if resumed is None else resumed.number
            return self._suspended_round(waited, context, name, digest, number)
        return await self._governed(routed, context, name, args, why, digest, resumed, ask)

    def _suspendable(self, target: ToolTarget, context: CallContext) -> bool:
        """Whether a 2026-07-28 client's call of `target` runs suspendable (`_suspend`): the
        client declared something an upstream may ask for, and the upstream is of the handshake
        era (or not connected yet), so it may ask mid-call. (Else no task is spent on it.)"""
        caps = context.capabilities
        if caps is None or (caps.elicitation is None and caps.sampling is None and caps.roots is None):
            return False
        if target.declared or self._suspensions.full():
            return False
        return id(target.binding) in self._clients and not self._modern(target)

    def _modern(self, target: ToolTarget) -> bool:
        """Whether `target`'s upstream is connected in the 2026-07-28 era."""
        client = self._clients.get(id(target.binding))
        return client is not None and client.protocol_version in MODERN

    def _suspended_round(
        self, waited: CallOutcome | Question, context: CallContext, name: str, digest: str, number: int
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A suspended call's outcome: its result, or its question as the next round."""
        if not isinstance(waited, Question):
            return waited
        if number + 1 > MAX_ROUNDS:
            return error_result("TOOL_FAILED: the upstream asked for input too many times")
        who = context.identity.name
        state = self._rounds.seal(
            who, name, digest, number=number + 1, approved=True, upstream=None, suspended=waited.call
        )
        return types.InputRequiredResult(input_requests={waited.key: waited.request}, request_state=state)

    async def _governed(
        self,
        routed: ToolCatalog,
        context: CallContext,
        name: str,
        args: dict[str, object],
        why: str | None,
        digest: str,
        resumed: Round | None,
        ask: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The call under the identity's governed session, and what the client gets for it.

        Raises:
            MCPError: -32021 when the upstream needed a capability the client did not declare.
        """
        identity = context.identity
        try:
            async with GovernedSession(
                identity.runtime,
                principal=identity.name,
                label=f"gateway {self.name}",
                catalog=routed,
            ) as session:
                if why is not None:
                    code = "APPROVAL_TIMEOUT" if why == NOT_DECIDED else "PERMISSION_DENIED"
                    raise await session.refuse(name, args, code, why)
                if identity.quota is None:
                    result = await session.call_tool(name, args, context=context)
                else:
                    result = await identity.quota.call(session, name, args, context=context)
        except PolicyError as exc:
            missing_error(context)
            if exc.code == "INPUT_REQUIRED" and context.input_required is not None:
                return self._relay_round(context, name, digest or arguments_digest(name, args), resumed, ask)
            if context.error is not None:  # the upstream answered with a JSON-RPC error: the client gets it
                raise upstream_rpc_error(context.error) from None
            if exc.code == "TOOL_ERROR" and context.wire is not None:  # the upstream's `isError` result
                return upstream_error(context.wire, identity.runtime.limits.max_output_bytes)
            return refusal(exc)
        except ToolbridgeError as exc:
            missing_error(context)
            log.warning("call of %r failed in the gateway: %s", bounded(name, 100), exc.code)
            return error_result("TOOL_FAILED: the tool call failed")
        missing_error(context)
        return from_tool_result(result, context)

    async def refused(
        self, identity: Identity, name: str, arguments: object, code: str, message: str
    ) -> types.CallToolResult:
        """A call the gateway refuses before governing it (`UPSTREAM_UNAVAILABLE` while its
        server's breaker is open, `LIMIT_EXCEEDED` past the identity's calls in flight): the
        call still gets its journal row (`not_started`, the code, the tool's name) under the
        identity's runtime, and the client gets `code` with `message`.

        Rows of refusals are written a few at a time per identity (`REFUSAL_ROWS_AT_ONCE`): one
        identity's flood of refused calls waits on its own rows, never on another identity's,
        and calls that are not refused never wait on them. A journal that cannot be written does
        not change the answer.
        """
        rows = self._refusal_rows.get(identity.name)
        if rows is None:
            rows = self._refusal_rows[identity.name] = anyio.CapacityLimiter(REFUSAL_ROWS_AT_ONCE)
        args = dict(arguments) if isinstance(arguments, Mapping) else {}
        last = self.catalog.last()  # never waits on a listing: the tool as last listed, if it was
        fixed = ToolCatalog.of(last if last is not None else Catalog({}, ()))
        try:
            async with rows:
                try:
                    async with GovernedSession(
                        identity.runtime, principal=identity.name, label=f"gateway {self.name}", catalog=fixed
                    ) as session:
                        raise await session.refuse(name, args, code)
                except ToolbridgeError as exc:
                    if exc.code != code:
                        why = exc.code
                        log.warning("a refused call of %r has no journal row: %s", bounded(name, 100), why)
        finally:  # the map holds only identities with refusals being written
            if rows.borrowed_tokens == 0 and rows.statistics().tasks_waiting == 0:
                self._refusal_rows.pop(identity.name, None)
        return refusal(PolicyError(message, code=code, outcome=CODES[code]))

    def _approval_round(
        self,
        context: CallContext,
        target: ToolTarget,
        effects: str,
        name: str,
        args: Mapping[str, object],
        digest: str,
    ) -> str | types.InputRequiredResult:
        """The first round of a 2026-07-28 call that needs approval: the question, or why it
        cannot be asked."""
        caps = context.capabilities
        if caps is None or caps.elicitation is None:
            return "approval needed, but the client cannot be asked (no elicitation)"
        if too_large_to_show(args):
            return TOO_LARGE
        message = approval_message(name, self._server_of(target), effects, args)
        state = self._rounds.seal(
            context.identity.name, name, digest, number=1, approved=False, upstream=None
        )
        return types.InputRequiredResult(
            input_requests={
                APPROVAL_KEY: types.ElicitRequest(
                    params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
                )
            },
            request_state=state,
        )

    def _relay_round(
        self, context: CallContext, name: str, digest: str, resumed: Round | None, approved: bool
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The upstream's `InputRequiredResult`, relayed to a 2026-07-28 client under the
        gateway's sealed state (see `_rounds`).

        Raises:
            MCPError: -32021 when the client did not declare what a request needs.
        """
        wire = context.input_required or {}
        try:
            asked = types.InputRequiredResult.model_validate(wire)
        except ValueError:
            log.warning(
                "the upstream of %r answered with an invalid input_required result", bounded(name, 100)
            )
            return error_result("TOOL_FAILED: the upstream asked for input in an invalid form")
        number = (resumed.number if resumed is not None else 0) + 1
        upstream = asked.request_state
        if number > MAX_ROUNDS or (upstream is not None and len(upstream) > MAX_UPSTREAM_STATE):
            return error_result("TOOL_FAILED: the upstream asked for input too many times or too much state")
        requests = dict(asked.input_requests or {})
        requests.pop(APPROVAL_KEY, None)  # the gateway's key; an upstream cannot ask in its name
        for request in requests.values():
            needed = missing_capability(context.capabilities, request)
            if needed is not None:
                context.missing = needed
                missing_error(context)
        state = self._rounds.seal(
            context.identity.name,
            name,
            digest,
            number=number,
            approved=approved,
            upstream=upstream,
            asked=True,
        )
        return types.InputRequiredResult(input_requests=requests or None, request_state=state)

    def _server_of(self, target: ToolTarget) -> str:
        if target.declared:
            return f"gateway {self.name}"
        return self._servers.get(id(target.binding), "?")

    async def _ask(
        self,
        context: CallContext,
        target: ToolTarget,
        effects: str,
        name: str,
        arguments: Mapping[str, object],
    ) -> str | None:
        """Ask the person at a handshake-era client; None when approved, else why not (a fixed
        phrase). The question goes on the call's own request, so its answer is this call's."""
        caps = context.capabilities
        session = context.session
        if caps is None or caps.elicitation is None or session is None or not session.can_send_request:
            return "approval needed, but the client cannot be asked (no elicitation)"
        if too_large_to_show(arguments):
            return TOO_LARGE
        message = approval_message(name, self._server_of(target), effects, arguments)
        try:
            with anyio.fail_after(self.approval_timeout_s):
                answer = await session.elicit_form(
                    message, APPROVAL_SCHEMA, related_request_id=context.request_id
                )
        except TimeoutError:
            return "approval not given in time"
        except Exception as exc:  # the client refused the request or went away
            log.info("approval request failed: %s", type(exc).__name__)
            return "approval could not be asked"
        return _judge(answer)


TOO_LARGE = "approval needed, but the arguments are too large to show in full"


def missing_error(context: CallContext) -> None:
    """Fail the call with -32021 when the upstream needed a capability the client lacks.

    Raises:
        MCPError: -32021 with the `requiredCapabilities`.
    """
    needed = context.missing
    if needed is not None:
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "the tool needs a client capability the client did not declare",
            {"requiredCapabilities": needed.model_dump(by_alias=True, mode="json", exclude_none=True)},
        )


def _judge_response(answer: object) -> str | None:
    """`_judge` of a 2026-07-28 input response (a plain JSON object or a parsed result)."""
    if isinstance(answer, Mapping):
        try:
            answer = types.ElicitResult.model_validate(answer)
        except ValueError:
            return "approval declined"
    if answer is None:
        return "approval declined"
    if not isinstance(answer, types.ElicitResult):  # another kind of answer: not a yes
        return "approval cancelled"
    return _judge(answer)


def _judge(answer: types.ElicitResult) -> str | None:
    """None for an accepted yes; else why not."""
    action = answer.action
    if action != "accept":
        return f"approval {'declined' if action == 'decline' else 'cancelled'}"
    content = answer.content
    if not isinstance(content, Mapping) or content.get("approve") is not True:
        return "approval declined"
    return None
