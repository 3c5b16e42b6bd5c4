"""Resources, resource templates, prompts and completions of the upstreams, passed through.

Per binding (`resources: true`, the default) and only for MCP upstreams that offer them. Names
are namespaced by the binding's prefix (a prompt `greeting` behind `ev_` is `ev_greeting`; a
resource's `name` likewise); resource URIs stay as the upstream wrote them (a URI is already a
global name) and a read goes to the upstream that listed the URI, or else to each upstream in
turn until one has it. The client's identity must hold `resources:<prefix>` (for resources) or
`prompts:<prefix>` (for prompts) of the binding, where `<prefix>` is the binding's prefix, or
`*` in place of it for every binding.

Upstream errors stop here: the client gets a JSON-RPC error with a generic message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..errors import bounded
from ._core import Identity, Source, page_of
from ._events import EventHub

if TYPE_CHECKING:
    from ._build import OpenGateway

__all__ = ["add_passthrough", "sdk_client"]

log = logging.getLogger("toolbridge.gateway")

_TIMEOUT_S = 30.0
_MAX_ITEMS = 10_000
_MAX_PAGES = 50


async def sdk_client(client: Any) -> Any:
    """The SDK `Client` of a toolbridge client's live connection (connecting if needed)."""
    conn = client._ready_connection() or await client._connection()
    return client._sdk_of(conn)


def _allowed(identity: Identity, what: str, source: Source) -> bool:
    missing = identity.runtime.permissions.missing
    return not missing([f"{what}:{source.binding.prefix}"]) or not missing([f"{what}:*"])


def _capable(sdk: Any, what: str) -> bool:
    try:
        caps = sdk.server_capabilities
    except Exception:
        return False
    return getattr(caps, what, None) is not None


def add_passthrough(
    server: Any, gateway: OpenGateway, identity_of: Callable[[Any], Identity], hub: EventHub
) -> None:
    """Register the resource, prompt and completion handlers on the SDK `server`."""
    sources = [s for s in gateway.core.sources if s.client is not None and s.resources]
    if not sources:
        return
    page_size = gateway.core.page_size
    uri_owner: dict[str, Source] = {}

    async def collect(identity: Identity, what: str, capability: str, method: str, key: str) -> list[Any]:
        out: list[Any] = []
        for source in sources:
            if not _allowed(identity, what, source):
                continue
            try:
                with anyio.fail_after(_TIMEOUT_S):
                    sdk = await sdk_client(source.client)
                    if not _capable(sdk, capability):
                        continue
                    cursor: str | None = None
                    for _ in range(_MAX_PAGES):
                        result = await getattr(sdk, method)(cursor=cursor)
                        for item in getattr(result, key):
                            out.append((source, item))
                        cursor = result.next_cursor
                        if not cursor or len(out) >= _MAX_ITEMS:
                            break
            except Exception as exc:  # one upstream failing must not hide the others
                log.info("%s of %s failed: %s", method, source.name, bounded(type(exc).__name__, 100))
        return out[:_MAX_ITEMS]

    def renamed(source: Source, item: Any) -> Any:
        return item.model_copy(update={"name": source.binding.prefix + item.name})

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        identity = identity_of(ctx)
        items = await collect(identity, "resources", "resources", "list_resources", "resources")
        for source, item in items:
            uri_owner[str(item.uri)] = source
        page, nxt = page_of([renamed(s, i) for s, i in items], params.cursor if params else None, page_size)
        return types.ListResourcesResult(resources=page, next_cursor=nxt)

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        identity = identity_of(ctx)
        items = await collect(
            identity, "resources", "resources", "list_resource_templates", "resource_templates"
        )
        page, nxt = page_of([renamed(s, i) for s, i in items], params.cursor if params else None, page_size)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=nxt)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        identity = identity_of(ctx)
        uri = str(params.uri)
        owner = uri_owner.get(uri)
        candidates = [owner] if owner is not None else sources
        for source in candidates:
            if not _allowed(identity, "resources", source):
                continue
            try:
                with anyio.fail_after(_TIMEOUT_S):
                    sdk = await sdk_client(source.client)
                    if not _capable(sdk, "resources"):
                        continue
                    result: types.ReadResourceResult = await sdk.read_resource(uri)
                    return result
            except Exception as exc:
                log.info("resources/read on %s failed: %s", source.name, type(exc).__name__)
        raise MCPError(types.INVALID_PARAMS, f"resource not found: {bounded(uri, 200)}")

    def prompt_source(identity: Identity, name: str) -> tuple[Source, str]:
        best: tuple[Source, str] | None = None
        for source in sources:
            prefix = source.binding.prefix
            longer = best is None or len(prefix) > len(best[0].binding.prefix)
            if name.startswith(prefix) and longer and _allowed(identity, "prompts", source):
                best = (source, name[len(prefix) :])
        if best is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {bounded(name, 200)!r}")
        return best

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        identity = identity_of(ctx)
        items = await collect(identity, "prompts", "prompts", "list_prompts", "prompts")
        page, nxt = page_of([renamed(s, i) for s, i in items], params.cursor if params else None, page_size)
        return types.ListPromptsResult(prompts=page, next_cursor=nxt)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        identity = identity_of(ctx)
        source, bare = prompt_source(identity, params.name)
        try:
            with anyio.fail_after(_TIMEOUT_S):
                sdk = await sdk_client(source.client)
                result: types.GetPromptResult = await sdk.get_prompt(bare, dict(params.arguments or {}))
                return result
        except MCPError as exc:
            raise MCPError(exc.error.code, "the upstream refused the prompt request") from None
        except Exception as exc:
            log.info("prompts/get on %s failed: %s", source.name, type(exc).__name__)
            raise MCPError(types.INTERNAL_ERROR, "the upstream could not give the prompt") from None

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        identity = identity_of(ctx)
        ref = params.ref
        try:
            if isinstance(ref, types.PromptReference):
                source, bare = prompt_source(identity, ref.name)
                ref = ref.model_copy(update={"name": bare})
            else:
                source = uri_owner.get(str(ref.uri)) or sources[0]
                if not _allowed(identity, "resources", source):
                    raise MCPError(types.INVALID_PARAMS, "no completion")
            with anyio.fail_after(_TIMEOUT_S):
                sdk = await sdk_client(source.client)
                if not _capable(sdk, "completions"):
                    return types.CompleteResult(completion=types.Completion(values=[]))
                argument = {"name": params.argument.name, "value": params.argument.value}
                context = dict(params.context.arguments or {}) if params.context else None
                result: types.CompleteResult = await sdk.complete(ref, argument, context)
                return result
        except MCPError:
            raise
        except Exception as exc:
            log.info("completion failed: %s", type(exc).__name__)
            return types.CompleteResult(completion=types.Completion(values=[]))

    def candidates(identity: Identity, uri: str) -> list[Source]:
        owner = uri_owner.get(uri)
        return [s for s in ([owner] if owner is not None else sources) if _allowed(identity, "resources", s)]

    hub.candidates = candidates

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        identity = identity_of(ctx)
        uri = str(params.uri)
        found = candidates(identity, uri)
        link = hub.link_of(ctx.session)
        if link is None:  # no channel to deliver updates on: nothing to subscribe upstream
            if found:
                return types.EmptyResult()
        elif await hub.hold(link.key, uri, found, owner=identity.name):
            return types.EmptyResult()
        elif (limit := hub.limit_reached(link.key, identity.name, uri)) is not None:
            raise MCPError(types.INVALID_REQUEST, f"resources/subscribe refused: {limit}")
        raise MCPError(types.INVALID_PARAMS, f"resource not found: {bounded(uri, 200)}")

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        identity_of(ctx)
        link = hub.link_of(ctx.session)
        if link is not None:
            await hub.let_go(link.key, str(params.uri))
        return types.EmptyResult()

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
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
