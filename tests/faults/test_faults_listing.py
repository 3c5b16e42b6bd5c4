"""A listing with odd tool definitions: defaults applied before the SDK validates, bad tools skipped.

The hostile server (`--odd-schemas`) lists, beside its good tools, one tool without `inputSchema`,
one with `inputSchema: null`, one whose schema is a string, and one without a name. Without the
guard the SDK refuses the whole listing, so `tools/list` and every call fail with
`ERR_MCP_PROTOCOL`.
"""

from __future__ import annotations

import logging

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.clients._content_guard import repair_tool_listing

OPEN = {"type": "object", "additionalProperties": True}


async def test_missing_schemas_get_the_default_and_bad_tools_are_skipped_once(
    hostile_cmd: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="toolbridge")
    client = StdioClient(hostile_cmd[0], [*hostile_cmd[1:], "--odd-schemas"], timeout=20)
    async with McpToolProvider(client) as provider:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {"echo", "no_schema", "null_schema"} <= set(tools)
        assert "bad_schema" not in tools
        assert tools["no_schema"].input_schema == OPEN
        assert tools["null_schema"].input_schema == OPEN
        assert tools["echo"].input_schema["properties"] == {"text": {"type": "string"}}
        specs = {spec.name: spec for spec in await provider.list_tools()}
        assert dict(specs["no_schema"].parameters) == OPEN
        assert (await provider.call_tool("no_schema", {})).to_text() == "ran no_schema"
        assert (await provider.call_tool("echo", {"text": "still here"})).to_text() == "still here"
        for _ in range(3):  # listing again logs nothing new
            await client.list_tools(refresh=True)
    skipped = [r.getMessage() for r in caplog.records if "left out of the listing" in r.getMessage()]
    assert len(skipped) == 2, skipped  # bad_schema and the nameless entry, once each
    assert any("'bad_schema'" in m and "inputSchema" in m for m in skipped)
    assert any("'(no name)'" in m for m in skipped)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=10) | _json,
        "description": st.text(max_size=10) | _json,
        "inputSchema": st.just({"type": "object"}) | _json,
        "outputSchema": st.just({"type": "object"}) | _json,
        "annotations": st.just({"readOnlyHint": True}) | _json,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_entry | _json, max_size=6))
def test_any_listing_is_repaired_into_one_the_sdk_accepts(entries: list[object]) -> None:
    skipped: list[tuple[str, str]] = []
    repaired = repair_tool_listing({"tools": entries}, lambda name, why: skipped.append((name, why)))
    listing = types.ListToolsResult.model_validate(repaired, by_name=False)  # never raises
    assert len(listing.tools) + len(skipped) == len(entries)
    for entry in entries:  # a tool with a valid name and no schema is kept, with the open schema
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and set(entry) == {"name"}:
            kept = {tool.name: tool for tool in listing.tools}
            assert kept[entry["name"]].input_schema == OPEN
    for name, why in skipped:
        assert len(name) <= 200 and why
