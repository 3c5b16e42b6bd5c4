"""Translation of MCP content arrays into content parts (`toolbridge.content`)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolbridge.content import (
    AudioPart,
    ImagePart,
    TextPart,
    decoded_size,
    part_to_mcp,
    parts_from_mcp,
    to_json_text,
)
from toolbridge.tools import ToolResult

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 20).decode()
WAV = base64.b64encode(b"RIFF" + b"\0" * 40).decode()


def test_text_blocks_become_text_parts() -> None:
    assert parts_from_mcp([{"type": "text", "text": "hello"}, {"type": "text", "text": ""}]) == [
        TextPart("hello"),
        TextPart(""),
    ]


def test_image_and_audio_rename_mime_type_to_media_type() -> None:
    parts = parts_from_mcp(
        [
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
        ]
    )
    assert parts == [ImagePart(PNG, "image/png"), AudioPart(WAV, "audio/wav")]
    assert parts is not None
    assert parts[0].type == "image" and parts[1].type == "audio"


def test_empty_array_is_an_empty_list() -> None:
    assert parts_from_mcp([]) == []


@pytest.mark.parametrize(
    "block",
    [
        {"type": "resource_link", "uri": "demo://x", "name": "x"},
        {"type": "resource", "resource": {"uri": "demo://x", "text": "t"}},
        {"type": "hologram", "data": "…"},
    ],
)
def test_any_other_kind_means_pass_through(block: dict[str, Any]) -> None:
    assert parts_from_mcp([{"type": "text", "text": "see"}, block]) is None


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text"},
        {"type": "text", "text": 3},
        {"type": "image", "mimeType": "image/png"},
        {"type": "image", "data": PNG},
        {"type": "image", "data": "not base64 at all!!", "mimeType": "image/png"},
        {"type": "audio", "data": WAV, "mimeType": 7},
        {"text": "no type"},
        "a string, not an object",
        None,
    ],
)
def test_malformed_blocks_mean_pass_through(block: Any) -> None:
    assert parts_from_mcp([block]) is None


def test_round_trip_to_mcp() -> None:
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
    ]
    parts = parts_from_mcp(blocks)
    assert parts is not None
    assert [part_to_mcp(p) for p in parts] == blocks


def test_decoded_size_without_decoding() -> None:
    for raw in (b"", b"a", b"ab", b"abc", b"abcd", bytes(range(256))):
        assert decoded_size(base64.b64encode(raw).decode()) == len(raw)


def test_media_repr_never_prints_the_payload() -> None:
    image = ImagePart(PNG, "image/png")
    assert PNG not in repr(image)
    assert "image/png" in repr(image) and "bytes=28" in repr(image)


def test_to_text_renders_each_shape() -> None:
    parts = parts_from_mcp(
        [{"type": "text", "text": "look:"}, {"type": "image", "data": PNG, "mimeType": "image/png"}]
    )
    assert parts is not None
    assert ToolResult.of_parts(parts).to_text() == "look:\n[image: image/png, 28 bytes]"
    assert ToolResult.of_structured({"a": [1, "é"]}).to_text() == '{"a":[1,"é"]}'
    raw = [{"type": "resource_link", "uri": "demo://x", "name": "x"}]
    assert ToolResult.of_raw(raw).to_text() == to_json_text(raw)
    assert ToolResult.of_raw(raw).content == raw


def test_the_one_json_writer_writes_null_for_non_finite_numbers() -> None:
    """`to_json_text` (compact, for results) and `json_text` (options, for output) agree: JSON
    has no NaN or Infinity, so both write `null`; a circular value stays an error."""
    import json as _json

    from toolbridge.content import json_text, to_json_text

    value = {"a": float("nan"), "b": [1.5, float("inf"), {"c": float("-inf")}], "d": "é"}
    compact = to_json_text(value)
    assert compact == '{"a":null,"b":[1.5,null,{"c":null}],"d":"é"}'
    assert _json.loads(json_text(value)) == _json.loads(compact)
    assert value["b"][1] == float("inf")  # the caller's value is not changed
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    for write in (to_json_text, json_text):
        try:
            write(cyclic)
        except ValueError as exc:
            assert "Circular" in str(exc)
        else:
            raise AssertionError("a circular value was written")
