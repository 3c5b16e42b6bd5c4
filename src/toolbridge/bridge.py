"""`McpToolProvider`: an MCP server's tools as a `ToolProvider` an agent can use.

This is the only module that knows both sides: the tool contract (`toolbridge.tools`, which knows
nothing of MCP) and the MCP clients (`toolbridge.clients`).

Listing (`tools/list` to `ToolSpec`):

- `name` as the server gives it;
- `description` cleaned by `sanitize.clean_text` (terminal escapes, control characters and
  invisible Unicode removed); the tool's `title` stands in when there is no description;
- `parameters` is the tool's `inputSchema`, unchanged; an empty one becomes the open object schema
  `{"type": "object", "additionalProperties": true}`;
- `output_schema` is the tool's `outputSchema` (or None); `annotations` its annotations as wire JSON;
- `mcp` is the whole definition as the server sent it (wire JSON: `title`, `icons`, `execution`,
  `_meta`, ...), for what passes it on unchanged (the gateway's listing).

Calling (`tools/call` to `ToolResult`):

- `isError: true` raises `ToolError` (code `ERR_MCP_TOOL_ERROR`, `details["is_error"]` True) naming
  the tool, with the server's text (cleaned, bounded in length) as `server_text`;
- `structuredContent`, when present, wins and is returned as-is (`ToolResult.of_structured`). The
  client has already validated it against the tool's `outputSchema`: a mismatch is a
  `ProtocolError` (`ERR_MCP_PROTOCOL`). Image and audio blocks returned beside it become the
  result's `media`: the model reads the structured content (with any string that is exactly such a
  block's base64 payload shown as the block's placeholder) and gets the media as media parts;
- otherwise the content array becomes parts (`content.parts_from_mcp`: text, image, audio); if any
  block is of another kind (a `resource_link`, an embedded `resource`), the original array is
  passed through untouched (`ToolResult.of_raw`).

Client errors (`TransportError`, `McpTimeoutError`, `JsonRpcError`, ...) propagate unchanged.

`call_tool_until(name, args, deadline)` is the same call ended by a caller's deadline (event-loop
time): a toolbridge client enforces it in the call's own cancel scope (the governed runtime gives
its tool timeout this way: a governed call of a discovered tool enters one scope, not two);
another client (`mcp.Client`, a subclass overriding `call_tool`) gets a cancel scope here. Either
way the call raises `TimeoutError` when the deadline passes first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from ._deadlines import deadline_watch, takes_deadline
from .clients import McpClient
from .content import media_from_mcp, parts_from_mcp, to_json_text
from .errors import ConfigError, ToolError, bounded
from .sanitize import clean_text
from .tools import OPEN_OBJECT_SCHEMA, ToolProvider, ToolResult, ToolSpec, provider_generation

__all__ = ["SERVER_TEXT_LIMIT", "McpToolProvider", "tool_to_spec"]

SERVER_TEXT_LIMIT = 2000
"""`ToolError.server_text` keeps at most this many characters of the server's error text."""


def _wire(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def tool_to_spec(tool: object) -> ToolSpec:
    """The `ToolSpec` of one MCP tool (an `mcp_types.Tool` or its wire dict).

    Raises:
        ConfigError: `tool` has no string name.
    """
    data = _wire(tool)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ConfigError(f"not an MCP tool definition: {bounded(repr(tool), 200)}", code="ERR_INVALID_INPUT")
    description = data.get("description") or data.get("title") or ""
    parameters = data.get("inputSchema")
    if not isinstance(parameters, Mapping) or not parameters:
        parameters = dict(OPEN_OBJECT_SCHEMA)
    output_schema = data.get("outputSchema")
    annotations = data.get("annotations")
    return ToolSpec(
        name=data["name"],
        description=clean_text(str(description)),
        parameters=parameters,
        output_schema=output_schema if isinstance(output_schema, Mapping) else None,
        annotations=annotations if isinstance(annotations, Mapping) else None,
        mcp=data,
    )


def _error_text(content: Sequence[object], structured: object) -> str:
    texts = [b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    if texts:
        return "\n".join(texts)
    if structured is not None:
        return to_json_text(structured)
    return to_json_text(list(content)) if content else "(the server gave no text)"


def _bad_args(name: str, args: object) -> ConfigError:
    return ConfigError(
        f"arguments of tool {name!r} must be a JSON object, got {type(args).__name__}",
        code="ERR_INVALID_INPUT",
    )


def _translate(name: str, result: Any) -> ToolResult:
    """A `tools/call` result in wire form as a `ToolResult` (see the module docstring)."""
    content = result.get("content") or []
    structured = result.get("structuredContent")
    if result.get("isError"):
        text = clean_text(_error_text(content, structured))
        raise ToolError(
            f"tool {name!r} reported an error: {bounded(text, 300)}",
            server_text=bounded(text, SERVER_TEXT_LIMIT),
            details={"tool": name, "is_error": True},
        )
    if structured is not None:
        return ToolResult.of_structured(structured, media_from_mcp(content))
    parts = parts_from_mcp(content)
    if parts is None:
        return ToolResult.of_raw(content)
    return ToolResult.of_parts(parts)


class McpToolProvider:
    """The tools of one MCP server, through any toolbridge MCP client, as a `ToolProvider`.

    Args:
        client: a `StdioClient`, `HttpClient`, `InProcessClient` (or anything with the `McpClient`
            shape).

    Closing the provider (`aclose()` or `async with`) closes the client.
    """

    accepts_deadline = True
    """`call_tool_until` takes a caller's deadline (the governed runtime gives it its tool
    timeout when neither this class nor the client's overrides `call_tool`)."""

    def __init__(self, client: McpClient) -> None:
        if not isinstance(client, ToolProvider):  # list_tools and call_tool
            raise ConfigError(
                f"McpToolProvider needs an MCP client, got {type(client).__name__}", code="ERR_INVALID_INPUT"
            )
        self.client: McpClient = client

    def __repr__(self) -> str:
        return f"McpToolProvider({self.client!r})"

    @property
    def generation(self) -> int:
        """The client's tool-list generation: grows when the server's tools change."""
        return provider_generation(self.client)

    @property
    def instructions(self) -> str | None:
        """The server's instructions, cleaned (None before the first connection or if none)."""
        text = getattr(self.client, "instructions", None)
        return clean_text(text) if isinstance(text, str) else None

    async def list_tools(self) -> list[ToolSpec]:
        """The server's tools as `ToolSpec`s.

        Raises:
            TransportError, ProtocolError, JsonRpcError, McpTimeoutError: listing failed.
        """
        return [tool_to_spec(tool) for tool in await self.client.list_tools()]

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        """Call a tool and translate its result (see the module docstring).

        Raises:
            ToolError: the tool reported failure (`ERR_MCP_TOOL_ERROR`, with `server_text`).
            ConfigError: `args` is not a mapping (`ERR_INVALID_INPUT`).
            ProtocolError: the result broke the protocol (for example its output schema).
            TransportError, JsonRpcError, McpTimeoutError, SessionInvalidError: the call failed.
        """
        if not isinstance(args, Mapping):
            raise _bad_args(name, args)
        # The client copies the arguments it sends; no second copy here.
        return _translate(name, _wire(await self.client.call_tool(name, args)))

    async def call_tool_until(self, name: str, args: Mapping[str, Any], deadline: float) -> ToolResult:
        """`call_tool`, ended by the caller's `deadline` (event-loop time, `anyio.current_time()`).

        A toolbridge client gets the deadline (`call_tool(deadline=)`) and enforces it in the
        call's own cancel scope beside its own timeout; another client (`mcp.Client`, a subclass
        or an instance that replaces `call_tool`) is bounded by a scope here. Either way the call
        enters one scope: the governed runtime gives a discovered tool its tool timeout this way.

        Raises:
            TimeoutError: `deadline` passed first (the server was told to cancel).
            ConfigError: `deadline` is not a time of the event loop's clock (`ERR_CONFIG`); and
                whatever `call_tool` raises.
        """
        if not isinstance(args, Mapping):
            raise _bad_args(name, args)
        if type(deadline) not in (float, int) or math.isnan(deadline):
            raise ConfigError(
                f"deadline must be a time of the event loop's clock, got {bounded(repr(deadline), 80)}"
            )
        client: Any = self.client
        if takes_deadline(client):
            return _translate(name, _wire(await client.call_tool(name, args, deadline=deadline)))
        # A bare cancel scope whose deadline the loop's `DeadlineWatch` keeps (no timer of its own).
        result: object = None
        watch = deadline_watch()
        with watch.scope_class() as scope:  # anyio.CancelScope(), minus the backend lookup
            watch.arm(scope, deadline)
            try:
                result = await client.call_tool(name, args)
            finally:
                watch.disarm(scope)
        if scope.cancelled_caught:
            raise TimeoutError(f"tool {name!r}: the caller's deadline passed; the call was cancelled")
        return _translate(name, _wire(result))

    async def aclose(self) -> None:
        """Close the underlying client (idempotent)."""
        await self.client.aclose()

    async def __aenter__(self) -> McpToolProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
