"""Telo's MCP server module (`mcp-server`): an application served as an MCP server.

Canonically `McpServer.*`; written `Mcp.StdioServer` / `Mcp.Tools` (Telo's documentation
imports the module as `Mcp`), or under any alias that imports `mcp-server`.

- `McpServer.StdioServer`: `serverInfo {name, version}`, `instructions`, `tools` (refs to
  `McpServer.Tools` bundles). Served on stdin/stdout by `toolbridge run` when it is the target.
- `McpServer.Resources`: `entries`, each a resource (`uri`, or an RFC 6570 `uriTemplate` whose
  `{name}` parts match one path segment each) read by a `handler`, with `inputs` (`!cel` over
  `request`: `{uri, params}`), `result` (a `ReadResourceResult`) and `catches`.
- `McpServer.Prompts`: `entries`, each a prompt (`name`, `description`, `arguments`) got from a
  `handler`, with `inputs` (over `request`: `{name, arguments}`), `result` (a `GetPromptResult`)
  and `catches`.
- `HttpServer.Server` (Telo's `Http.Server` of its `http-server` module, of which toolbridge
  implements only this kind): `host`, `port`, `mounts: [{path, mount: !ref Endpoint}]` with one
  `McpServer.HttpEndpoint` mounted; served by `toolbridge run` when it is the target.
- `McpServer.HttpEndpoint`: the same fields and `stateful` (default false: stateless, as Telo's
  default). Served over Streamable HTTP at `/mcp` by `toolbridge run` when it is the target.
- `McpServer.Tools`: `entries`, each a tool: `name`, `description`, `argumentsSchema`, a
  `handler` (a runnable document: `Ai.Agent`, `Ai.Text`, `Ai.Image`, `McpClient.ToolsCall`,
  `McpClient.ToolsList`), `inputs` (`!cel` over `request`: the request's `arguments` become the
  handler's inputs), `result` (`!cel` over `request` and `result`: the `CallToolResult`), and
  `catches` (a handler's failure, matched by `code` and `when`, as a JSON-RPC error).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from ._kinds import CelOrJson, KindDoc, PlainObject, RefTo, _Closed
from ._yaml import Ref

__all__ = [
    "HANDLER_KINDS",
    "HttpEndpointDoc",
    "HttpServerDoc",
    "McpServerDoc",
    "McpServerPromptsDoc",
    "McpServerResourcesDoc",
    "McpServerToolsDoc",
    "PromptEntryDoc",
    "ResourceEntryDoc",
    "StdioServerDoc",
    "ToolCatch",
    "ToolEntryDoc",
]

HANDLER_KINDS = ("Ai.Agent", "Ai.Text", "Ai.Image", "Mcp.ToolsCall", "Mcp.ToolsList")
"""The kinds a tool entry's `handler` may name (what toolbridge runs)."""


class ServerInfo(_Closed):
    """What the server says it is on `initialize`."""

    name: str
    """The advertised server name."""
    version: str = "0.0.0"
    """The advertised version."""


class CatchError(_Closed):
    """The JSON-RPC error a caught failure becomes."""

    code: Annotated[int, Field(strict=True)] = -32603
    """The JSON-RPC error code (default: internal error)."""
    message: CelOrJson = None
    """The message (`!cel` over `request` and `error`; default: the failure's message)."""
    data: CelOrJson = None
    """Optional data (`!cel` over `request` and `error`)."""


class ToolCatch(_Closed):
    """One `catches` entry: a failure of the handler as a JSON-RPC error."""

    code: str | None = None
    """The failure's code to match (`ERR_MODEL_RATE_LIMIT`, …); omitted: every failure."""
    when: CelOrJson = None
    """An optional `!cel` predicate over `request` and `error` (`error.code`, `error.message`)."""
    error: CatchError = CatchError()
    """The error answered."""


class ToolEntryDoc(_Closed):
    """One tool of an `McpServer.Tools` bundle."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")]
    """The tool's name, as `tools/list` gives it (and the journal and grants, `tool:NAME`)."""
    description: str | None = None
    """What it does, for a model."""
    arguments_schema: PlainObject = {"type": "object"}
    """The JSON Schema of its arguments (checked before the handler runs)."""
    handler: Annotated[Ref, RefTo(*HANDLER_KINDS)]
    """The runnable document that answers the call."""
    inputs: CelOrJson = None
    """The handler's inputs (`!cel` over `request`); default: the request's arguments."""
    result: CelOrJson = None
    """The `CallToolResult` (`!cel` over `request` and `result`); default: the handler's result as
    text and structured content (an `McpClient.ToolsCall`'s result as it is)."""
    catches: list[ToolCatch] = []
    """Failures answered as JSON-RPC errors (the first that matches); otherwise a failure is a
    tool result with `isError`."""
    effects: Literal["none", "read", "write", "host"] = "write"
    """toolbridge's: what a call may do, for a `Runtime`'s grants (`effect:NAME` unless `none`)."""


class McpServerToolsDoc(KindDoc):
    """`McpServer.Tools` (`Mcp.Tools`): a bundle of tools a server offers."""

    kind: Literal["McpServer.Tools"]
    entries: list[ToolEntryDoc] = []
    """The tools."""


class ResourceEntryDoc(_Closed):
    """One resource of an `McpServer.Resources` bundle (Telo's schema)."""

    uri: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    """A concrete URI, listed by `resources/list` (give exactly one of `uri` and `uriTemplate`)."""
    uri_template: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    """An RFC 6570 template (`notes://{name}`), listed by `resources/templates/list`; each
    `{var}` matches one path segment (no `/`) and is `request.params.var`."""
    name: str
    """A human-readable label."""
    description: str | None = None
    """What it holds."""
    mime_type: str | None = None
    """Its Content-Type, as listed (and given to a default result's contents)."""
    handler: Annotated[Ref, RefTo(*HANDLER_KINDS)]
    """The runnable document that produces its contents."""
    inputs: CelOrJson = None
    """The handler's inputs (`!cel` over `request`: `{uri, params}`); default: `params`."""
    result: CelOrJson = None
    """The `ReadResourceResult` (`!cel` over `request` and `result`); default: one text content
    (a model's `text`, or the result as JSON), or an image's blobs."""
    catches: list[ToolCatch] = []
    """Failures answered as a chosen JSON-RPC error (the first that matches); otherwise a
    failure is JSON-RPC -32603 `CODE: message`."""

    @model_validator(mode="after")
    def _one_address(self) -> ResourceEntryDoc:
        if (self.uri is None) == (self.uri_template is None):
            raise PydanticCustomError("resource_address", "give exactly one of `uri` or `uriTemplate`")
        return self


class McpServerResourcesDoc(KindDoc):
    """`McpServer.Resources` (`Mcp.Resources`): a bundle of resources a server offers."""

    kind: Literal["McpServer.Resources"]
    entries: list[ResourceEntryDoc] = []
    """The resources."""


class PromptArgument(_Closed):
    """One argument of a prompt."""

    name: str
    """Its name (`request.arguments.NAME`)."""
    description: str | None = None
    """What it is."""
    required: bool = False
    """Whether `prompts/get` must give it (else JSON-RPC -32602)."""


class PromptEntryDoc(_Closed):
    """One prompt of an `McpServer.Prompts` bundle (Telo's schema)."""

    name: Annotated[str, Field(min_length=1, max_length=128)]
    """Its name, as `prompts/list` gives it."""
    description: str | None = None
    """What it is for."""
    arguments: list[PromptArgument] = []
    """Its arguments (all strings)."""
    handler: Annotated[Ref, RefTo(*HANDLER_KINDS)]
    """The runnable document that produces the prompt."""
    inputs: CelOrJson = None
    """The handler's inputs (`!cel` over `request`: `{name, arguments}`); default: the arguments."""
    result: CelOrJson = None
    """The `GetPromptResult` (`!cel` over `request` and `result`); default: one user message
    with the handler's text (a model's `text`, or the result as JSON)."""
    catches: list[ToolCatch] = []
    """Failures answered as a chosen JSON-RPC error; otherwise JSON-RPC -32603 `CODE: message`."""


class McpServerPromptsDoc(KindDoc):
    """`McpServer.Prompts` (`Mcp.Prompts`): a bundle of prompts a server offers."""

    kind: Literal["McpServer.Prompts"]
    entries: list[PromptEntryDoc] = []
    """The prompts."""


class McpServerDoc(KindDoc):
    """What `McpServer.StdioServer` and `McpServer.HttpEndpoint` share."""

    server_info: ServerInfo
    """The advertised name and version."""
    instructions: str | None = None
    """Text for the client's model, sent on `initialize`."""
    tools: list[Annotated[Ref, RefTo("McpServer.Tools")]] = []
    """The tool bundles it offers (entries of several bundles are merged, the first name wins)."""
    resources: list[Annotated[Ref, RefTo("McpServer.Resources")]] = []
    """The resource bundles it offers (merged in order, the first of a URI or template wins)."""
    prompts: list[Annotated[Ref, RefTo("McpServer.Prompts")]] = []
    """The prompt bundles it offers (merged in order, the first of a name wins)."""


class StdioServerDoc(McpServerDoc):
    """`McpServer.StdioServer` (`Mcp.StdioServer`): the application as an MCP server on stdio."""

    kind: Literal["McpServer.StdioServer"]


class HttpEndpointDoc(McpServerDoc):
    """`McpServer.HttpEndpoint` (`Mcp.HttpEndpoint`): the application as an MCP server over
    Streamable HTTP (`toolbridge run APP --port N` serves it at `/mcp`)."""

    kind: Literal["McpServer.HttpEndpoint"]
    stateful: bool = False
    """Sessions (`Mcp-Session-Id`, resumable streams); default false: every request stands alone."""


class HttpMount(_Closed):
    """One mount of an `Http.Server`: what is served at `path`."""

    path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9._~/-]{0,200}$")]
    """Where (`/mcp`)."""
    mount: Annotated[Ref, RefTo("McpServer.HttpEndpoint")]
    """The `Mcp.HttpEndpoint` served there."""

    @model_validator(mode="before")
    @classmethod
    def _old_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and "mount" not in data and ("type" in data or "name" in data):
            raise PydanticCustomError(
                "telo_unsupported",
                "Telo's design-note mount form (type, path, name: a bare name) is a Telo feature "
                "toolbridge does not implement; write `path: /mcp` and `mount: !ref {name}`",
                {"name": str(data.get("name", "Endpoint"))[:80]},
            )
        return data


class HttpServerDoc(KindDoc):
    """`HttpServer.Server` (Telo's `Http.Server`): an HTTP server on which one `Mcp.HttpEndpoint`
    is mounted (Telo's other mounts, such as `Http.Api`, are kinds toolbridge does not run)."""

    kind: Literal["HttpServer.Server"]
    host: str = "127.0.0.1"
    """The address to listen on (`--host` overrides it)."""
    port: Annotated[int, Field(strict=True, ge=0, le=65535)] = 8000
    """The port (`--port` overrides it; 0 takes a free one)."""
    base_url: str | None = None
    """Telo's: the server's public URL (informative)."""
    openapi: PlainObject | None = None
    """Telo's OpenAPI document settings (accepted; toolbridge serves no OpenAPI document)."""
    mounts: Annotated[list[HttpMount], Field(min_length=1)]
    """What is served where; toolbridge serves one `Mcp.HttpEndpoint` (more mounts are one
    `ERR_MANIFEST_UNSUPPORTED`)."""

    @model_validator(mode="after")
    def _one_mount(self) -> HttpServerDoc:
        if len(self.mounts) > 1:
            raise PydanticCustomError(
                "telo_unsupported",
                "Telo's Http.Server with {count} mounts is a Telo feature toolbridge does not "
                "implement; it serves one Mcp.HttpEndpoint per Http.Server",
                {"count": len(self.mounts)},
            )
        return self
