"""Content parts and the translation of MCP tool-result content.

A tool result reaches an agent in one of three shapes (see `toolbridge.tools.ToolResult`):

- **parts**: every block of the MCP `content` array was text, image or audio, and became a
  `TextPart`, `ImagePart` or `AudioPart` (`mimeType` renamed to `media_type`);
- **structured**: the result had `structuredContent`, which takes precedence and is kept as-is;
  image and audio blocks returned beside it are kept too (`media_from_mcp`), so they reach the
  model as media parts while the model reads the structured content;
- **raw**: some block was of another kind (`resource_link`, an embedded `resource`, a kind from a
  future protocol revision, or a malformed block), so the whole original array is passed through
  untouched, for the agent to serialize.

This module works on plain JSON (dicts as they appear on the wire, camelCase keys) and imports
nothing from the MCP SDK, so it can be used by anything that has MCP content in hand.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "AudioPart",
    "ImagePart",
    "Part",
    "TextPart",
    "decoded_size",
    "media_from_mcp",
    "media_placeholder",
    "part_to_mcp",
    "parts_from_mcp",
    "to_json_text",
]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, base64-encoded, with its media type (for example `image/png`)."""

    data: str
    media_type: str
    type: Literal["image"] = "image"

    def __repr__(self) -> str:  # keep logs short: never print the payload
        return f"ImagePart(media_type={self.media_type!r}, bytes={decoded_size(self.data)})"


@dataclass(frozen=True, slots=True)
class AudioPart:
    """Audio, base64-encoded, with its media type (for example `audio/wav`)."""

    data: str
    media_type: str
    type: Literal["audio"] = "audio"

    def __repr__(self) -> str:
        return f"AudioPart(media_type={self.media_type!r}, bytes={decoded_size(self.data)})"


Part: TypeAlias = TextPart | ImagePart | AudioPart


def decoded_size(data: str) -> int:
    """Size in bytes of base64 `data` once decoded, computed without decoding it."""
    n = len(data)
    if n == 0:
        return 0
    padding = data.count("=", max(0, n - 2))
    return (n * 3) // 4 - padding


def media_placeholder(part: ImagePart | AudioPart) -> str:
    """The one-line text that stands in for an image or audio part where only text goes.

    Returns:
        `[<type>: <media type>, <decoded size> bytes]`, for example `[image: image/png, 68 bytes]`.
    """
    return f"[{part.type}: {part.media_type}, {decoded_size(part.data)} bytes]"


def _valid_base64(data: str) -> bool:
    try:
        base64.b64decode(data[:4096] + "=" * (-len(data[:4096]) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def parts_from_mcp(blocks: Sequence[object]) -> list[Part] | None:
    """Translate an MCP `content` array block by block.

    Returns the list of parts when every block is a well-formed text, image or audio block,
    and `None` when any block is of another kind or malformed: the caller then passes the
    original array through untouched. An empty array gives an empty list.
    """
    parts: list[Part] = []
    for block in blocks:
        if type(block) is not dict and not isinstance(block, Mapping):
            return None
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                return None
            parts.append(TextPart(text))
        elif kind in ("image", "audio"):
            data = block.get("data")
            mime = block.get("mimeType")
            if not isinstance(data, str) or not isinstance(mime, str) or not _valid_base64(data):
                return None
            parts.append(ImagePart(data, mime) if kind == "image" else AudioPart(data, mime))
        else:
            return None
    return parts


def media_from_mcp(blocks: Sequence[object]) -> list[ImagePart | AudioPart]:
    """The well-formed image and audio blocks of an MCP `content` array, as parts (others skipped).

    Used for the media a tool returns beside structured content.
    """
    media: list[ImagePart | AudioPart] = []
    for block in blocks:
        if not isinstance(block, Mapping) or block.get("type") not in ("image", "audio"):
            continue
        parts = parts_from_mcp([block])
        if parts and isinstance(parts[0], ImagePart | AudioPart):
            media.append(parts[0])
    return media


def part_to_mcp(part: Part) -> dict[str, str]:
    """The MCP content block for a part (the inverse of `parts_from_mcp`)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": part.type, "data": part.data, "mimeType": part.media_type}


_c_make_encoder: Callable[..., Callable[[object, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)


def to_json_text(value: object) -> str:
    """Compact, deterministic JSON text for structured content and passed-through arrays.

    Always valid JSON, as `json_text`: a `NaN` or an infinity becomes `null`.
    """
    if _c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        return json_text(value, separators=(",", ":"), ensure_ascii=False, default=str)
    # What that `json.dumps` builds and runs (fresh circular-reference markers included), without
    # its three Python-level calls (a JSONEncoder, `encode`, `iterencode`) at every call.
    encode = _c_make_encoder({}, str, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    try:
        return "".join(encode(value, 0))
    except ValueError as exc:
        if not _non_finite(exc):  # a circular reference stays an error
            raise
        return "".join(encode(_finite(value), 0))


def json_text(value: object, **options: Any) -> str:
    """`json.dumps(value, **options)`, always valid JSON: NaN and the infinities become `null`.

    A server may put them in a result (Python's `json` writes them by default); JSON has no
    spelling for them, so they are written as JavaScript's `JSON.stringify` does. The one JSON
    writer of the package (`to_json_text` is its compact, fast form).
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if not _non_finite(exc):  # a circular reference stays an error
            raise
        return json.dumps(_finite(value), allow_nan=False, **options)


def _non_finite(exc: ValueError) -> bool:
    return str(exc).startswith("Out of range float values")


def _finite(value: object) -> object:
    """A copy of `value` with every non-finite float replaced by None (iterative: any depth)."""
    root: list[object] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[key] = None
        elif isinstance(item, dict):
            copy = dict(item)
            parent[key] = copy
            stack.extend((copy, k, v) for k, v in copy.items())
        elif isinstance(item, list | tuple):
            items = list(item)
            parent[key] = items
            stack.extend((items, i, v) for i, v in enumerate(items))
    return root[0]
