"""Hostile input for the provider translations: hypothesis on schemas, arguments, model strings, messages."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.agent import Message, ToolCall, model_from_string
from toolbridge.agent.models import to_gemini_schema
from toolbridge.agent.models._anthropic import to_anthropic_messages
from toolbridge.agent.models._gemini import to_gemini_contents
from toolbridge.agent.models._remote import tool_arguments
from toolbridge.content import AudioPart, ImagePart, TextPart
from toolbridge.errors import ConfigError, ModelError

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "anyOf",
        "oneOf",
        "allOf",
        "enum",
        "const",
        "format",
        "description",
        "default",
        "minimum",
        "additionalProperties",
        "$ref",
        "$defs",
        "nullable",
        "not",
        "title",
        "x",
    ]
)
TYPES = st.sampled_from(["object", "string", "integer", "number", "boolean", "array", "null", "weird"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), TYPES, st.just("#/$defs/A"))
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.text(max_size=5)), inner, max_size=5),
    ),
    max_leaves=30,
)
SCHEMAS = st.dictionaries(KEYS, JSONISH, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS)
def test_gemini_schema_conversion_never_raises_and_gives_what_the_sdk_accepts(schema: dict[str, Any]) -> None:
    from google.genai import types

    before = copy.deepcopy(schema)
    result = to_gemini_schema(schema)
    assert schema == before  # never modified
    assert result is None or isinstance(result, dict)
    if result:
        assert result["type"] == "OBJECT"
        types.Schema.model_validate(result)  # a Schema the API's own types accept
        json.dumps(result)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.binary(max_size=20).map(lambda b: b.decode("latin-1")), JSONISH))
def test_tool_arguments_are_an_object_or_one_clear_error(raw: Any) -> None:
    if not isinstance(raw, str) and not isinstance(raw, dict) and raw is not None:
        raw = json.dumps(raw)
    try:
        value = tool_arguments("m", "tool", raw)
    except ModelError as exc:
        assert exc.code == "ERR_MODEL_BAD_RESPONSE" and "tool" in exc.message
        assert "\n" not in exc.message
    else:
        assert isinstance(value, dict)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_model_strings_build_a_model_or_fail_with_err_config(spec: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
            mp.setenv(name, "key-for-tests")
        for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
            mp.delenv(name, raising=False)
        try:
            model = model_from_string(spec)
        except ConfigError as exc:
            assert exc.code == "ERR_CONFIG" and len(exc.message) < 400
        else:
            name = spec.partition(":")[2]
            assert model.model == name.strip() and model.id.endswith(":" + name.strip())


PARTS = st.lists(
    st.one_of(
        st.text(max_size=6).map(TextPart),
        st.sampled_from(["image/png", "image/tiff", "IMAGE/JPEG"]).map(lambda t: ImagePart(PNG, t)),
        st.sampled_from(["", "!!!", PNG]).map(lambda d: ImagePart(d, "image/png")),
        st.sampled_from(["audio/wav", "audio/x-unknown"]).map(lambda t: AudioPart("UklGRg==", t)),
    ),
    max_size=4,
).map(tuple)
CALLS = st.lists(
    st.builds(ToolCall, st.sampled_from(["a", "b", "", "gcall_x"]), st.sampled_from(["t", "u"])), max_size=3
).map(tuple)
MESSAGES = st.lists(
    st.one_of(
        st.builds(Message, st.just("system"), st.one_of(st.text(max_size=5), PARTS)),
        st.builds(Message, st.just("user"), st.one_of(st.text(max_size=5), PARTS)),
        st.builds(Message, st.just("assistant"), st.text(max_size=5), CALLS),
        st.builds(
            Message,
            st.just("tool"),
            st.one_of(st.text(max_size=5), PARTS),
            tool_call_id=st.sampled_from(["a", "b", None]),
            is_error=st.booleans(),
        ),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(MESSAGES, st.booleans())
def test_message_translations_alternate_roles_and_send_no_empty_text(
    messages: list[Message], images: bool
) -> None:
    _, wire = to_anthropic_messages(messages, images=images)
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(wire))
    for turn in wire:
        assert turn["content"]
        for block in turn["content"]:
            assert block.get("type") != "text" or block["text"]
            for inner in block.get("content", []):
                assert inner.get("type") != "text" or inner["text"]
    _, contents = to_gemini_contents(messages, images=images)
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(contents))
    for content in contents:
        assert content["parts"] and all(p.get("text", "x") for p in content["parts"])
