"""The tool contract: what an agent needs to know about a tool, and nothing about MCP.

- `ToolSpec` describes one tool: its name, description, the JSON Schema of its parameters,
  optionally the JSON Schema of its structured output, and free-form annotations.
- `ToolResult` is what a call returns: content parts, structured content, or a raw content
  array passed through untouched (see `toolbridge.content`).
- `ToolProvider` is the protocol every source of tools implements: `McpToolProvider` (an MCP
  server's tools), `FunctionTools` (Python functions), task tool sets.

A provider may also expose an integer `generation` attribute that grows whenever its tool list
changes (for MCP: on `notifications/tools/list_changed`); consumers that cache `list_tools()`
compare it to decide when to list again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .content import AudioPart, ImagePart, Part, TextPart, media_placeholder, to_json_text

__all__ = [
    "OPEN_OBJECT_SCHEMA",
    "ToolProvider",
    "ToolResult",
    "ToolSpec",
    "provider_generation",
]

OPEN_OBJECT_SCHEMA: Mapping[str, object] = {"type": "object", "additionalProperties": True}
"""The parameters of a tool that declared none: any object."""


def _open_object() -> dict[str, Any]:
    return dict(OPEN_OBJECT_SCHEMA)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as an agent sees it.

    Attributes:
        name: the tool's name at its provider (before any prefix an agent adds).
        description: what the tool does, written for a model.
        parameters: JSON Schema of the arguments object, passed through unchanged.
        output_schema: JSON Schema of the structured result, when the tool declares one.
        annotations: hints such as `readOnlyHint` (untrusted unless the provider is trusted).
        mcp: the MCP tool definition as the server sent it (wire JSON, not cleaned), for what
            passes it on (the gateway's `tools/list`); None for a tool not from an MCP server.
            Not compared and not shown: two specs with the same fields are equal.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_open_object)
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    mcp: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one tool call, in exactly one of three shapes.

    Attributes:
        kind: `"parts"`, `"structured"` or `"raw"`.
        parts: the content parts (kind `"parts"`).
        structured: the structured content, as-is (kind `"structured"`).
        raw: the original content array, untouched (kind `"raw"`).
        media: images and audio returned beside structured content (kind `"structured"`): the
            model reads the structured content and gets these as media parts.
    """

    kind: Literal["parts", "structured", "raw"]
    parts: tuple[Part, ...] = ()
    structured: Any = None
    raw: tuple[Mapping[str, Any], ...] = ()
    media: tuple[ImagePart | AudioPart, ...] = ()

    @classmethod
    def of_parts(cls, parts: Sequence[Part]) -> ToolResult:
        return cls(kind="parts", parts=tuple(parts))

    @classmethod
    def of_text(cls, text: str) -> ToolResult:
        return cls(kind="parts", parts=(TextPart(text),))

    @classmethod
    def of_structured(cls, value: object, media: Sequence[ImagePart | AudioPart] = ()) -> ToolResult:
        return cls(kind="structured", structured=value, media=tuple(media))

    @classmethod
    def of_raw(cls, blocks: Sequence[Mapping[str, Any]]) -> ToolResult:
        return cls(kind="raw", raw=tuple(blocks))

    @property
    def content(self) -> Any:
        """The payload of whichever shape this is: a list of parts, the structured value, or the raw list."""
        if self.kind == "parts":
            return list(self.parts)
        if self.kind == "structured":
            return self.structured
        return list(self.raw)

    def to_text(self) -> str:
        """A text rendering for places that take only text (logs, text-only models, the CLI).

        Text parts are joined by newlines; images and audio become a one-line placeholder naming
        the media type and size; structured content and raw arrays become compact JSON. Media
        beside structured content follow its JSON as placeholder lines (see `structured_text`).
        """
        if self.kind == "structured":
            if not self.media:
                return to_json_text(self.structured)
            return "\n".join([self.structured_text(), *(media_placeholder(m) for m in self.media)])
        if self.kind == "raw":
            return to_json_text(list(self.raw))
        lines: list[str] = []
        for part in self.parts:
            if isinstance(part, TextPart):
                lines.append(part.text)
            elif isinstance(part, ImagePart | AudioPart):
                lines.append(media_placeholder(part))
        return "\n".join(lines)

    def structured_shown(self) -> object:
        """The structured content as a reader is shown it: any string in it that is exactly the
        payload of a media part beside it is replaced by that part's placeholder, so the payload
        reaches the model once, as media, and never as base64 text. The value itself is kept
        as-is in `structured`."""
        if not self.media:
            return self.structured
        payloads = {m.data: media_placeholder(m) for m in self.media if m.data}
        return _replace_strings(self.structured, payloads)

    def structured_text(self) -> str:
        """`structured_shown()` as compact JSON: the text the model reads for structured content."""
        return to_json_text(self.structured_shown())


def _replace_strings(value: object, replacements: Mapping[str, str], depth: int = 0) -> object:
    """`value` with every string found in `replacements` replaced (bounded depth; a copy)."""
    if isinstance(value, str):
        return replacements.get(value, value)
    if depth > 100:
        return value
    if isinstance(value, Mapping):
        return {key: _replace_strings(item, replacements, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_strings(item, replacements, depth + 1) for item in value]
    return value


@runtime_checkable
class ToolProvider(Protocol):
    """A source of tools.

    `list_tools()` returns the tools on offer; `call_tool(name, args)` runs one by its
    provider-side name and returns a `ToolResult`, or raises a `ToolbridgeError`
    (`ToolError` when the tool itself failed).
    """

    async def list_tools(self) -> list[ToolSpec]: ...

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult: ...


def provider_generation(provider: object) -> int:
    """The provider's tool-list generation (0 when it does not report changes)."""
    value = getattr(provider, "generation", 0)
    return value if isinstance(value, int) else 0
