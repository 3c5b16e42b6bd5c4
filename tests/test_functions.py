"""`FunctionTools`: schemas from signatures and docstrings, validation, results, threads, errors."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import date
from typing import Literal

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from toolbridge.content import ImagePart, TextPart
from toolbridge.errors import ConfigError, PolicyError, ToolError
from toolbridge.functions import FunctionTools, parse_docstring
from toolbridge.tools import ToolProvider, ToolResult

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


class Point(BaseModel):
    x: float
    y: float


def search(
    query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast", near: Point | None = None
) -> list[str]:
    """Search the catalogue.

    Longer explanation that stays in the description.

    Args:
        query: what to look for,
            over several lines.
        limit (int): at most this many hits.
        mode: how to match.

    Returns:
        The hits.
    """
    return [query] * min(limit, 2)


def test_schema_from_hints_and_docstring() -> None:
    tools = FunctionTools([search])
    assert isinstance(tools, ToolProvider)
    (spec,) = anyio.run(tools.list_tools)
    assert spec.name == "search"
    assert spec.description == "Search the catalogue.\n\nLonger explanation that stays in the description."
    params = dict(spec.parameters)
    assert params["type"] == "object" and params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for, over several lines."}
    assert props["limit"] == {"type": "integer", "default": 10, "description": "at most this many hits."}
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert "title" not in params and "title" not in props["query"]
    assert "$defs" in params and "Point" in params["$defs"]


def test_parse_docstring_sections() -> None:
    summary, args = parse_docstring(
        "Do it.\n\nArgs:\n    a: first.\n    b (str): second\n        continued.\n\n"
        "Raises:\n    ValueError: never."
    )
    assert summary == "Do it."
    assert args == {"a": "first.", "b": "second continued."}
    assert parse_docstring(None) == ("", {})


async def test_invalid_arguments_are_a_clear_tool_error() -> None:
    tools = FunctionTools([search])
    with pytest.raises(ToolError) as info:
        await tools.call_tool("search", {"limit": "many", "extra": 1})
    error = info.value
    assert error.code == "ERR_TOOL_INVALID_ARGUMENTS"
    assert error.message.startswith('invalid arguments for tool "search": ')
    assert "query: Field required" in error.message
    assert "limit: Input should be a valid integer" in error.message
    assert "extra: Extra inputs are not permitted" in error.message
    with pytest.raises(ToolError) as info:
        await tools.call_tool("search", {"query": "x", "near": {"x": 1}})
    assert "near.y: Field required" in info.value.message


async def test_return_values_become_results() -> None:
    @dataclass
    class Row:
        day: date
        n: int

    tools = FunctionTools()

    @tools.tool
    def text() -> str:
        """Text."""
        return "hello"

    @tools.tool(name="picture", description="An image.")
    def image() -> ImagePart:
        return ImagePart(PNG, "image/png")

    @tools.add
    def parts() -> list[TextPart | ImagePart]:
        """Parts."""
        return [TextPart("caption"), ImagePart(PNG, "image/png")]

    @tools.add
    def passthrough() -> ToolResult:
        """As-is."""
        return ToolResult.of_raw([{"type": "resource_link", "uri": "file:///x"}])

    @tools.add
    def structured() -> Row:
        """A dataclass."""
        return Row(date(2026, 1, 2), 3)

    @tools.add
    def nothing() -> None:
        """Nothing."""

    assert (await tools.call_tool("text", {})) == ToolResult.of_text("hello")
    assert (await tools.call_tool("picture", {})).parts == (ImagePart(PNG, "image/png"),)
    assert (await tools.call_tool("parts", {})).kind == "parts"
    assert (await tools.call_tool("passthrough", {})).kind == "raw"
    assert (await tools.call_tool("structured", {})) == ToolResult.of_structured(
        {"day": "2026-01-02", "n": 3}
    )
    assert (await tools.call_tool("nothing", {})) == ToolResult.of_parts([])
    assert [s.name for s in await tools.list_tools()] == [
        "text",
        "picture",
        "parts",
        "passthrough",
        "structured",
        "nothing",
    ]
    assert (await tools.list_tools())[1].description == "An image."
    assert tools.generation == 6


async def test_sync_functions_run_in_a_worker_thread() -> None:
    main = threading.get_ident()
    seen: list[int] = []

    def blocking() -> str:
        """Blocks."""
        seen.append(threading.get_ident())
        time.sleep(0.3)
        return "done"

    tools = FunctionTools([blocking])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.02)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        assert (await tools.call_tool("blocking", {})).to_text() == "done"
        tg.cancel_scope.cancel()
    assert seen and seen[0] != main
    assert ticks >= 5  # the event loop kept running


async def test_async_functions_are_awaited_and_errors_wrapped() -> None:
    async def fetch(url: str) -> dict[str, str]:
        """Fetch."""
        await anyio.lowlevel.checkpoint()
        if url == "bad":
            raise ValueError("unreachable host")
        return {"url": url}

    def refuse() -> str:
        """Refuse."""
        raise PolicyError("no", code="PERMISSION_DENIED")

    tools = FunctionTools([fetch, refuse])
    assert (await tools.call_tool("fetch", {"url": "x"})).structured == {"url": "x"}
    with pytest.raises(ToolError) as info:
        await tools.call_tool("fetch", {"url": "bad"})
    assert info.value.code == "ERR_TOOL_FAILED" and "ValueError: unreachable host" in info.value.message
    with pytest.raises(PolicyError):
        await tools.call_tool("refuse", {})
    with pytest.raises(ToolError) as info:
        await tools.call_tool("nope", {})
    assert info.value.code == "ERR_TOOL_NOT_FOUND"


async def test_unserializable_result() -> None:
    def weird() -> object:
        """Returns an object."""
        return object()

    with pytest.raises(ToolError) as info:
        await FunctionTools([weird]).call_tool("weird", {})
    assert info.value.code == "ERR_TOOL_BAD_RESULT"


def test_registration_errors() -> None:
    def dup() -> str:
        """Dup."""
        return ""

    with pytest.raises(ConfigError):
        FunctionTools([dup, dup])

    def star(*args: int) -> int:
        """Star."""
        return 0

    with pytest.raises(ConfigError):
        FunctionTools([star])
    with pytest.raises(ConfigError):
        FunctionTools([lambda: 1])
    with pytest.raises(ConfigError):
        FunctionTools(["not callable"])  # type: ignore[list-item]


def test_output_schema_from_a_model_return() -> None:
    def locate() -> Point:
        """Where."""
        return Point(x=0, y=0)

    (spec,) = anyio.run(FunctionTools([locate]).list_tools)
    assert spec.output_schema is not None and spec.output_schema["required"] == ["x", "y"]


async def test_titles_inside_defaults_and_enums_are_data_and_kept() -> None:
    def pick(opts: dict[str, object] = {"title": "x", "n": 1}, kind: Literal["title", "b"] = "b") -> str:  # noqa: B006
        """Pick."""
        return kind

    (spec,) = await FunctionTools([pick]).list_tools()
    schema = spec.parameters
    assert schema["properties"]["opts"]["default"] == {"title": "x", "n": 1}
    assert schema["properties"]["kind"]["enum"] == ["title", "b"]
    assert "title" not in schema and "title" not in schema["properties"]["opts"]
