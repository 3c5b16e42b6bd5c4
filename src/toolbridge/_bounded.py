"""Reading untrusted input with bounds on work: files, JSON text, parsed JSON values.

Everything toolbridge reads from a file or the command line (manifests, task tool files, lock
files, JSON Schemas, `call`'s JSON arguments) goes through these helpers, so one set of rules holds
for all of them:

- **Files** are opened without blocking and must be regular files (a FIFO, a device such as
  `/dev/zero`, or a directory is refused at once); a file larger than its limit is refused before
  it is read, and never more than the limit plus one byte is read (a file that grows while it is
  read cannot get past the limit).
- **Text** must be UTF-8; the error names the line and column of the first bad byte.
- **JSON** may nest at most `MAX_DEPTH` arrays and objects (checked by a linear scan before the
  parser runs, so 100,000 levels cost a scan, not a `RecursionError`); `NaN`, `Infinity`,
  `-Infinity` and numbers that overflow to infinity are refused (they are not JSON); an integer
  of more digits than Python converts is refused.
- **Parsed values** (a schema handed over as a dict) can be checked for depth without recursion.

Each violation is an `InputLimitError` with a `reason` (a short stable word) and, where it
applies, a 1-based `line` and `column`. Callers turn it into their own stable `ERR_*` code.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "MAX_DEPTH",
    "MAX_JSON_FILE_BYTES",
    "InputLimitError",
    "arguments_too_deep",
    "depth_exceeds",
    "loads_json",
    "read_text_file",
]

MAX_DEPTH = 100
"""The most arrays and objects (or YAML sequences and mappings) nested in one another."""

MAX_ARGUMENT_DEPTH = 64
"""The deepest nesting of objects and arrays in one tool call's arguments (the object itself is
level 1): what the MCP clients send (`toolbridge.clients.MAX_ARGUMENT_DEPTH`) and what a governed
session plans."""

MAX_JSON_FILE_BYTES = 16 * 1024 * 1024
"""The largest JSON input file (task tool file, lock file) read: 16 MiB."""

_READ_CHUNK = 1 << 20


class InputLimitError(ValueError):
    """Input that breaks a bound or is not what it must be.

    Attributes:
        message: one line for people (no content of the input is quoted).
        reason: `missing`, `unreadable`, `not_regular`, `too_large`, `not_utf8`, `too_deep`,
            `non_finite`, `number` or `json`.
        line: 1-based line of the problem, when known.
        column: 1-based column of the problem, when known.
    """

    def __init__(self, message: str, *, reason: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.line = line
        self.column = column

    def where(self, source: str) -> str:
        """`source:line:column` (or just `source` when the position is unknown)."""
        if self.line is None:
            return source
        return f"{source}:{self.line}:{self.column or 1}"


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    return line, column


def read_text_file(path: str | os.PathLike[str], *, max_bytes: int) -> str:
    """Read a regular UTF-8 text file of at most `max_bytes` bytes (a leading BOM is dropped).

    Raises:
        InputLimitError: `missing`, `unreadable`, `not_regular`, `too_large` or `not_utf8`.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputLimitError("does not exist", reason="missing") from None
    except OSError as exc:
        raise InputLimitError(
            f"cannot be read: {exc.strerror or type(exc).__name__}", reason="unreadable"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO, socket or device"
            raise InputLimitError(f"is not a regular file ({kind})", reason="not_regular")
        if info.st_size > max_bytes:
            raise InputLimitError(
                f"is {_size(info.st_size)}, more than the limit of {_size(max_bytes)}", reason="too_large"
            )
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(_READ_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise InputLimitError(f"is more than the limit of {_size(max_bytes)}", reason="too_large")
    except OSError as exc:
        raise InputLimitError(
            f"cannot be read: {exc.strerror or type(exc).__name__}", reason="unreadable"
        ) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        raise InputLimitError(
            f"is not UTF-8 text (byte 0x{data[exc.start]:02x})", reason="not_utf8", line=line, column=column
        ) from None
    return text.removeprefix("\ufeff")


# ---------------------------------------------------------------------------------------- JSON text

# A JSON string (possibly unterminated), or a bracket, or a bare word that is not JSON.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]|-?Infinity|NaN', re.S)


def _text_position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _scan(text: str, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth` and NaN / Infinity outside strings."""
    opens = text.count("[") + text.count("{")
    if opens <= max_depth and "NaN" not in text and "Infinity" not in text:
        return
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            continue
        if first in "[{":
            depth += 1
            if depth > max_depth:
                line, column = _text_position(text, match.start())
                raise InputLimitError(
                    f"nests deeper than {max_depth} levels", reason="too_deep", line=line, column=column
                )
        elif first in "]}":
            depth -= 1
        else:
            line, column = _text_position(text, match.start())
            raise InputLimitError(
                f"holds {token}, which is not a JSON number", reason="non_finite", line=line, column=column
            )


class _NonFinite(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(text)
    return value


def _no_constant(text: str) -> Any:
    raise _NonFinite(text)


def loads_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text with a nesting bound; NaN, Infinity and numbers overflowing to infinity are refused.

    Raises:
        InputLimitError: `too_deep`, `non_finite`, `number` (an integer too long to convert) or
            `json` (not valid JSON), with the line and column when known.
    """
    _scan(text, max_depth)
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputLimitError(
            f"is not valid JSON: {exc.msg}", reason="json", line=exc.lineno, column=exc.colno
        ) from None
    except _NonFinite as exc:
        raise InputLimitError(
            f"holds the number {str(exc)[:40]}, which overflows to infinity", reason="non_finite"
        ) from None
    except ValueError as exc:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise InputLimitError(
            f"holds a number that cannot be read: {str(exc)[:80]}", reason="number"
        ) from None
    except RecursionError:  # unreachable after the scan; kept so nothing escapes as a traceback
        raise InputLimitError(f"nests deeper than {max_depth} levels", reason="too_deep") from None


# ------------------------------------------------------------------------------------- parsed values


def _children(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, list | tuple):
        return value
    return ()


def depth_exceeds(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether `value` nests more than `max_depth` dicts and lists (iterative; cycles count as too deep)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            depth += 1
            if depth > max_depth:
                return True
            stack.extend((child, depth) for child in _children(item))
    return False


def arguments_too_deep(arguments: Mapping[str, Any], max_depth: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether a call's arguments object nests more than `max_depth` levels (itself level 1).

    The common flat object costs one pass over its values (no stack is built).
    """
    for value in arguments.values():
        if isinstance(value, dict | list | tuple) and depth_exceeds(value, max_depth - 1):
            return True
    return False
