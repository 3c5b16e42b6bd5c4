"""What every toolbridge MCP client offers (`McpClient`), and the wire form of a call's result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, TypeAlias, runtime_checkable

import mcp_types as types

from ._content_guard import RAW_CONTENT_META, restore_raw_content

__all__ = ["McpClient", "ProgressHandler", "call_result_to_dict"]

ProgressHandler: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives `(progress, total, message)` for each progress notification of one call."""


@runtime_checkable
class McpClient(Protocol):
    """What every toolbridge MCP client offers (`StdioClient`, `HttpClient`, `InProcessClient`).

    `list_tools()` returns the SDK's `mcp_types.Tool` models; `call_tool()` returns the result as
    a plain JSON dict in wire form (see `call_result_to_dict`).
    """

    @property
    def generation(self) -> int:
        """Grows by one each time the server's tool list changes (or the connection is renewed)."""
        ...

    @property
    def instructions(self) -> str | None:
        """The server's instructions, once connected."""
        ...

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version, once connected (None if it did not say)."""
        ...

    async def list_tools(self, *, refresh: bool = False) -> list[types.Tool]: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a deadline per call is the API
        progress: ProgressHandler | None = None,
    ) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def _block_to_dict(block: Any) -> dict[str, Any]:
    """One content block in wire form (unknown fields kept)."""
    dumped: dict[str, Any] = block.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def call_result_to_dict(result: types.CallToolResult) -> dict[str, Any]:
    """The wire form of a `tools/call` result, with exactly the keys an MCP result defines.

    Returns:
        `{"content": [...]}` plus `"structuredContent"` when the server sent it, `"isError": True`
        when the tool failed, and `"_meta"` when present. Content blocks are camelCase JSON dicts,
        exactly as on the wire (unknown fields of a block are kept).
    """
    # A plain text block (the common case) is built here, without a dump or a call per block.
    content: list[dict[str, Any]] = []
    for block in result.content:
        if (
            type(block) is types.TextContent
            and block.annotations is None
            and block.meta is None
            and not block.__pydantic_extra__
        ):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(_block_to_dict(block))
    out: dict[str, Any] = {"content": content}
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    if result.is_error:
        out["isError"] = True
    meta = result.meta
    if meta:
        out["_meta"] = dict(meta)
        if RAW_CONTENT_META in meta:
            restore_raw_content(out)
    return out
