"""A listing with odd tool definitions: defaults applied before the SDK validates, bad tools skipped.

The hostile server (`--odd-schemas`, and the hostile HTTP server at `/odd/mcp`) lists, beside its
good tools, one tool without `inputSchema`, one with `inputSchema: null`, and tools the SDK's types
refuse (a string for a schema, a schema whose `type` is not `"object"`, list-valued `properties`, a
string `required`, no name, ...). Without the guard the SDK refuses the whole listing, so
`tools/list` and every call fail with `ERR_MCP_PROTOCOL`.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
import mcp_types.methods as sdk_methods
import pytest
from _support import load_hostile
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import HttpClient, StdioClient
from toolbridge.clients._content_guard import repair_tool_listing
from toolbridge.sanitize import visible_text

ODD_SCHEMA_SKIPPED: tuple[str, ...] = load_hostile().ODD_SCHEMA_SKIPPED

OPEN = {"type": "object", "additionalProperties": True}


def _check_listing(tools: dict[str, Any], skipped: list[str]) -> None:
    assert {"echo", "no_schema", "null_schema"} <= set(tools)
    assert not set(ODD_SCHEMA_SKIPPED) & set(tools)
    assert tools["no_schema"].input_schema == OPEN
    assert tools["null_schema"].input_schema == OPEN
    # one warning per tool name, the name shown through `visible_text` (no raw escape, no ZWSP)
    assert len(skipped) == len(ODD_SCHEMA_SKIPPED), skipped
    for name in ODD_SCHEMA_SKIPPED:
        assert sum(f"'{visible_text(name)}'" in m for m in skipped) == 1, (name, skipped)
    assert not any("\x1b" in m or "\u200b" in m for m in skipped)
    assert any("'bad_schema'" in m and "inputSchema" in m for m in skipped)
    assert any("'string_required'" in m and "inputSchema.required" in m for m in skipped)


def _skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "left out of the listing" in r.getMessage()]


async def test_missing_schemas_get_the_default_and_bad_tools_are_skipped_once(
    hostile_cmd: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="toolbridge")
    client = StdioClient(hostile_cmd[0], [*hostile_cmd[1:], "--odd-schemas"], timeout=20)
    async with McpToolProvider(client) as provider:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["echo"].input_schema["properties"] == {"text": {"type": "string"}}
        specs = {spec.name: spec for spec in await provider.list_tools()}
        assert dict(specs["no_schema"].parameters) == OPEN
        assert (await provider.call_tool("no_schema", {})).to_text() == "ran no_schema"
        assert (await provider.call_tool("echo", {"text": "still here"})).to_text() == "still here"
        for _ in range(3):  # listing again logs nothing new
            await client.list_tools(refresh=True)
    _check_listing(tools, _skipped(caplog))


async def test_the_same_repair_over_http(hostile_http_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="toolbridge")
    client = HttpClient(hostile_http_url.replace("/mcp", "/odd/mcp"), timeout=20)
    async with McpToolProvider(client) as provider:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert (await provider.call_tool("null_schema", {})).to_text() == "ran null_schema"
        assert (await provider.call_tool("echo", {"text": "still here"})).to_text() == "still here"
        await client.list_tools(refresh=True)
    _check_listing(tools, _skipped(caplog))


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


_VERSIONS = ("2025-11-25", "2026-07-28")
_RESULT_FIELDS: dict[str, dict[str, Any]] = {
    "2025-11-25": {},
    "2026-07-28": {"resultType": "complete", "cacheScope": "private", "ttlMs": 0},
}
_prop_names = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)
_valid_tool = st.builds(
    lambda name, props, required, description: {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {p: {"type": "string"} for p in props},
            "required": [p for p in props if p in required],
        },
    },
    st.text(max_size=12),
    st.lists(_prop_names, max_size=3, unique=True),
    st.lists(_prop_names, max_size=3),
    st.text(max_size=10),
)
"""Tool definitions every revision of the SDK's types accepts."""


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), _valid_tool, _entry | _json), max_size=6), st.sampled_from(_VERSIONS)
)
def test_any_listing_is_repaired_into_one_the_sdk_accepts(
    mixed: list[tuple[bool, dict[str, Any], object]], version: str
) -> None:
    entries = [valid if use_valid else other for use_valid, valid, other in mixed]
    skipped: list[tuple[str, str]] = []
    raw = {"tools": entries, **_RESULT_FIELDS[version]}
    repaired = repair_tool_listing(raw, lambda name, why: skipped.append((name, why)), version)
    # what the SDK does with a listing at `version`: the revision's wire model, then its own types
    listing = sdk_methods.parse_server_result("tools/list", version, repaired)  # never raises
    assert isinstance(listing, types.ListToolsResult)
    assert len(listing.tools) + len(skipped) == len(entries)
    kept = iter(listing.tools)
    for entry in entries:  # valid tools are always kept, in order, as listed
        if any(entry is valid for use_valid, valid, _ in mixed if use_valid):
            tool = next(t for t in kept if t.name == entry["name"])
            assert tool.input_schema == entry["inputSchema"]
    for entry in entries:  # a tool with a valid name and no schema is kept, with the open schema
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and set(entry) == {"name"}:
            assert {tool.name: tool for tool in listing.tools}[entry["name"]].input_schema == OPEN
    for name, why in skipped:
        assert len(name) <= 200 and why


def test_a_listing_of_good_tools_is_passed_through_as_it_is() -> None:
    raw = {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}
    assert repair_tool_listing(raw, lambda name, why: None, "2025-11-25") is raw
