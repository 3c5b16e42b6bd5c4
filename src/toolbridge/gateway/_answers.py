"""What the gateway sends its clients, as the protocol has it: pages of a listing, each tool as
served, tool results, and errors (the gateway's own refusals and an upstream's, relayed cleaned).

The decisions are `_core`'s; this module only gives them their wire form. An upstream's text
reaches a client cleaned (`clean_text`: no terminal escapes, no invisible characters), redacted
of the secrets the gateway holds, and cut to a bound (`ERROR_TEXT_LIMIT`, `RPC_DATA_LIMIT`).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..content import Part, TextPart, to_json_text
from ..errors import JsonRpcError, PolicyError, ToolbridgeError, bounded
from ..redact import redact, redact_value
from ..sanitize import clean_schema, clean_text
from ..tools import ToolResult, ToolSpec
from ._events_parts import clean_data
from ._upstream import CallContext

log = logging.getLogger("toolbridge.gateway")

__all__ = [
    "ERROR_TEXT_LIMIT",
    "META_PREFIX",
    "RPC_DATA_LIMIT",
    "error_result",
    "error_text",
    "from_tool_result",
    "page_of",
    "refusal",
    "served_tool",
    "upstream_error",
    "upstream_meta",
    "upstream_rpc_error",
]

ERROR_TEXT_LIMIT = 2000
"""An upstream tool error reaches the client cleaned and cut to this many characters."""


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


_Item = TypeVar("_Item")


def page_of(items: Sequence[_Item], cursor: str | None, size: int) -> tuple[list[_Item], str | None]:
    """One page of `items` from `cursor`; the next page's cursor or None.

    Raises:
        MCPError: -32602 for a cursor the gateway did not hand out.
    """
    offset = 0
    if cursor is not None:
        try:
            text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
            if not text.startswith("o:") or not text[2:].isdigit() or len(text) > 24:
                raise ValueError
            offset = int(text[2:])
        except (ValueError, UnicodeError):
            raise MCPError(types.INVALID_PARAMS, "invalid cursor") from None
        if offset > len(items):
            raise MCPError(types.INVALID_PARAMS, "invalid cursor")
    page = list(items[offset : offset + size])
    nxt = offset + size
    return page, (_cursor(nxt) if nxt < len(items) else None)


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def refusal(exc: PolicyError) -> types.CallToolResult:
    """A governed refusal as the client sees it: the code and the generic message, nothing else.

    `_meta` carries the code, the outcome and, for `OUTCOME_UNKNOWN`, the runtime's cause code.
    """
    meta: dict[str, object] = {"toolbridge/code": exc.code, "toolbridge/outcome": exc.outcome or "blocked"}
    cause = exc.details.get("cause") if isinstance(exc.details, Mapping) else None
    if isinstance(cause, str):
        meta["toolbridge/cause"] = cause
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": f"{exc.code}: {exc.message}"}], "isError": True, "_meta": meta}
    )


def error_text(text: str) -> str:
    """An upstream's error text as a client may see it: cleaned, every registered secret redacted,
    then cut to `ERROR_TEXT_LIMIT` characters (redacted before the cut, so a secret that straddles
    the cut cannot leave its head behind)."""
    return bounded(redact(clean_text(text)), ERROR_TEXT_LIMIT)


def _blocks(wire: Mapping[str, object]) -> list[object]:
    """The content blocks of an upstream's result in wire form (none when it has no list of them)."""
    content = wire.get("content")
    return content if isinstance(content, list) else []


def _error_text(wire: Mapping[str, object]) -> types.CallToolResult:
    """An upstream's error result as text only: its text blocks joined, cleaned and cut."""
    texts = [b.get("text") for b in _blocks(wire) if isinstance(b, Mapping) and b.get("type") == "text"]
    text = "\n".join(t for t in texts if isinstance(t, str)) or "the tool reported an error"
    return error_result(error_text(text))


def upstream_error(wire: Mapping[str, object], limit: int) -> types.CallToolResult:
    """An upstream's `isError` result as the client gets it.

    Its blocks, `structuredContent` and `_meta` are kept; each text block is cleaned and cut
    to `ERROR_TEXT_LIMIT` characters; every registered secret is redacted everywhere in it
    (after cleaning: an invisible character cannot split one). Over `limit` bytes of JSON
    (the identity's `maxOutputBytes`), or unreadable, it becomes `_error_text`'s one text block.
    """
    blocks: list[object] = []
    for block in _blocks(wire):
        if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            block = {**block, "text": error_text(block["text"])}
        blocks.append(block)
    data: dict[str, object] = {"content": blocks, "isError": True}
    if "structuredContent" in wire:
        data["structuredContent"] = wire["structuredContent"]
    meta = upstream_meta(wire.get("_meta"))
    if meta is not None:
        data["_meta"] = meta
    try:
        data = redact_value(data)
        if len(json.dumps(data, ensure_ascii=False).encode("utf-8")) > limit:
            return _error_text(wire)
        return types.CallToolResult.model_validate(data)
    except (TypeError, ValueError, RecursionError):
        return _error_text(wire)


RPC_DATA_LIMIT = 4000
"""Characters of JSON of an upstream JSON-RPC error's `data` the client gets (more: dropped)."""


def upstream_rpc_error(exc: JsonRpcError) -> MCPError:
    """An upstream's JSON-RPC error answer as the client gets it: the upstream's code, its
    message cleaned, cut to `ERROR_TEXT_LIMIT` characters and redacted; its `data` with every
    string cleaned and redacted, or none when its JSON is over `RPC_DATA_LIMIT` characters."""
    message = error_text(exc.rpc_message) or "the upstream failed"
    data: object = None
    if exc.data is not None:
        try:
            if len(json.dumps(exc.data, ensure_ascii=False)) <= RPC_DATA_LIMIT:
                data = redact_value(clean_data(exc.data))
        except (TypeError, ValueError, RecursionError):
            data = None
    return MCPError(exc.rpc_code, message, data)


def from_tool_result(result: ToolResult, box: CallContext) -> types.CallToolResult:
    """What the client gets for a successful call.

    An upstream's result is passed through whole (`content`, `structuredContent`, `_meta`, ...),
    but for `_meta` keys in the gateway's namespace and `resultType` (the gateway's own framing);
    a result a guard rewrote (or a declared tool's) is made from the `ToolResult`.
    """
    if box.wire is not None and box.result is result:
        data = {k: v for k, v in box.wire.items() if k != "resultType"}
        if "_meta" in data:
            data["_meta"] = upstream_meta(data["_meta"])
        data.setdefault("content", [])
        try:
            return types.CallToolResult.model_validate(data)
        except ValueError:  # (the client validated it: only a result changed on the way)
            kept = {k: v for k, v in box.wire.items() if k in ("content", "structuredContent")}
            try:
                return types.CallToolResult.model_validate({"content": [], **kept})
            except ValueError:
                return error_result("TOOL_FAILED: the upstream's result could not be passed on")
    if result.kind == "structured":
        blocks: list[Any] = [{"type": "text", "text": to_json_text(result.structured)}]
        blocks += [_part_block(p) for p in result.media]
        return types.CallToolResult.model_validate(
            {"content": blocks, "structuredContent": result.structured}
        )
    if result.kind == "raw":
        return types.CallToolResult.model_validate({"content": list(result.raw)})
    return types.CallToolResult.model_validate({"content": [_part_block(p) for p in result.parts]})


def _part_block(part: Part) -> dict[str, object]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": part.type, "data": part.data, "mimeType": part.media_type}


META_PREFIX = "toolbridge/"
"""The gateway's own `_meta` keys; an upstream's keys in this namespace are dropped."""


def upstream_meta(meta: object) -> dict[str, object] | None:
    """An upstream's `_meta` as the gateway passes it on: without keys in its own namespace."""
    if not isinstance(meta, Mapping):
        return None
    return {k: v for k, v in meta.items() if not (isinstance(k, str) and k.startswith(META_PREFIX))}


def served_tool(name: str, spec: ToolSpec) -> types.Tool | None:
    """One tool as the gateway lists it: the upstream's definition with what the gateway changes.

    Every field the upstream sent (`title`, `description`, `inputSchema`, `outputSchema`,
    `annotations`, `execution`, `icons`, `_meta`) is kept, apart from: `name` (the binding's
    prefix, made model-legal); `description`, `title` and `annotations.title`, and every
    `description`/`title` inside the schemas, cleaned (`clean_schema`); `_meta` keys in the
    gateway's namespace (`toolbridge/`) dropped. A definition the protocol's model refuses whole
    is served with the fields a model reads only; None when even that fails (or a schema is too
    deep to clean).
    """
    try:
        minimal: dict[str, object] = {
            "name": name,
            "description": clean_text(spec.description),
            "inputSchema": clean_schema(dict(spec.parameters)),
        }
        if spec.output_schema is not None:
            minimal["outputSchema"] = clean_schema(dict(spec.output_schema))
        if spec.annotations:
            minimal["annotations"] = clean_schema(dict(spec.annotations))
    except ToolbridgeError:  # a schema too deep (or cyclic) to clean: not served
        log.warning("tool %r is not served: its schema is too deep to show", bounded(name, 100))
        return None
    wire = spec.mcp
    attempts = [minimal]
    if isinstance(wire, Mapping):
        data = {k: v for k, v in wire.items() if k not in _REBUILT}
        data.update(minimal)
        described = wire.get("description")
        if isinstance(described, str):
            data["description"] = clean_text(described)
        else:  # as the upstream sent it: no description (the model's spec shows the title)
            data.pop("description")
        title = wire.get("title")
        if isinstance(title, str):
            data["title"] = clean_text(title)
        if "_meta" in data:
            data["_meta"] = upstream_meta(data["_meta"])
        attempts.insert(0, data)
    for attempt in attempts:
        try:
            return types.Tool.model_validate(attempt)
        except ValueError:
            continue
    return None


_REBUILT = frozenset({"name", "description", "inputSchema", "outputSchema", "annotations"})
"""The fields `served_tool` takes from the `ToolSpec` (as the catalog and the lock see them)."""
