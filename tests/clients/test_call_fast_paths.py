"""The fast paths of a `tools/call`: each one gives the same answer as the slow path it skips.

- `call_result_to_dict` builds a plain text block by hand instead of dumping its model;
- the content guard checks text blocks inline and hands back the result it was given;
- a call on a live connection takes it without waiting (`_ready_connection`), and a call with no
  deadline opens no cancel scope; a retired or closed connection still goes the slow way.
"""

from __future__ import annotations

import mcp_types as types
import pytest

from fixtures.inproc_servers import paged_server
from toolbridge.clients import InProcessClient, call_result_to_dict
from toolbridge.clients._content_guard import RAW_CONTENT_META, preserve_unknown_content
from toolbridge.errors import McpTimeoutError, TransportError

MODES = ["auto", "legacy"]


def _dumped(block: types.ContentBlock) -> dict[str, object]:
    return block.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_plain_text_block_matches_the_model_dump() -> None:
    block = types.TextContent(type="text", text="héllo")
    result = types.CallToolResult(content=[block])
    assert call_result_to_dict(result) == {"content": [_dumped(block)]}
    assert call_result_to_dict(result)["content"] == [{"type": "text", "text": "héllo"}]


def test_annotated_text_and_other_blocks_keep_every_field() -> None:
    annotated = types.TextContent(
        type="text",
        text="x",
        annotations=types.Annotations(audience=["user"], priority=0.5),
        _meta={"k": "v"},
    )
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    result = types.CallToolResult(content=[annotated, image], is_error=True)
    wire = call_result_to_dict(result)
    assert wire["content"] == [_dumped(annotated), _dumped(image)]
    assert wire["content"][0]["annotations"] == {"audience": ["user"], "priority": 0.5}
    assert wire["content"][0]["_meta"] == {"k": "v"}
    assert wire["isError"] is True


def test_content_guard_leaves_text_only_results_alone() -> None:
    raw = {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert preserve_unknown_content(raw) is raw


def test_content_guard_still_stashes_a_text_block_without_text() -> None:
    content = [{"type": "text", "text": "ok"}, {"type": "text", "text": 42}]
    out = preserve_unknown_content({"content": content})
    assert out["_meta"][RAW_CONTENT_META] is content
    assert out["content"] == [{"type": "text", "text": "ok"}, {"type": "text", "text": ""}]


@pytest.mark.parametrize("mode", MODES)
async def test_live_connection_is_taken_at_once_and_a_retired_one_is_replaced(mode: str) -> None:
    async with InProcessClient(paged_server(), mode=mode) as client:
        assert client._ready_connection() is None  # not connected yet: the slow path connects
        first = await client.call_tool("tool_1", {"x": "a"})
        assert first["content"][0]["text"] == "1:a"
        conn = client._ready_connection()
        assert conn is not None and conn is client._conn
        generation = client.generation
        client._retire(conn)
        assert client._ready_connection() is None
        again = await client.call_tool("tool_2", {"x": "b"})
        assert again["content"][0]["text"] == "2:b"
        assert client._conn is not conn
        assert client.generation == generation + 1
    with pytest.raises(TransportError):
        await client.call_tool("tool_1", {"x": "c"})


@pytest.mark.parametrize("mode", MODES)
async def test_no_deadline_waits_and_a_deadline_still_cuts(mode: str) -> None:
    async with InProcessClient(paged_server(), mode=mode) as client:
        slow = await client.call_tool("tool_3", {"x": "s", "delay": 0.2})
        assert slow["content"][0]["text"] == "3:s"
        with pytest.raises(McpTimeoutError):
            await client.call_tool("tool_3", {"x": "t", "delay": 5}, timeout=0.1)
        after = await client.call_tool("tool_4", {"x": "u"})
        assert after["content"][0]["text"] == "4:u"
