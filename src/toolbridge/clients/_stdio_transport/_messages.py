"""From one line to JSON-RPC messages: parsing, recovery after junk, and the id heuristics.

A line is validated once by pydantic-core (`mcp_types.jsonrpc_message_adapter.validate_json`),
which parses without recursion and with a depth limit, so no line (100,000 levels of nesting
included) can raise anything but a validation error. What does not validate is examined:

* **Recovery** (`_read_line`): text printed without a newline glues onto the next message
  (`Loading...{"jsonrpc":"2.0",...}`), and a buggy server may glue two messages. The line is
  searched for places where a JSON-RPC object may start (`JSONRPC_START`); the first from which
  the rest of the line (or, after "trailing characters", the complete value before them) is a
  valid message is delivered. At most `_RECOVER_TRIES` places are tried, each costing at most one
  parse of the rest of the line, so the work stays linear in the line's length.
* **Malformed lines** (`_Malformed`): a line that means to be JSON (it starts with `{` or `[`)
  but is not a valid JSON-RPC message. If it carries the id of a response, the transport fails
  that call with a synthesized error.
* **Junk** (`_Junk`): any other text (a banner, a log line on stdout); logged and skipped.

Finding the id of a message too large or too broken to parse (a heuristic, on purpose cheap):

* The first `_HEAD_SCAN_BYTES` of the line are scanned by a small JSON tokenizer that tracks
  nesting and strings and records the *top-level* keys and the top-level `"id"` value (an integer
  or a string). Python SDK servers write `{"jsonrpc":..,"id":..,"result":..}`, so the id is there.
* The last `_TAIL_SCAN_BYTES` are matched against `"id": VALUE }` (optionally followed by
  `"jsonrpc": "2.0"`) right before the end of the line: only the top-level object can close
  there, so that id is top-level too. TypeScript SDK servers write
  `{"result":..,"jsonrpc":..,"id":..}`, so the id is there.
* An error is synthesized only for what looks like a *response*: never when a top-level `method`
  or `params` key was seen (a server request has its own id space; answering it would resolve one
  of ours by mistake).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
import pydantic_core
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolbridge.errors import bounded

from ._lines import _HEAD_SCAN_BYTES, _TAIL_SCAN_BYTES, JSONRPC_START

__all__ = [
    "INVALID_INPUT_MARKER",
    "PROTOCOL_MARKER",
    "REASON_MALFORMED",
    "REASON_TOO_LARGE",
    "REASON_UNENCODABLE",
    "_Junk",
    "_Malformed",
    "_is_request_like",
    "_join_and_read",
    "_mib",
    "_parse_line",
    "_read_line",
    "_scan_head",
    "_scan_tail",
    "_synthesized",
    "_too_large",
    "protocol_error_data",
    "validation_detail",
]

PROTOCOL_MARKER: Final = "toolbridge"
"""Key in `error.data` of an error the transport synthesized (value: `"protocol"` for a bad
message from the server, `"invalid_input"` for one of ours that could not be encoded)."""

INVALID_INPUT_MARKER: Final = "invalid_input"

REASON_TOO_LARGE: Final = "message_too_large"
REASON_MALFORMED: Final = "malformed"
REASON_UNENCODABLE: Final = "unencodable"

_LOG_TEXT_MAX: Final = 300
_RECOVER_TRIES: Final = 16
"""At most this many possible message starts are tried in one line."""

_TRAILING = re.compile(r"trailing characters at line 1 column (\d+)")

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_INT = re.compile(rb"-?\d+")
_TAIL_ID = re.compile(
    rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$', re.DOTALL
)
_WS = b" \t\r\n"


@dataclass(slots=True)
class _HeadInfo:
    keys: list[str]
    request_id: int | str | None


def _decode_id(raw: bytes) -> int | str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value


def _skip_ws(data: bytes, i: int) -> int:
    """The index of the first byte at or after `i` that is not JSON whitespace (`len(data)` if none)."""
    n = len(data)
    while i < n and data[i] in _WS:
        i += 1
    return i


def _scan_head(head: bytes) -> _HeadInfo:
    """Top-level keys and top-level `"id"` of a JSON object, from its first bytes only.

    Tolerates a truncated or broken document: it stops at the first thing it cannot follow.
    """
    info = _HeadInfo([], None)
    n = len(head)
    i = _skip_ws(head, 0)
    if i >= n or head[i] != ord("{"):
        return info
    i += 1
    depth = 1
    expect_key = True
    while i < n:
        c = head[i]
        if c == ord('"'):
            match = _STRING.match(head, i)
            if match is None:
                return info
            i = match.end()
            if depth == 1 and expect_key:
                key = _decode_id(match.group())
                j = _skip_ws(head, i)
                if j >= n or head[j] != ord(":"):
                    return info
                j = _skip_ws(head, j + 1)
                if isinstance(key, str):
                    info.keys.append(key)
                    if key == "id" and j < n:
                        value = _STRING.match(head, j) if head[j] == ord('"') else _INT.match(head, j)
                        if value is not None:
                            info.request_id = _decode_id(value.group())
                expect_key = False
                i = j
            continue
        if c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return info
        elif c == ord(",") and depth == 1:
            expect_key = True
        i += 1
    return info


def _scan_tail(tail: bytes) -> int | str | None:
    """The top-level `"id"` if it is the last member of the object ending `tail`."""
    match = _TAIL_ID.search(tail)
    return _decode_id(match.group(1)) if match else None


def _is_request_like(keys: Sequence[str]) -> bool:
    return "method" in keys or "params" in keys


def protocol_error_data(reason: str, **extra: Any) -> dict[str, Any]:
    """The `error.data` of an error the transport synthesized (the marker the client maps)."""
    return {PROTOCOL_MARKER: "protocol", "reason": reason, **extra}


def _synthesized(request_id: int | str, code: int, message: str, data: dict[str, Any]) -> SessionMessage:
    error = types.ErrorData(code=code, message=message, data=data)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB ({size} bytes)"


def _too_large(request_id: int | str, size: int, limit: int, *, complete: bool) -> SessionMessage:
    at_least = "" if complete else "at least "
    message = (
        f"the MCP server's response is {at_least}{_mib(size)}, above the message size limit of "
        f"{_mib(limit)}; it was discarded"
    )
    data = protocol_error_data(REASON_TOO_LARGE, size=size, limit=limit, complete=complete)
    return _synthesized(request_id, types.INVALID_REQUEST, message, data)


@dataclass(slots=True)
class _Malformed:
    """A line that is not a valid JSON-RPC message; `request_id` if a response id was found."""

    request_id: int | str | None
    detail: str
    text: str


def _parse_line(line: bytes, error: ValidationError | None = None) -> SessionMessage | _Malformed | None:
    """One complete line read as one message: the message, a malformed-line report, or None if blank.

    `error`: the validation error of `line`, when the caller already has it.
    """
    if error is None:
        try:
            return _validate(line)
        except ValidationError as exc:
            if not line.strip():
                return None
            error = exc
    detail = validation_detail(error)
    text = line[:_LOG_TEXT_MAX].decode("utf-8", "replace")
    request_id: int | str | None = None
    try:
        document = pydantic_core.from_json(line)  # depth-limited: never a RecursionError
    except ValueError:
        head = _scan_head(line[:_HEAD_SCAN_BYTES])
        request_id = head.request_id
        if request_id is None:
            request_id = _scan_tail(line[-_TAIL_SCAN_BYTES:])
        if _is_request_like(head.keys):
            request_id = None
        return _Malformed(request_id, detail, text)
    if isinstance(document, dict):
        detail = validation_detail(error, _member_for(document))
        if not _is_request_like(list(document)):
            candidate = document.get("id")
            if isinstance(candidate, int | str) and not isinstance(candidate, bool):
                request_id = candidate
    return _Malformed(request_id, detail, text)


def _member_for(document: dict[str, Any]) -> str:
    """Which JSON-RPC message kind a JSON object means to be, from its keys."""
    if "method" in document:
        return "JSONRPCRequest" if "id" in document else "JSONRPCNotification"
    return "JSONRPCError" if "error" in document else "JSONRPCResponse"


def validation_detail(exc: ValidationError, member: str | None = None) -> str:
    """The first problem pydantic found, with where it was (bounded), for error messages.

    `member`: the union member (e.g. `JSONRPCResponse`) whose problems to prefer, so that a bad
    response is not explained by what it lacks to be a request.
    """
    errors = exc.errors(include_url=False)
    if not errors:
        return bounded(str(exc), 300)
    preferred = [e for e in errors if member is not None and e.get("loc", ())[:1] == (member,)]
    first = (preferred or errors)[0]
    loc = first.get("loc", ())
    where = ".".join(str(part) for part in (loc[1:] if preferred else loc))
    message = str(first.get("msg", ""))
    return bounded(f"{where}: {message}" if where else message, 300)


@dataclass(slots=True)
class _Junk:
    """Text on stdout that is no JSON at all (a banner, a log line); `text` is its start."""

    text: str
    size: int


_Item = SessionMessage | _Malformed | _Junk


def _validate(data: bytes) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_json(data, by_name=False))


def _read_line(line: bytes) -> list[_Item]:
    """Everything one complete line holds: messages, a malformed part, junk (in that order of use).

    Never raises: whatever the bytes, the answer is a list (empty for a blank line).
    """
    try:
        return [_validate(line)]
    except ValidationError as exc:
        error = exc
    if not line.strip():
        return []
    start, messages = _recover(line, error)
    if not messages:
        return [_classify(line, error)]
    items: list[_Item] = []
    if line[:start].strip():
        items.append(_classify(line[:start], None))
    items.extend(messages)
    return items


def _classify(text: bytes, error: ValidationError | None) -> _Item:
    if text.lstrip()[:1] in (b"{", b"["):
        return _parse_line(text, error) or _Malformed(None, "empty", "")
    return _Junk(text[:_LOG_TEXT_MAX].decode("utf-8", "replace"), len(text))


def _trailing_at(error: ValidationError, offset: int) -> int | None:
    """Where "trailing characters" begin in the line, if that is what `error` says (else None)."""
    for item in error.errors(include_url=False)[:1]:
        if item.get("type") == "json_invalid":
            found = _TRAILING.search(str(item.get("msg", "")))
            if found is not None:
                return offset + int(found.group(1)) - 1
    return None


def _recover(line: bytes, error: ValidationError) -> tuple[int, list[SessionMessage]]:
    """Messages glued to junk or to each other in `line`, and where the first of them starts.

    Tries at most `_RECOVER_TRIES` places where a message may start. From each, the rest of the
    line is validated; if it holds one complete JSON value followed by more text, that value is
    validated alone and the search goes on after it (so `{A}{B}` yields both A and B).
    """
    messages: list[SessionMessage] = []
    first = -1
    pos = 0
    tries = 0
    while True:
        end = _trailing_at(error, pos)
        resume = pos + 1
        if end is not None and pos < end <= len(line) and line[end - 1 : end] in (b"}", b"]"):
            resume = end
            try:
                messages.append(_validate(line[pos:end]))
                first = pos if first < 0 else first
            except ValidationError:
                pass  # JSON, but no JSON-RPC message: junk between messages
        found = JSONRPC_START.search(line, resume)
        if found is None or tries >= _RECOVER_TRIES:
            break
        tries += 1
        pos = found.start()
        try:
            messages.append(_validate(line[pos:]))
        except ValidationError as exc:
            error = exc
            continue
        first = pos if first < 0 else first
        break
    return max(first, 0), messages


def _join_and_read(pieces: list[bytes]) -> list[_Item]:
    line = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    pieces.clear()
    return _read_line(line)
