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

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..agent._catalog import Catalog, ToolCatalog
from ..agent._hooks import ToolTarget
from ..agent._types import ToolBinding
from ..content import to_json_text
from ..errors import PolicyError, ToolbridgeError, bounded
from ..runtime._canonical import canonical_json
from ..runtime._permissions import ToolGrantNeeds, effective_effects
from ..runtime._session import GovernedSession
from ..sanitize import clean_text
from ..tools import ToolResult
from ._upstream import CURRENT_CALL, CallBox

__all__ = ["ERROR_TEXT_LIMIT", "GatewayCore", "Identity", "Source"]

log = logging.getLogger("toolbridge.gateway")

ERROR_TEXT_LIMIT = 2000
"""An upstream tool error reaches the client cleaned and cut to this many characters."""

Approval = Literal["never", "write", "always"]

APPROVAL_KEY = "toolbridge/approval"
"""The key of the approval in a 2026-07-28 `InputRequiredResult` (and of its answer)."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this call", "default": False}},
    "required": ["approve"],
}


@dataclass(frozen=True)
class Identity:
    """Who calls: a name (the journal's principal) and the runtime of its grants and limits."""

    name: str
    runtime: Any


@dataclass
class Source:
    """One served source: its binding, its approval rule, and its upstream client (if MCP)."""

    binding: ToolBinding
    approval: Approval = "never"
    client: Any = None
    """The upstream MCP client (resources and prompts pass through it), or None."""
    resources: bool = True
    name: str = ""
    """The source's document name (for messages)."""


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def page_of(items: Sequence[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    """One page of `items` from `cursor`; the next page's cursor or None.

    Raises:
        MCPError: -32602 for a cursor the gateway did not hand out.
    """
    offset = 0
    if cursor is not None:
        try:
            text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
            if not text.startswith("o:") or not text[2:].isdigit() or len(text) > 24:
                raise ValueError
            offset = int(text[2:])
        except (ValueError, UnicodeError):
            raise MCPError(types.INVALID_PARAMS, "invalid cursor") from None
        if offset > len(items):
            raise MCPError(types.INVALID_PARAMS, "invalid cursor")
    page = list(items[offset : offset + size])
    nxt = offset + size
    return page, (_cursor(nxt) if nxt < len(items) else None)


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def refusal(exc: PolicyError) -> types.CallToolResult:
    """A governed refusal as the client sees it: the code and the generic message, nothing else.

    `_meta` carries the code, the outcome and, for `OUTCOME_UNKNOWN`, the runtime's cause code.
    """
    meta: dict[str, Any] = {"toolbridge/code": exc.code, "toolbridge/outcome": exc.outcome or "blocked"}
    cause = exc.details.get("cause") if isinstance(exc.details, Mapping) else None
    if isinstance(cause, str):
        meta["toolbridge/cause"] = cause
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}], "isError": True, "_meta": meta}
    )


def _upstream_error(wire: Mapping[str, Any]) -> types.CallToolResult:
    texts = [
        b.get("text") for b in wire.get("content") or [] if isinstance(b, Mapping) and b.get("type") == "text"
    ]
    text = "\n".join(t for t in texts if isinstance(t, str)) or "the tool reported an error"
    return error_result(bounded(clean_text(text), ERROR_TEXT_LIMIT))


def _from_tool_result(result: ToolResult, box: CallBox) -> types.CallToolResult:
    """What the client gets for a successful call."""
    if box.wire is not None and box.result is result:
        if box.wire.get("isError"):
            return _upstream_error(box.wire)
        data = {k: v for k, v in box.wire.items() if k in ("content", "structuredContent")}
        data.setdefault("content", [])
        return types.CallToolResult.model_validate(data)
    if result.kind == "structured":
        blocks: list[Any] = [{"type": "text", "text": to_json_text(result.structured)}]
        blocks += [_part_block(p) for p in result.media]
        return types.CallToolResult.model_validate(
            {"content": blocks, "structuredContent": result.structured}
        )
    if result.kind == "raw":
        return types.CallToolResult.model_validate({"content": list(result.raw)})
    return types.CallToolResult.model_validate({"content": [_part_block(p) for p in result.parts]})


def _part_block(part: Any) -> dict[str, Any]:
    if part.type == "text":
        return {"type": "text", "text": part.text}
    return {"type": part.type, "data": part.data, "mimeType": part.media_type}


@dataclass
class GatewayCore:
    """The union, the identities and the rules (see the module docstring)."""

    name: str
    sources: list[Source]
    declared: Sequence[Any] = ()
    declared_approval: Approval = "never"
    identities: Mapping[str, Identity] = field(default_factory=dict)
    page_size: int = 100
    approval_timeout_s: float = 120.0
    catalog: ToolCatalog = field(init=False)
    _approval: dict[int, Approval] = field(init=False, default_factory=dict)
    _state_key: bytes = field(init=False, repr=False, default_factory=lambda: secrets.token_bytes(32))
    _warned_at: float = field(init=False, repr=False, default=-1e9)

    def __post_init__(self) -> None:
        self.catalog = ToolCatalog([s.binding for s in self.sources], list(self.declared))
        self._approval = {id(s.binding): s.approval for s in self.sources}

    # ---------------------------------------------------------------------------------- listing

    async def resolve(self) -> Catalog | None:
        """The current union, or None when a source cannot be listed (logged)."""
        try:
            return await self.catalog.resolve()
        except ToolbridgeError as exc:
            now = time.monotonic()
            if now - self._warned_at >= 60:  # the watcher asks every second: say it once a minute
                self._warned_at = now
                log.warning("the gateway's tools could not be listed: %s", bounded(str(exc), 300))
            return None

    @staticmethod
    def _needs(target: ToolTarget) -> ToolGrantNeeds:
        source = target.source
        if target.declared:
            return ToolGrantNeeds(source.id, source.effects, tuple(source.capabilities))
        binding = target.binding
        try:
            effects = effective_effects(getattr(binding, "effects", None), target.spec.annotations)
        except ToolbridgeError:
            effects = "host"
        return ToolGrantNeeds(target.model_name, effects, tuple(getattr(binding, "capabilities", ()) or ()))

    def granted(self, identity: Identity, target: ToolTarget) -> bool:
        """Whether `identity`'s permissions grant every need of `target`."""
        return not identity.runtime.permissions.missing(self._needs(target).required())

    async def tools(self, identity: Identity) -> list[types.Tool]:
        """The tools `identity` may call, sorted by name."""
        catalog = await self.resolve()
        if catalog is None:
            return []
        out: list[types.Tool] = []
        for name in sorted(catalog.targets):
            target = catalog.targets[name]
            if not self.granted(identity, target):
                continue
            spec = target.spec
            data: dict[str, Any] = {
                "name": name,
                "description": spec.description,
                "inputSchema": dict(spec.parameters),
            }
            if spec.output_schema is not None:
                data["outputSchema"] = dict(spec.output_schema)
            if spec.annotations:
                data["annotations"] = dict(spec.annotations)
            try:
                out.append(types.Tool.model_validate(data))
            except ValueError:
                log.warning("tool %r has a definition the gateway cannot serve; left out", bounded(name, 100))
        return out

    async def signature(self) -> tuple[tuple[str, str], ...]:
        """What a client's listing depends on (names and definitions), to notice changes."""
        catalog = await self.resolve()
        if catalog is None:
            return ()
        return tuple(
            sorted(
                (
                    name,
                    json.dumps(
                        [t.spec.description, t.spec.parameters, t.spec.output_schema, t.spec.annotations],
                        sort_keys=True,
                        default=str,
                    ),
                )
                for name, t in catalog.targets.items()
            )
        )

    # ---------------------------------------------------------------------------------- calling

    def _approval_for(self, target: ToolTarget) -> Approval:
        if target.declared:
            return self.declared_approval
        return self._approval.get(id(target.binding), "never")

    async def call(
        self,
        identity: Identity,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        downstream: Any = None,
        request_id: Any = None,
        progress: Any = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Forward one call under `identity`'s governed session; never raises but for -32602.

        An approval asked in the 2026-07-28 era is an `InputRequiredResult` (nothing journaled
        yet); the client's retry carries the answer (`input_responses`, `request_state`).

        Raises:
            MCPError: -32602 (invalid params) for a tool the gateway does not serve.
        """
        catalog = await self.resolve()
        target = catalog.targets.get(name) if catalog is not None else None
        if target is None:
            if catalog is None:
                return error_result("TOOLS_UNAVAILABLE: the gateway's tools could not be listed")
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {bounded(name, 200)!r}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise MCPError(types.INVALID_PARAMS, "arguments must be an object")
        args = dict(arguments or {})
        needs = self._needs(target)
        approval = self._approval_for(target)
        why: str | None = None
        if (approval == "always" or (approval == "write" and needs.effects != "none")) and self.granted(
            identity, target
        ):
            asked = await self._approve(
                downstream, request_id, name, needs.effects, args, input_responses, request_state
            )
            if isinstance(asked, types.InputRequiredResult):
                return asked
            why = asked
        box = CallBox(progress=progress, downstream=downstream, request_id=request_id, identity=identity)
        token = CURRENT_CALL.set(box)
        try:
            async with GovernedSession(
                identity.runtime,
                principal=identity.name,
                label=f"gateway {self.name}",
                catalog=self.catalog,
            ) as session:
                if why is not None:
                    raise session._fail("PERMISSION_DENIED", why)
                result = await session.call_tool(name, args)
            return _from_tool_result(result, box)
        except PolicyError as exc:
            return refusal(exc)
        except ToolbridgeError as exc:
            log.warning("call of %r failed in the gateway: %s", bounded(name, 100), exc.code)
            return error_result("TOOL_FAILED: the tool call failed")
        finally:
            CURRENT_CALL.reset(token)

    def _approval_state(self, name: str, arguments: Mapping[str, Any]) -> str:
        """What a 2026-07-28 approval is bound to: this tool and these exact arguments."""
        digest = hashlib.sha256(canonical_json({"tool": name, "arguments": dict(arguments)})).digest()
        return hmac.new(self._state_key, digest, hashlib.sha256).hexdigest()

    async def _approve(
        self,
        downstream: Any,
        request_id: Any,
        name: str,
        effects: str,
        arguments: Mapping[str, Any],
        input_responses: Mapping[str, Any] | None,
        request_state: str | None,
    ) -> str | types.InputRequiredResult | None:
        """None when approved; why not (a fixed phrase); or the request for it (2026-07-28)."""
        caps = getattr(downstream, "client_capabilities", None)
        if caps is None or caps.elicitation is None:
            return "approval needed, but the client cannot be asked (no elicitation)"
        if getattr(downstream, "can_send_request", False):
            return await self._ask(downstream, request_id, name, effects, arguments)
        if getattr(downstream, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            return "approval needed, but the client cannot be asked (no elicitation)"
        expected = self._approval_state(name, arguments)
        answer = (input_responses or {}).get(APPROVAL_KEY)
        if answer is None or request_state is None or not hmac.compare_digest(request_state, expected):
            return types.InputRequiredResult(
                input_requests={
                    APPROVAL_KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=self._message(name, effects, arguments), requested_schema=APPROVAL_SCHEMA
                        )
                    )
                },
                request_state=expected,
            )
        return _judge(answer)

    @staticmethod
    def _message(name: str, effects: str, arguments: Mapping[str, Any]) -> str:
        shown = bounded(clean_text(to_json_text(dict(arguments))), 500)
        return f"Allow `{name}` ({effects}) with {shown}?"

    async def _ask(
        self, downstream: Any, request_id: Any, name: str, effects: str, arguments: Mapping[str, Any]
    ) -> str | None:
        """Ask the person at the client; None when approved, else why not (a fixed phrase)."""
        message = self._message(name, effects, arguments)
        try:
            with anyio.fail_after(self.approval_timeout_s):
                answer = await downstream.elicit_form(message, APPROVAL_SCHEMA, related_request_id=request_id)
        except TimeoutError:
            return "approval not given in time"
        except Exception as exc:  # the client refused the request or went away
            log.info("approval request failed: %s", type(exc).__name__)
            return "approval could not be asked"
        return _judge(answer)


def _judge(answer: Any) -> str | None:
    """None for an accepted yes; else why not."""
    action = getattr(answer, "action", None)
    if action != "accept":
        return f"approval {'declined' if action == 'decline' else 'cancelled'}"
    content = getattr(answer, "content", None)
    if not isinstance(content, Mapping) or content.get("approve") is not True:
        return "approval declined"
    return None
