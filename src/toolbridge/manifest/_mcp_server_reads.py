"""The resources and prompts of a served Telo application (`McpServer.Resources`,
`McpServer.Prompts`), for the server `_mcp_server.create_mcp_server` builds.

Telo's schema has them (its own runtime refuses them as "v2 work"); toolbridge serves them:

- `resources/list` gives the entries with a `uri`, `resources/templates/list` those with a
  `uriTemplate`; `resources/read` finds the entry of the URI (an exact `uri` first, then the
  first template that matches: RFC 6570 level 1, each `{var}` one path segment, no `/`), runs
  its handler with `inputs` (`!cel` over `request`: `{uri, params}`; default: `params`) and
  answers `result` (`!cel` over `request` and `result`: a `ReadResourceResult`) or by default
  one text content (a model's `text`, else the result as JSON) or an image's blobs. An unknown
  URI is JSON-RPC -32002 (resource not found).
- `prompts/list` gives the entries; `prompts/get` checks the required arguments (missing:
  -32602), runs the handler with `inputs` (over `request`: `{name, arguments}`; default: the
  arguments) and answers `result` (a `GetPromptResult`) or by default one user message with
  the handler's text. An unknown prompt is -32602.
- A handler's failure is answered by the first matching `catches` entry (as for tools), else
  as JSON-RPC -32603 `CODE: message`; a `result` that is not the right shape is -32603
  `ERR_MANIFEST_EXPRESSION`. A failure fails that request, never the connection.

Reads and gets are not journaled: the journal records tool calls (the gateway does the same
for the resources it passes through).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

import mcp_types as types
from pydantic import BaseModel

from .._json import JsonObject, JsonValue
from ..errors import PolicyError, ToolbridgeError, ToolError
from ._kinds_mcp_server import (
    McpServerDoc,
    McpServerPromptsDoc,
    McpServerResourcesDoc,
    PromptEntryDoc,
    ResourceEntryDoc,
    ToolCatch,
    ToolEntryDoc,
)
from ._kinds_run import telo_truthy
from ._targets import _fill
from ._yaml import Ref

if TYPE_CHECKING:
    from mcp.shared.exceptions import MCPError

    from ..runtime import Runtime
    from ._build import LiveManifest

__all__ = ["bundle_entries", "caught", "mapped", "run_handler", "served_reads"]

RESOURCE_NOT_FOUND = -32002
_VAR = re.compile(r"\{([A-Za-z0-9_]+)\}")

_Entry = TypeVar("_Entry", ToolEntryDoc, ResourceEntryDoc, PromptEntryDoc)
_Result = TypeVar("_Result", bound=BaseModel)


class _Bundle(Protocol[_Entry]):
    """An `McpServer.Tools`, `McpServer.Resources` or `McpServer.Prompts` document."""

    entries: list[_Entry]


class ReadHandlers(TypedDict, total=False):
    """The resource and prompt handlers of `served_reads`: keyword arguments of the SDK's
    `mcp.server.Server` (a handler's request context is not read)."""

    on_list_resources: Callable[
        [object, types.PaginatedRequestParams | None], Awaitable[types.ListResourcesResult]
    ]
    on_list_resource_templates: Callable[
        [object, types.PaginatedRequestParams | None], Awaitable[types.ListResourceTemplatesResult]
    ]
    on_read_resource: Callable[[object, types.ReadResourceRequestParams], Awaitable[types.ReadResourceResult]]
    on_list_prompts: Callable[
        [object, types.PaginatedRequestParams | None], Awaitable[types.ListPromptsResult]
    ]
    on_get_prompt: Callable[[object, types.GetPromptRequestParams], Awaitable[types.GetPromptResult]]


def caught(
    catches: list[ToolCatch], request: Mapping[str, object], exc: ToolbridgeError, what: str
) -> MCPError | None:
    """The `MCPError` the first matching `catches` entry makes of `exc`, or None."""
    from mcp.shared.exceptions import MCPError

    error = {"code": exc.code, "message": exc.message}
    for catch in catches:
        if catch.code is not None and catch.code != exc.code:
            continue
        scope = {"request": request, "error": error}
        if catch.when is not None and not telo_truthy(_fill(catch.when, scope, what)):
            continue
        message = _fill(catch.error.message, scope, what) if catch.error.message is not None else exc.message
        data = _fill(catch.error.data, scope, what) if catch.error.data is not None else None
        return MCPError(catch.error.code, str(message)[:2000], data)
    return None


def template_pattern(template: str) -> re.Pattern[str] | None:
    """The regex of an RFC 6570 level-1 template (`{var}`: one path segment); None for a
    template of another level (`{+var}`, `{?q}`), which matches nothing."""
    parts: list[str] = []
    last = 0
    for match in _VAR.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        parts.append(f"(?P<{match.group(1)}>[^/]+)")
        last = match.end()
    rest = template[last:]
    if "{" in rest or "}" in rest or any("{" in p or "}" in p for p in parts[::2]):
        return None
    parts.append(re.escape(rest))
    try:
        return re.compile("".join(parts))
    except re.error:  # a variable named twice
        return None


def _text_of(output: JsonValue) -> tuple[str, str]:
    """(text, mime type) of a handler's result for a default answer."""
    text = output.get("text") if isinstance(output, dict) else None
    if isinstance(text, str):
        return text, "text/plain"
    return json.dumps(output, ensure_ascii=False), "application/json"


def _error_text(result: Mapping[str, JsonValue]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            return " ".join(str(block.get("text", "")).split())[:500]
    return "the tool answered isError"


async def run_handler(live: LiveManifest, handler: str, inputs: Mapping[str, object]) -> JsonObject:
    """The result of the handler document `handler` on `inputs`; a `ToolsCall` answered
    `isError` raises `ERR_MCP_TOOL_ERROR`, as Telo's `ToolsCall` throws it (a failure `catches`
    may answer)."""
    runnable = await live.runnable(handler)
    output = await runnable.invoke(inputs)
    if live._doc(handler).kind == "Mcp.ToolsCall" and output.get("isError"):
        name = inputs.get("name")
        raise ToolError(f"tool {name!r}: {_error_text(output)}", code="ERR_MCP_TOOL_ERROR")
    return output


async def mapped(
    live: LiveManifest,
    entry: ToolEntryDoc | ResourceEntryDoc | PromptEntryDoc,
    request: Mapping[str, object],
    given: Mapping[str, object],
    default: Callable[[JsonObject], JsonValue],
    what: str,
) -> JsonValue:
    """An entry's answer: its `inputs` (over `request`; default: `given`) to its handler, whose
    result goes through its `result` (over `request` and `result`), or `default(result)`.

    Raises:
        ToolbridgeError: the handler's failure, or an expression's.
    """
    inputs = _fill(entry.inputs, {"request": request}, what) if entry.inputs is not None else given
    if not isinstance(inputs, Mapping):
        raise ToolError(f"{what}: `inputs` must give an object", code="ERR_INVALID_INPUT")
    output = await run_handler(live, entry.handler.name, inputs)
    if entry.result is not None:
        return _fill(entry.result, {"request": request, "result": output}, what)
    return default(output)


async def _answered(
    live: LiveManifest,
    entry: ResourceEntryDoc | PromptEntryDoc,
    request: Mapping[str, object],
    given: Mapping[str, object],
    default: Callable[[JsonObject], JsonValue],
    what: str,
    model: type[_Result],
) -> _Result:
    """`mapped`'s answer as `model` (a result type of the SDK's); a failure as a JSON-RPC error."""
    from mcp.shared.exceptions import MCPError

    try:
        value = await mapped(live, entry, request, given, default, what)
    except ToolbridgeError as exc:
        raise (caught(entry.catches, request, exc, what) or _internal(exc)) from None
    try:
        return model.model_validate(value)
    except ValueError:
        raise MCPError(
            types.INTERNAL_ERROR, f"ERR_MANIFEST_EXPRESSION: {what}: `result` is not a {model.__name__}"
        ) from None


def _internal(exc: ToolbridgeError) -> MCPError:
    from mcp.shared.exceptions import MCPError

    return MCPError(types.INTERNAL_ERROR, f"{exc.code}: {exc.message}"[:2000])


def bundle_entries(
    live: LiveManifest, refs: Sequence[Ref], bundle_kind: type[_Bundle[_Entry]]
) -> list[_Entry]:
    """The entries of the bundles `refs` names (documents of `bundle_kind`), in order."""
    entries: list[_Entry] = []
    for ref in refs:
        bundle = live._doc(ref.name).model
        assert isinstance(bundle, bundle_kind)
        entries.extend(bundle.entries)
    return entries


def served_reads(
    live: LiveManifest, server: McpServerDoc, *, runtime: Runtime, principal: str, label: str
) -> ReadHandlers:
    """The SDK server's resource and prompt handlers for `server` (keyword arguments of
    `mcp.server.Server`; empty without bundles).

    Governed as the gateway governs them: a resource entry is listed and read only when
    `runtime` grants `resources:<entry name>` or `resources:*`, a prompt only with
    `prompts:<name>` or `prompts:*`; one not granted is answered as unknown (its existence is
    not told). Each `resources/read` and `prompts/get` is journaled under `runtime` as
    `principal` (`Runtime.operation`): one run of one row, `succeeded`, or `not_started` with
    `NOT_FOUND` (no such resource or prompt), `PERMISSION_DENIED` (not granted) or
    `INVALID_INPUT` (a required argument missing), or `failed` with `TOOL_FAILED` (the handler
    failed)."""
    from mcp.shared.exceptions import MCPError

    from ..runtime import Operation

    @asynccontextmanager
    async def journaled(
        kind: str, target: str, arguments: Mapping[str, JsonValue]
    ) -> AsyncIterator[Operation]:
        """One read or get journaled (an error raised inside ends it `TOOL_FAILED` unless the
        block said otherwise with `op.fail`); a journal that cannot record it sends nothing."""
        try:
            async with runtime.operation(kind, target, arguments, principal=principal, label=label) as op:
                yield op
        except PolicyError as exc:  # the journal could not record the start: nothing was run
            raise MCPError(types.INTERNAL_ERROR, f"{exc.code}: {kind} was not run") from None

    missing = runtime.permissions.missing

    def granted(what: str, name: str) -> bool:
        return not missing([f"{what}:{name}"]) or not missing([f"{what}:*"])

    resources: dict[str, ResourceEntryDoc] = {}
    templates: list[tuple[re.Pattern[str] | None, ResourceEntryDoc]] = []
    for entry in bundle_entries(live, server.resources, McpServerResourcesDoc):
        if entry.uri is not None:
            resources.setdefault(entry.uri, entry)
        elif entry.uri_template is not None:
            templates.append((template_pattern(entry.uri_template), entry))
    prompts: dict[str, PromptEntryDoc] = {}
    for prompt in bundle_entries(live, server.prompts, McpServerPromptsDoc):
        prompts.setdefault(prompt.name, prompt)
    handlers: ReadHandlers = {}

    async def list_resources(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=str(e.uri), name=e.name, description=e.description, mime_type=e.mime_type)
                for e in resources.values()
                if granted("resources", e.name)
            ]
        )

    async def list_templates(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=str(e.uri_template),
                    name=e.name,
                    description=e.description,
                    mime_type=e.mime_type,
                )
                for _, e in templates
                if granted("resources", e.name)
            ]
        )

    def find(uri: str) -> tuple[ResourceEntryDoc, dict[str, str]] | None:
        if uri in resources:
            return resources[uri], {}
        for pattern, entry in templates:
            match = pattern.fullmatch(uri) if pattern is not None else None
            if match is not None:
                return entry, match.groupdict()
        return None

    async def read_resource(ctx: object, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        async with journaled("resources/read", uri, {"uri": uri}) as op:
            found = find(uri) if len(uri) <= 4096 else None
            if found is None or not granted("resources", found[0].name):
                op.fail("NOT_FOUND" if found is None else "PERMISSION_DENIED")
                raise MCPError(RESOURCE_NOT_FOUND, f"resource not found: {uri[:200]!r}")
            await op.sent()
            return await _read(found[0], found[1], uri)

    async def _read(
        entry: ResourceEntryDoc, uri_params: dict[str, str], uri: str
    ) -> types.ReadResourceResult:
        image = live._doc(entry.handler.name).kind == "Ai.Image"

        def default(output: JsonObject) -> JsonValue:
            images = output.get("images")
            if image:
                blobs: list[JsonValue] = [
                    {"uri": uri, "mimeType": i["mediaType"], "blob": i["data"]}
                    for i in (images if isinstance(images, list) else [])
                    if isinstance(i, dict)
                ]
                return {"contents": blobs}
            text, mime = _text_of(output)
            return {"contents": [{"uri": uri, "mimeType": entry.mime_type or mime, "text": text}]}

        request = {"uri": uri, "params": uri_params}
        what = f"McpServer.Resources resource {entry.name}"
        return await _answered(live, entry, request, uri_params, default, what, types.ReadResourceResult)

    async def list_prompts(
        ctx: object, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=p.name,
                    description=p.description,
                    arguments=[
                        types.PromptArgument(name=a.name, description=a.description, required=a.required)
                        for a in p.arguments
                    ]
                    or None,
                )
                for p in prompts.values()
                if granted("prompts", p.name)
            ]
        )

    async def get_prompt(ctx: object, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        arguments = dict(params.arguments or {})
        async with journaled("prompts/get", params.name, arguments) as op:
            prompt = prompts.get(params.name)
            if prompt is None or not granted("prompts", prompt.name):
                op.fail("NOT_FOUND" if prompt is None else "PERMISSION_DENIED")
                raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name[:200]!r}")
            missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
            if missing:
                op.fail("INVALID_INPUT")
                why = f"prompt {prompt.name!r} needs the argument {missing[0]!r}"
                raise MCPError(types.INVALID_PARAMS, why)
            await op.sent()
            return await _get(prompt, arguments)

    async def _get(prompt: PromptEntryDoc, arguments: dict[str, str]) -> types.GetPromptResult:
        request = {"name": prompt.name, "arguments": arguments}

        def default(output: JsonObject) -> JsonValue:
            text, _ = _text_of(output)
            message: JsonObject = {"role": "user", "content": {"type": "text", "text": text}}
            return {"description": prompt.description, "messages": [message]}

        what = f"McpServer.Prompts prompt {prompt.name}"
        return await _answered(live, prompt, request, arguments, default, what, types.GetPromptResult)

    if resources or templates:
        handlers["on_list_resources"] = list_resources
        handlers["on_list_resource_templates"] = list_templates
        handlers["on_read_resource"] = read_resource
    if prompts:
        handlers["on_list_prompts"] = list_prompts
        handlers["on_get_prompt"] = get_prompt
    return handlers
