"""Governed tool discovery: a client of a large union lists a few tools and finds the rest.

With `discovery:` on a `Gateway`, an identity granted more than `threshold` tools no longer gets
them all from `tools/list`. It gets the meta tools, the `pinned` tools and its session's
working set:

- `find_tools {query, limit?}`: ranked matches (`toolbridge.discovery.ToolIndex`, BM25 over
  names, titles, descriptions, parameters), each with its server, one line of description and
  why it matched. Only tools this identity is **granted** are searched, and only tools the
  gateway serves, so never a tool its lock withholds (a changed, rug-pulled definition is not
  in the union, hence not in the index).
- `use_tools {names}`: adds granted tools to this session's working set (at most
  `max_working_set`, least recently added dropped first), then tells this session alone
  `notifications/tools/list_changed`; its next `tools/list` shows them.
- `call_tool {name, arguments}`: the same call as `tools/call` of `name` (the server unwraps it
  before anything else: the breaker, the identity's calls in flight, grants, approval, budgets,
  the journal), for clients that ignore `list_changed`.

Each `find_tools` and `use_tools` is journaled under the identity (`Runtime.operation`, kinds
`tools/find` and `tools/use`; the row's target is the names found or added, cut to 512
characters; the arguments' digest as for any call). A call through `call_tool` is journaled as
the tool it calls.

Working sets live with the connection (handshake-era sessions; stdio); at most `MAX_SESSIONS`
are kept (least recently used dropped). A client without a session (a 2026-07-28 client, or any
client of `--stateless` HTTP) has no connection to keep one with: its requests share one working
set **per identity** (`_IdentitySets`), kept while used: `sessionless_ttl_s` (default 600 s) after
its last `tools/list` or `use_tools` it is dropped, and at most `MAX_IDENTITY_SETS` are kept
(least recently used dropped). Two sessionless clients of one identity share its set; that shows
one client the names the other asked for, never a tool the identity is not granted (the set is
only what is listed; grants decide what is called and found). Each gateway process keeps its own:
behind a load balancer a replica may not have the set another built, so such clients should use
`call_tool` (it needs no set). `sessionless_ttl_s` 0 keeps no sets: a fresh empty one per request.
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..discovery import MAX_LIMIT, MAX_NAMES, USE_TOOLS_SCHEMA, ToolIndex, find_tools_schema, indexed_tool
from ..errors import ToolbridgeError, bounded
from ._answers import error_result
from ._core import GatewayCore, Identity

__all__ = ["FIND_TOOLS", "META_TOOLS", "Discovery", "DiscoverySettings"]

log = logging.getLogger("toolbridge.gateway")

FIND_TOOLS = "find_tools"
USE_TOOLS = "use_tools"
CALL_TOOL = "call_tool"
META_TOOLS = frozenset({FIND_TOOLS, USE_TOOLS, CALL_TOOL})
MAX_SESSIONS = 10_000
"""Working sets kept at once (one per connection; the least recently used is dropped)."""
MAX_IDENTITY_SETS = 10_000
"""Sessionless clients' working sets kept at once (one per identity; least recently used dropped)."""
SESSIONLESS_TTL_S = 600.0
NOTIFY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class DiscoverySettings:
    """The `discovery:` of a `Gateway` (see the module docs)."""

    threshold: int
    pinned: tuple[str, ...] = ()
    max_results: int = 10
    max_working_set: int = 32
    sessionless_ttl_s: float = SESSIONLESS_TTL_S


def _meta_tools(max_results: int) -> list[types.Tool]:
    return [
        types.Tool(
            name=FIND_TOOLS,
            description=(
                "Search the tools you may use for a task. Give the task in plain words; get the "
                "best matching tools (name, server, what it does, why it matched). Then call "
                "use_tools with the names you need, or call_tool to call one directly."
            ),
            input_schema=find_tools_schema(max_results),
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name=USE_TOOLS,
            description=("Add tools (names from find_tools) to your tool list; the list is then sent again."),
            input_schema=dict(USE_TOOLS_SCHEMA),
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name=CALL_TOOL,
            description="Call a tool found with find_tools by its name, with its arguments.",
            input_schema={
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the tool's name"},
                    "arguments": {"type": "object", "description": "the tool's arguments"},
                },
                "required": ["name"],
            },
        ),
    ]


@dataclass
class _WorkingSet:
    identity: str
    owner: Any
    """A weak reference to the connection (an id is reused once it is gone), or None."""
    names: OrderedDict[str, None] = field(default_factory=OrderedDict)
    used_at: float = 0.0
    """When a sessionless set was last listed or added to (`time.monotonic`)."""


@dataclass
class _IdentitySets:
    """The working sets of sessionless clients, one per identity, each kept `ttl_s` after its last
    use and at most `limit` of them (least recently used first out)."""

    ttl_s: float
    limit: int = MAX_IDENTITY_SETS
    clock: Any = time.monotonic
    _sets: OrderedDict[str, _WorkingSet] = field(default_factory=OrderedDict)

    def get(self, identity: str) -> _WorkingSet:
        now = self.clock()
        while self._sets:  # ordered by last use: the expired are at the front
            oldest = next(iter(self._sets.values()))
            if now - oldest.used_at < self.ttl_s:
                break
            self._sets.popitem(last=False)
        found = self._sets.get(identity)
        if found is None:
            found = _WorkingSet(identity, None)
            if self.ttl_s > 0:
                self._sets[identity] = found
                while len(self._sets) > self.limit:
                    self._sets.popitem(last=False)
        else:
            self._sets.move_to_end(identity)
        found.used_at = now
        return found

    def __len__(self) -> int:
        return len(self._sets)


@dataclass
class Discovery:
    """The gateway's discovery (see the module docs): its index and the sessions' working sets."""

    core: GatewayCore
    settings: DiscoverySettings
    index: ToolIndex = field(default_factory=ToolIndex)
    _indexed: Any = field(default=None, repr=False)
    _granted: dict[str, tuple[Any, frozenset[str]]] = field(default_factory=dict, repr=False)
    _sets: OrderedDict[int, _WorkingSet] = field(default_factory=OrderedDict, repr=False)
    _meta: list[types.Tool] = field(default_factory=list, repr=False)
    stateless: bool = False
    """Whether the gateway serves HTTP without sessions (`--stateless`): every client is sessionless."""
    sessionless: _IdentitySets = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._meta = _meta_tools(self.settings.max_results)
        self.sessionless = _IdentitySets(self.settings.sessionless_ttl_s)

    # ------------------------------------------------------------------------- the union

    async def _granted_names(self, identity: Identity) -> frozenset[str]:
        """The served names `identity` is granted, and the index kept in step with the union
        (both rebuilt only when the union changed)."""
        catalog = await self.core.resolve()
        if catalog is None:
            return frozenset()
        listing = self.core._listing(catalog)
        if self._indexed is not catalog:
            self.index.sync(
                indexed_tool(name, target.spec, self.core._server_of(target))
                for name, target, _ in listing.tools
            )
            self._indexed = catalog
            self._granted.clear()
        cached = self._granted.get(identity.name)
        if cached is not None and cached[0] is catalog:
            return cached[1]
        names = frozenset(name for name, target, _ in listing.tools if self.core.granted(identity, target))
        if len(self._granted) >= 1024:
            self._granted.clear()
        self._granted[identity.name] = (catalog, names)
        return names

    async def active(self, identity: Identity) -> bool:
        """Whether `identity` is past the threshold (then it lists and uses the meta tools)."""
        return len(await self._granted_names(identity)) > self.settings.threshold

    # ------------------------------------------------------------------------- listing

    def _working_set(self, identity: Identity, session: Any) -> _WorkingSet:
        if self.stateless or getattr(session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            return self.sessionless.get(identity.name)  # no connection to keep it with
        conn = getattr(session, "_connection", None) or session
        key = id(conn)
        found = self._sets.get(key)
        if found is not None:
            alive = found.owner() if found.owner is not None else None
            if alive is conn and found.identity == identity.name:
                self._sets.move_to_end(key)
                return found
        try:
            owner: Any = weakref.ref(conn)
        except TypeError:
            owner = None
        made = _WorkingSet(identity.name, owner)
        if owner is not None:
            self._sets[key] = made
            while len(self._sets) > MAX_SESSIONS:
                self._sets.popitem(last=False)
        return made

    async def listed(self, identity: Identity, session: Any, tools: list[types.Tool]) -> list[types.Tool]:
        """What `tools/list` shows `identity` on `session`: `tools` (its granted tools) as they
        are under the threshold; past it the meta tools, then the pinned tools and the working
        set's (in `tools`' order)."""
        if len(tools) <= self.settings.threshold:
            return tools
        shown = set(self.settings.pinned) | set(self._working_set(identity, session).names)
        return [*self._meta, *(t for t in tools if t.name in shown and t.name not in META_TOOLS)]

    # ------------------------------------------------------------------------- the meta tools

    async def handle(
        self, identity: Identity, session: Any, request_id: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.CallToolRequestParams | None:
        """A meta tool's call: its result; for `call_tool` the call it stands for (the caller
        serves it as a `tools/call`); None when `identity` is under the threshold (the name is
        then an ordinary tool's).

        Raises:
            MCPError: -32602 for `call_tool` without a tool name or with arguments that are not an
                object.
        """
        if not await self.active(identity):
            return None
        args = params.arguments or {}
        if params.name == CALL_TOOL:
            name = args.get("name")
            inner = args.get("arguments", {})
            if not isinstance(name, str) or not name or name in META_TOOLS:
                raise MCPError(types.INVALID_PARAMS, "call_tool needs the name of a tool to call")
            if inner is not None and not isinstance(inner, Mapping):
                raise MCPError(types.INVALID_PARAMS, "call_tool's arguments must be an object")
            return types.CallToolRequestParams(name=name, arguments=dict(inner or {}))
        if params.name == FIND_TOOLS:
            return await self._find(identity, args)
        return await self._use(identity, session, request_id, args)

    async def _find(self, identity: Identity, args: Mapping[str, Any]) -> types.CallToolResult:
        query = args.get("query")
        limit = args.get("limit", min(5, self.settings.max_results))
        if isinstance(limit, int) and not isinstance(limit, bool):
            limit = max(1, min(limit, self.settings.max_results, MAX_LIMIT))
        granted = await self._granted_names(identity)
        try:
            matches = self.index.search(query, limit, allowed=granted.__contains__)  # type: ignore[arg-type]
        except ToolbridgeError as exc:
            return error_result(f"{exc.code}: {exc.message}")
        found = [m.to_dict() for m in matches]
        target = ",".join(m.name for m in matches) or "(none)"
        await self._journal(identity, "tools/find", target, {"query": query, "limit": limit})
        return _json_result({"tools": found})

    async def _use(
        self, identity: Identity, session: Any, request_id: Any, args: Mapping[str, Any]
    ) -> types.CallToolResult:
        names = args.get("names")
        if (
            not isinstance(names, Sequence)
            or isinstance(names, str)
            or not 0 < len(names) <= MAX_NAMES
            or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in names)
        ):
            return error_result(f"ERR_DISCOVERY_QUERY: names must be a list of 1 to {MAX_NAMES} tool names")
        granted = await self._granted_names(identity)
        added = [n for n in dict.fromkeys(names) if n in granted]
        unknown = [n for n in dict.fromkeys(names) if n not in granted]
        working = self._working_set(identity, session)
        for name in added:
            working.names.pop(name, None)
            working.names[name] = None
        while len(working.names) > self.settings.max_working_set:
            working.names.popitem(last=False)
        await self._journal(identity, "tools/use", ",".join(added) or "(none)", {"names": list(names)})
        if added:
            await _tell_changed(session, request_id)
        return _json_result({"added": added, "unknown": unknown, "working_set": list(working.names)})

    async def _journal(self, identity: Identity, kind: str, target: str, arguments: Any) -> None:
        """One row of evidence of what `identity` found or added (see the module docs); a journal
        that cannot be written is logged, not the client's failure."""
        try:
            async with identity.runtime.operation(
                kind, target, arguments, principal=identity.name, label=f"gateway {self.core.name}: discovery"
            ):
                pass
        except ToolbridgeError as exc:
            log.warning("%s of %s has no journal row: %s", kind, bounded(identity.name, 100), exc.code)


def _json_result(data: Mapping[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=dict(data),
    )


async def _tell_changed(session: Any, request_id: Any) -> None:
    """`notifications/tools/list_changed` to this session alone (on the call's own stream)."""
    try:
        with anyio.fail_after(NOTIFY_TIMEOUT_S):
            await session.send_notification(
                types.ToolListChangedNotification(), related_request_id=request_id
            )
    except Exception as exc:  # the client went away, or cannot hear it: it re-lists or uses call_tool
        log.debug("list_changed could not be sent: %s", type(exc).__name__)
