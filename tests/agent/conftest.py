"""Fixtures for the agent tests: MCP tool providers over real servers.

`mcp_provider(client)` wraps a toolbridge client as a `ToolProvider` with
`toolbridge.bridge.McpToolProvider` when that module is present. Until it lands (another
helper builds it), a minimal stand-in with the same observable contract is used: tools/list
mapped to `ToolSpec`s, tools/call mapped through `toolbridge.content`, `isError` raised as
`ToolError` `ERR_MCP_TOOL_ERROR` carrying the server's text.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from toolbridge.clients import StdioClient
from toolbridge.content import parts_from_mcp
from toolbridge.errors import ToolError
from toolbridge.tools import OPEN_OBJECT_SCHEMA, ToolResult, ToolSpec


class _StandInProvider:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.name = "mcp"

    @property
    def generation(self) -> int:
        return int(getattr(self.client, "generation", 0))

    async def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=t.name,
                description=t.description or "",
                parameters=dict(t.input_schema or OPEN_OBJECT_SCHEMA),
            )
            for t in await self.client.list_tools()
        ]

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        result = await self.client.call_tool(name, dict(args))
        content = result.get("content") or []
        if result.get("isError"):
            text = "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
            raise ToolError(f'tool "{name}" failed: {text}', server_text=text)
        if result.get("structuredContent") is not None:
            return ToolResult.of_structured(result["structuredContent"])
        parts = parts_from_mcp(content)
        return ToolResult.of_parts(parts) if parts is not None else ToolResult.of_raw(content)


def mcp_provider(client: Any) -> Any:
    if importlib.util.find_spec("toolbridge.bridge") is not None:
        from toolbridge.bridge import McpToolProvider

        return McpToolProvider(client)
    return _StandInProvider(client)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "todo.md").write_text("- write tests\n")
    return root


@pytest.fixture
async def fs_client(node: str, filesystem_js: str, data_dir: Path) -> AsyncIterator[StdioClient]:
    async with StdioClient(node, [filesystem_js, str(data_dir)]) as client:
        yield client


@pytest.fixture
async def everything_client(everything_cmd: list[str]) -> AsyncIterator[StdioClient]:
    # server-everything keeps a long-running operation going after a cancel: a short grace
    # period lets the fixture stop it promptly (SIGTERM) once the test is done.
    async with StdioClient(everything_cmd[0], everything_cmd[1:], shutdown_grace_ms=500) as client:
        yield client
