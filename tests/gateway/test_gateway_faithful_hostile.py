"""What a hostile upstream can put in a tool definition, a result or a JSON-RPC error, against the
gateway's conversions (`served_tool`, `upstream_error`, `upstream_rpc_error`, `_from_tool_result`):
nothing raises, nothing unbounded passes, no escape or secret gets through the cleaned fields, and
no upstream key lands in the gateway's `_meta` namespace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge.errors import JsonRpcError
from toolbridge.gateway._answers import (
    ERROR_TEXT_LIMIT,
    META_PREFIX,
    from_tool_result,
    served_tool,
    upstream_error,
    upstream_rpc_error,
)
from toolbridge.gateway._upstream import CallContext
from toolbridge.redact import forget_secrets, register_secret
from toolbridge.sanitize import is_clean
from toolbridge.tools import ToolResult, ToolSpec

SECRET = "sk-hostile-0123456789abcdef"
NASTY = st.text(
    alphabet=st.sampled_from(
        ["a", " ", "\x1b", "[", "]", "\u202e", "\u200b", "\x07", "\r", "é", "\U000e0041"]
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | NASTY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY, inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(autouse=True)
def _secret() -> Any:
    register_secret(SECRET)
    yield
    forget_secrets()


def _no_gateway_keys(meta: Any) -> bool:
    return meta is None or not any(isinstance(k, str) and k.startswith(META_PREFIX) for k in meta)


@given(
    title=NASTY,
    description=NASTY,
    extra=st.dictionaries(st.sampled_from(["_meta", "icons", "execution", "x"]), JSON),
)
def test_served_tool_never_raises_and_cleans_what_a_model_reads(
    title: str, description: str, extra: dict[str, Any]
) -> None:
    wire = {
        "name": "t",
        "title": title,
        "description": description,
        "inputSchema": {"type": "object"},
        **extra,
    }
    meta = wire.get("_meta")
    if isinstance(meta, dict):
        meta["toolbridge/code"] = "SPOOFED"
    spec = ToolSpec(name="t", description=description, parameters={"type": "object"}, mcp=wire)
    tool = served_tool("p_t", spec)
    assert tool is not None and tool.name == "p_t"  # a bad optional field never loses the tool
    assert is_clean(tool.description or "") and (tool.title is None or is_clean(tool.title))
    assert _no_gateway_keys(tool.meta)


def test_served_tool_keeps_a_schema_the_model_reads_and_cleans_it() -> None:
    spec = ToolSpec(
        name="t",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "string", "title": "A\x1b[2J", "description": "b\u202e"}},
        },
        mcp={"name": "t", "inputSchema": {}, "icons": "not a list", "execution": 5},
    )
    tool = served_tool("p_t", spec)  # the icons and execution are invalid: served without them
    assert tool is not None
    assert tool.input_schema["properties"]["a"] == {"type": "string", "title": "A", "description": "b"}
    assert tool.icons is None and tool.execution is None


@given(
    blocks=st.lists(st.one_of(NASTY.map(lambda t: {"type": "text", "text": t}), JSON), max_size=6),
    structured=JSON,
)
def test_an_upstream_error_result_is_bounded_cleaned_and_redacted(blocks: list[Any], structured: Any) -> None:
    wire = {
        "content": [*blocks, {"type": "text", "text": f"key {SECRET[:8]}\u200b{SECRET[8:]} " + "x" * 10_000}],
        "structuredContent": {"leak": SECRET, "other": structured},
        "isError": True,
        "_meta": {"toolbridge/outcome": "succeeded", "ok": 1},
    }
    result = upstream_error(wire, 1 << 20)
    text = json.dumps(result.model_dump(by_alias=True, mode="json"))
    assert result.is_error and SECRET not in text
    assert _no_gateway_keys(result.meta)
    for block in result.content:
        if block.type == "text":
            assert is_clean(block.text) and len(block.text) <= ERROR_TEXT_LIMIT + 40  # type: ignore[union-attr]


def test_an_upstream_error_over_the_output_limit_becomes_bounded_text() -> None:
    wire = {"content": [{"type": "text", "text": "t" * 1500} for _ in range(100)], "isError": True}
    result = upstream_error(wire, 10_000)
    (block,) = result.content
    assert result.is_error and len(block.text) <= ERROR_TEXT_LIMIT + 40  # type: ignore[union-attr]
    assert upstream_error({"content": "not a list", "isError": True}, 10_000).is_error


@given(message=NASTY, data=JSON)
def test_an_upstream_rpc_error_keeps_its_code_and_is_cleaned(message: str, data: Any) -> None:
    error = upstream_rpc_error(
        JsonRpcError("x", rpc_code=-32099, rpc_message=f"{message} {SECRET}", data=data)
    )
    assert error.error.code == -32099
    assert is_clean(error.error.message) and SECRET not in error.error.message
    assert len(error.error.message) <= ERROR_TEXT_LIMIT + 40
    if error.error.data is not None:
        assert len(json.dumps(error.error.data)) <= 4000


def test_rpc_error_data_too_large_is_dropped_and_too_deep_is_cut() -> None:
    big = upstream_rpc_error(JsonRpcError("x", rpc_code=-32602, rpc_message="", data={"big": "y" * 10_000}))
    assert big.error.data is None and big.error.message == "the upstream failed"
    deep: Any = "x"
    for _ in range(150):  # about what a JSON parser lets through from the wire
        deep = [deep]
    cut = upstream_rpc_error(JsonRpcError("x", rpc_code=-32602, rpc_message="m", data=deep))
    shown = json.dumps(cut.error.data, ensure_ascii=False)
    assert "…" in shown and shown.count("[") <= 25


def test_a_result_keeps_every_field_but_the_gateway_s_keys() -> None:
    context = CallContext(identity=None)  # type: ignore[arg-type]
    result = ToolResult.of_raw([])
    context.result = result
    context.wire = {
        "content": [{"type": "text", "text": "hi"}],
        "structuredContent": {"a": 1},
        "_meta": {"toolbridge/code": "X", "io.example/trace": "t"},
        "resultType": "complete",
    }
    served = from_tool_result(result, context)
    assert served.meta == {"io.example/trace": "t"} and served.structured_content == {"a": 1}
    context.wire = {"content": [], "_meta": 5}  # a bad `_meta`: the rest is kept
    assert from_tool_result(result, context).meta is None
    context.wire = {"content": "not a list"}  # unreadable: an error, never a silently empty success
    assert from_tool_result(result, context).is_error
