"""Keep tool results whose content the SDK's types do not know.

The SDK validates every `tools/call` result against its content-block union (text, image, audio,
resource_link, embedded resource). A block of a kind from a later protocol revision, or a
malformed block, would make the whole call fail, although toolbridge's contract is to pass such a
content array through untouched for the agent to serialize.

So each connection's dispatcher is wrapped: for a `tools/call` result whose content holds a block
the SDK would refuse, the original array is stashed under `_meta[RAW_CONTENT_META]` and the SDK is
shown harmless empty text blocks in its place; `restore_raw_content` (used when the result is
turned into its wire-form dict) puts the original array back and removes the stash. Nothing else
about the result changes, and results with only well-formed known blocks are not touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RAW_CONTENT_META", "PreservingDispatcher", "preserve_unknown_content", "restore_raw_content"]

RAW_CONTENT_META = "io.toolbridge/rawContent"
"""The `_meta` key under which an untouched content array travels past the SDK's validation."""

_REQUIRED_STRINGS: Mapping[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}


def _sdk_accepts(block: Any) -> bool:
    """A cheap check of whether the SDK's content union would take this block."""
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind == "resource":
        resource = block.get("resource")
        return (
            isinstance(resource, Mapping)
            and isinstance(resource.get("uri"), str)
            and (isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str))
        )
    fields = _REQUIRED_STRINGS.get(kind) if isinstance(kind, str) else None
    return fields is not None and all(isinstance(block.get(name), str) for name in fields)


def _all_accepted(content: list[Any]) -> bool:
    """Whether the SDK would take every block (text blocks, the common case, checked inline)."""
    for block in content:
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
            continue
        if not _sdk_accepts(block):
            return False
    return True


def preserve_unknown_content(raw: dict[str, Any]) -> dict[str, Any]:
    """Stash a content array the SDK would refuse; return `raw` itself when there is none."""
    content = raw.get("content")
    if not isinstance(content, list) or _all_accepted(content):
        return raw
    meta = raw.get("_meta")
    stash = dict(meta) if isinstance(meta, Mapping) else {}
    stash[RAW_CONTENT_META] = content
    shown = [block if _sdk_accepts(block) else {"type": "text", "text": ""} for block in content]
    return {**raw, "content": shown, "_meta": stash}


def restore_raw_content(wire: dict[str, Any]) -> dict[str, Any]:
    """Put a stashed content array back in a wire-form result dict (in place; also returned)."""
    meta = wire.get("_meta")
    if not isinstance(meta, dict) or RAW_CONTENT_META not in meta:
        return wire
    wire["content"] = meta.pop(RAW_CONTENT_META)
    if not meta:
        del wire["_meta"]
    return wire


class PreservingDispatcher:
    """Delegates everything to the SDK dispatcher it wraps, and preserves odd `tools/call` content."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def inner(self) -> Any:
        """The SDK dispatcher this one wraps."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        raw: dict[str, Any] = await self._inner.send_raw_request(method, params, opts)
        if method == "tools/call":
            return preserve_unknown_content(raw)
        return raw
