"""Resources, resource templates, prompts and completions of the upstreams, passed through.

Per binding (`resources: true`, the default) and only for MCP upstreams that offer them. Names
are namespaced by the binding's prefix (a prompt `greeting` behind `ev_` is `ev_greeting`; a
resource's `name` likewise); resource URIs stay as the upstream wrote them (a URI is already a
global name). A read goes to the upstream that listed the URI (or whose template matches it),
else, among unpinned upstreams, to each in turn until one has it. The client's identity must
hold `resources:<prefix>` (for resources) or `prompts:<prefix>` (for prompts) of the binding,
where `<prefix>` is the binding's prefix, or `*` in place of it for every binding.

Fields: everything the upstream sent, apart from what `_side` changes on purpose (the prefix,
cleaned text). Pins: under a lock (`lock:`), a prompt, resource or template whose definition
is not the pinned one (changed, or new) is left out of the listing, and a get or read of it is
refused as unknown, until `toolbridge lock` renews the lock. Journal: every `resources/read`,
`prompts/get` and `completion/complete` is one run of one row (`Runtime.operation`) with the
identity as principal, refused ones included. Upstream JSON-RPC errors reach the client with
their code and their message cleaned, cut and redacted (`_side.relayed_error`); any other
upstream failure is -32603 with a generic message; each request waits at most `_TIMEOUT_S`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..clients import ConnectionClient
from ..errors import PolicyError, bounded
from ..pinning import PinnedToolProvider, SideKind, side_digests, side_listing
from ..runtime import Operation
from ._answers import page_of
from ._context import GatewayContext
from ._core import Identity, Source
from ._events import EventHub
from ._side import (
    clean_completion,
    clean_prompt,
    clean_prompt_result,
    clean_read_result,
    clean_resource,
    not_found,
    relayed_error,
    seal_state,
    template_matches,
    unseal_state,
)

if TYPE_CHECKING:
    from ._build import OpenGateway

__all__ = ["add_passthrough", "sdk_client"]

log = logging.getLogger("toolbridge.gateway")

_TIMEOUT_S = 30.0
_MAX_ITEMS = 10_000


async def sdk_client(client: ConnectionClient) -> Client:
    """The SDK `Client` of a toolbridge client's live connection (connecting if needed), for the
    event hub's control requests (log level, subscriptions, listen streams). A request a person's
    question could arise in (a prompt, a read, a completion, a listing) goes through
    `client.sdk_request()` instead, which counts it in flight (see `toolbridge.clients`)."""
    conn = client._ready_connection() or await client._connection()
    return client._sdk_of(conn)


def _sdk_request(source: Source) -> AbstractAsyncContextManager[Client]:
    """One request on the SDK `Client` of `source`'s upstream (only sources with a client pass
    through), counted in flight (`ConnectionClient.sdk_request`)."""
    client = source.client
    assert client is not None
    return client.sdk_request()


def _allowed(identity: Identity, what: str, source: Source) -> bool:
    missing = identity.runtime.permissions.missing
    return not missing([f"{what}:{source.binding.prefix}"]) or not missing([f"{what}:*"])


def _capable(sdk: Client, what: Literal["resources", "completions"]) -> bool:
    try:
        caps = sdk.server_capabilities
    except Exception:
        return False
    if caps is None:
        return False
    return (caps.resources if what == "resources" else caps.completions) is not None


SideItem: TypeAlias = types.Resource | types.ResourceTemplate | types.Prompt
"""A listed resource, resource template or prompt of an upstream (`pinning.side_listing`)."""


_Side = TypeVar("_Side", types.Resource, types.ResourceTemplate, types.Prompt)


def _side_key(item: SideItem) -> str:
    """The key a pin knows `item` by: a resource's URI, a template's URI template, a prompt's name."""
    if isinstance(item, types.ResourceTemplate):
        return item.uri_template
    if isinstance(item, types.Resource):
        return str(item.uri)
    return item.name


class _Refused(Exception):
    """A request the gateway answers itself (journaled with `code`), as `error` to the client."""

    def __init__(self, code: str, error: MCPError) -> None:
        super().__init__(code)
        self.code = code
        self.error = error


def add_passthrough(
    server: Server[dict[str, object]],
    gateway: OpenGateway,
    identity_of: Callable[[GatewayContext], Identity],
    hub: EventHub,
) -> None:
    """Register the resource, prompt and completion handlers on the SDK `server`."""
    sources = [s for s in gateway.core.sources if s.client is not None and s.resources]
    if not sources:
        return
    page_size = gateway.core.page_size
    label = f"gateway {gateway.name}"
    pinned_of = {id(pin.watched): pin.pinned for pin in gateway._pins}
    uri_owner: dict[str, Source] = {}

    def pins(source: Source) -> PinnedToolProvider | None:
        """The source's `PinnedToolProvider` (its `lock` is the one in force), or None."""
        return pinned_of.get(id(source.binding.provider))

    def offered(source: Source, kind: SideKind, items: list[SideItem]) -> list[SideItem]:
        """The items the pins let through (all of them without a lock)."""
        pinned = pins(source)
        if pinned is None or not items:
            return items
        try:
            digests = dict(side_digests(kind, items))
        except Exception as exc:  # a definition that cannot be judged is not offered
            log.info("%s of %s cannot be pinned: %s", kind, source.name, bounded(str(exc), 200))
            return []
        out = []
        for item in items:
            name = _side_key(item)
            if pinned.side_status(kind, name, digests[name]).state == "pinned":
                out.append(item)
        return out

    async def listing(source: Source, kind: SideKind) -> list[SideItem]:
        """What `source` lists of `kind` now, pins applied; raises what the upstream raised."""
        with anyio.fail_after(_TIMEOUT_S):
            async with _sdk_request(source) as sdk:
                return offered(source, kind, await side_listing(sdk, kind))

    async def collect(
        identity: Identity, what: str, kind: SideKind, of: type[_Side]
    ) -> list[tuple[Source, _Side]]:
        """What the sources `identity` may see list of `kind` (each an `of`), pins applied."""
        out: list[tuple[Source, _Side]] = []
        for source in sources:
            if not _allowed(identity, what, source):
                continue
            try:
                out.extend((source, item) for item in await listing(source, kind) if isinstance(item, of))
            except Exception as exc:  # one upstream failing must not hide the others
                log.info("%s of %s failed: %s", kind, source.name, bounded(type(exc).__name__, 100))
        return out[:_MAX_ITEMS]

    @asynccontextmanager
    async def journaled(
        identity: Identity,
        kind: str,
        target: str,
        arguments: Mapping[str, object],
        source: Source | None,
        effects: str = "none",
    ) -> AsyncIterator[Operation]:
        """One operation journaled under `identity` (see `Runtime.operation`); a `_Refused` or an
        upstream's error raised inside ends it with its code and reaches the client as an error."""
        where = f"{label}: {source.name}" if source is not None else label
        try:
            async with identity.runtime.operation(
                kind, target, arguments, principal=identity.name, label=where, effects=effects
            ) as op:
                try:
                    yield op
                except _Refused as exc:
                    op.fail(exc.code)
                    raise exc.error from None
                except MCPError as exc:
                    op.fail("TOOL_FAILED")
                    raise relayed_error(exc, target if kind == "resources/read" else None) from None
                except TimeoutError:
                    op.fail("TIMEOUT")
                    raise MCPError(
                        types.INTERNAL_ERROR, f"the upstream did not answer {kind} in time"
                    ) from None
                except PolicyError:
                    raise
                except Exception as exc:
                    op.fail("TOOL_FAILED")
                    log.info("%s on %s failed: %s", kind, where, bounded(type(exc).__name__, 100))
                    raise MCPError(types.INTERNAL_ERROR, f"the upstream could not answer {kind}") from None
        except PolicyError as exc:  # the journal could not record the start: nothing was sent
            raise MCPError(types.INTERNAL_ERROR, f"{exc.code}: {kind} was not sent") from None

    # ---------------------------------------------------------------------------- resources

    async def list_resources(
        ctx: GatewayContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        identity = identity_of(ctx)
        items = await collect(identity, "resources", "resources", types.Resource)
        for source, item in items:
            uri_owner[str(item.uri)] = source
        shown = [clean_resource(i, s.binding.prefix + i.name) for s, i in items]
        page, nxt = page_of(shown, params.cursor if params else None, page_size)
        return types.ListResourcesResult(resources=page, next_cursor=nxt)

    async def list_templates(
        ctx: GatewayContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        identity = identity_of(ctx)
        items = await collect(identity, "resources", "templates", types.ResourceTemplate)
        shown = [clean_resource(i, s.binding.prefix + i.name) for s, i in items]
        page, nxt = page_of(shown, params.cursor if params else None, page_size)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=nxt)

    async def owner_of(uri: str) -> tuple[Source | None, bool]:
        """The source that offers `uri` now (listed, or matching a template), pins applied, and
        whether a pinned source lists or templates it without its pin (withheld)."""
        withheld = False
        for kind in ("resources", "templates"):
            for source in sources:
                try:
                    with anyio.fail_after(_TIMEOUT_S):
                        async with _sdk_request(source) as sdk:
                            raw = await side_listing(sdk, kind)
                except Exception as exc:
                    log.info("%s of %s failed: %s", kind, source.name, type(exc).__name__)
                    continue
                match = [
                    i
                    for i in raw
                    if (str(i.uri) == uri if kind == "resources" else template_matches(i.uri_template, uri))
                ]
                if not match:
                    continue
                if offered(source, kind, match):
                    uri_owner[uri] = source
                    return source, False
                withheld = True
        return None, withheld

    async def read_resource(
        ctx: GatewayContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        identity = identity_of(ctx)
        uri = str(params.uri)
        unknown = not_found(uri)
        if not any(_allowed(identity, "resources", s) for s in sources):  # no upstream asked at all
            async with journaled(identity, "resources/read", uri, {"uri": uri}, None, "read"):
                raise _Refused("PERMISSION_DENIED", unknown)
        owner = uri_owner.get(uri)
        withheld = False
        if owner is None or pins(owner) is not None:  # under a pin: judged on what is offered now
            owner, withheld = await owner_of(uri)
        if owner is not None:
            async with journaled(identity, "resources/read", uri, {"uri": uri}, owner, "read") as op:
                if not _allowed(identity, "resources", owner):
                    raise _Refused("PERMISSION_DENIED", unknown)
                with anyio.fail_after(_TIMEOUT_S):
                    async with _sdk_request(owner) as sdk:
                        await op.sent()
                        result: types.ReadResourceResult = await sdk.read_resource(uri)
                return clean_read_result(result)
        # Not listed anywhere: each unpinned upstream the identity may read, in turn.
        tried = [s for s in sources if pins(s) is None and _allowed(identity, "resources", s)]
        async with journaled(identity, "resources/read", uri, {"uri": uri}, None, "read") as op:
            if withheld or not tried:
                raise _Refused("PERMISSION_DENIED", unknown)
            sent = False
            answer: MCPError | None = None
            for source in tried:
                try:
                    with anyio.fail_after(_TIMEOUT_S):
                        async with _sdk_request(source) as sdk:
                            if not _capable(sdk, "resources"):
                                continue
                            if not sent:
                                await op.sent()
                                sent = True
                            result = await sdk.read_resource(uri)
                    uri_owner[uri] = source
                    return clean_read_result(result)
                except MCPError as exc:  # this one does not have it: the next may
                    answer = exc
                except Exception as exc:
                    log.info("resources/read on %s failed: %s", source.name, type(exc).__name__)
            if answer is not None and len(tried) == 1:
                raise answer  # the one upstream's own answer, its code kept
            raise _Refused("NOT_FOUND", unknown)

    # ---------------------------------------------------------------------------- prompts

    def prompt_source(name: str) -> tuple[Source, str] | None:
        """The source whose prefix names `name` (the longest prefix wins), and the bare name."""
        best: tuple[Source, str] | None = None
        for source in sources:
            prefix = source.binding.prefix
            if name.startswith(prefix) and (best is None or len(prefix) > len(best[0].binding.prefix)):
                best = (source, name[len(prefix) :])
        return best

    async def prompt_offered(source: Source, bare: str) -> bool:
        """Whether the pins let the prompt `bare` of `source` through (always without a lock)."""
        pinned = pins(source)
        if pinned is None:
            return True
        with anyio.fail_after(_TIMEOUT_S):
            async with _sdk_request(source) as sdk:
                raw = await side_listing(sdk, "prompts")
        listed = [p for p in raw if p.name == bare]
        if not listed:  # pinned and no longer listed: the upstream answers for it, as for tools
            return bare in pinned.lock.prompts
        return bool(offered(source, "prompts", listed))

    async def list_prompts(
        ctx: GatewayContext, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        identity = identity_of(ctx)
        items = await collect(identity, "prompts", "prompts", types.Prompt)
        shown = [p for p in (clean_prompt(i, s.binding.prefix + i.name) for s, i in items) if p is not None]
        page, nxt = page_of(shown, params.cursor if params else None, page_size)
        return types.ListPromptsResult(prompts=page, next_cursor=nxt)

    async def get_prompt(
        ctx: GatewayContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        identity = identity_of(ctx)
        arguments = dict(params.arguments or {})
        unknown = MCPError(types.INVALID_PARAMS, f"unknown prompt {bounded(params.name, 200)!r}")
        bound = f"{identity.name}\x00{params.name}"
        state = unseal_state(params.request_state, bound)  # before anything: a forged state is -32602
        modern = ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        found = prompt_source(params.name)
        async with journaled(
            identity, "prompts/get", params.name, arguments, found[0] if found else None
        ) as op:
            if found is None:
                raise _Refused("NOT_FOUND", unknown)
            source, bare = found
            if not _allowed(identity, "prompts", source):
                raise _Refused("PERMISSION_DENIED", unknown)
            if not await prompt_offered(source, bare):
                raise _Refused("PERMISSION_DENIED", unknown)
            with anyio.fail_after(_TIMEOUT_S):
                async with _sdk_request(source) as sdk:
                    await op.sent()
                    if not modern:
                        result: types.GetPromptResult | types.InputRequiredResult = await sdk.get_prompt(
                            bare, arguments
                        )
                    else:  # a 2026 client answers the upstream's rounds itself: relayed, state sealed
                        result = await sdk.session.get_prompt(
                            bare,
                            arguments,
                            input_responses=params.input_responses,
                            request_state=state,
                            allow_input_required=True,
                        )
            if isinstance(result, types.InputRequiredResult):
                return result.model_copy(update={"request_state": seal_state(result.request_state, bound)})
            return clean_prompt_result(result)

    # ---------------------------------------------------------------------------- completions

    async def template_owner(template: str) -> tuple[Source | None, bool]:
        """The source that lists the template (or URI) `template`, and whether its pin withholds it;
        without one, the first unpinned source (the upstream answers for it)."""
        for source in sources:
            try:
                with anyio.fail_after(_TIMEOUT_S):
                    async with _sdk_request(source) as sdk:
                        raw = await side_listing(sdk, "templates")
            except Exception as exc:
                log.info("templates of %s failed: %s", source.name, type(exc).__name__)
                continue
            listed = [t for t in raw if t.uri_template == template]
            if listed:
                return source, not offered(source, "templates", listed)
        owner = uri_owner.get(template)
        if owner is not None:
            return owner, False
        return next((s for s in sources if pins(s) is None), None), False

    async def complete(ctx: GatewayContext, params: types.CompleteRequestParams) -> types.CompleteResult:
        identity = identity_of(ctx)
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = dict(params.context.arguments or {}) if params.context else None
        asked = {"argument": argument, "context": context}
        empty = types.CompleteResult(completion=types.Completion(values=[]))
        refused = MCPError(types.INVALID_PARAMS, "no completion")
        withheld = False
        if isinstance(ref, types.PromptReference):
            found = prompt_source(ref.name)
            source = found[0] if found is not None else None
            target, what = ref.name, "prompts"
        else:
            target, what = str(ref.uri), "resources"
            source, withheld = await template_owner(target)
        async with journaled(identity, "completion/complete", target, asked, source) as op:
            if source is None:
                raise _Refused("PERMISSION_DENIED" if withheld else "NOT_FOUND", refused)
            if withheld:
                raise _Refused("PERMISSION_DENIED", refused)
            if not _allowed(identity, what, source):
                raise _Refused("PERMISSION_DENIED", refused)
            if isinstance(ref, types.PromptReference):
                assert found is not None
                if not await prompt_offered(source, found[1]):
                    raise _Refused("PERMISSION_DENIED", refused)
                ref = ref.model_copy(update={"name": found[1]})
            with anyio.fail_after(_TIMEOUT_S):
                async with _sdk_request(source) as sdk:
                    if not _capable(sdk, "completions"):
                        return empty
                    await op.sent()
                    result: types.CompleteResult = await sdk.complete(ref, argument, context)
            return clean_completion(result)

    # ---------------------------------------------------------------------------- subscriptions

    def candidates(identity: Identity, uri: str) -> list[Source]:
        owner = uri_owner.get(uri)
        return [s for s in ([owner] if owner is not None else sources) if _allowed(identity, "resources", s)]

    hub.candidates = candidates

    async def subscribe(ctx: GatewayContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
        identity = identity_of(ctx)
        uri = str(params.uri)
        found = candidates(identity, uri)
        if any(pins(s) is not None for s in found):  # under a lock: only what its pins let through
            owner, _ = await owner_of(uri)
            found = [s for s in found if pins(s) is None or s is owner]
        link = hub.link_of(ctx.session)
        if link is None:  # no channel to deliver updates on: nothing to subscribe upstream
            if found:
                return types.EmptyResult()
        elif await hub.hold(link.key, uri, found, owner=identity.name):
            return types.EmptyResult()
        elif (limit := hub.limit_reached(link.key, identity.name, uri)) is not None:
            raise MCPError(types.INVALID_REQUEST, f"resources/subscribe refused: {limit}")
        raise not_found(uri)

    async def unsubscribe(ctx: GatewayContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        identity_of(ctx)
        link = hub.link_of(ctx.session)
        if link is not None:
            await hub.let_go(link.key, str(params.uri))
        return types.EmptyResult()

    async def set_level(ctx: GatewayContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        identity_of(ctx)
        await hub.set_level(ctx.session, params.level)
        return types.EmptyResult()

    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, list_templates)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    server.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    server.add_request_handler("prompts/get", types.GetPromptRequestParams, get_prompt)
    server.add_request_handler("completion/complete", types.CompleteRequestParams, complete)
