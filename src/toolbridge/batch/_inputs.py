"""Reading a batch's input file: one item per line, hostile lines refused one by one.

A line is a JSON object `{"id": ..., "input": "..."}` (the id a string or an integer; without
`id`, the item's digest is its id) or a bare JSON string (its digest is its id). The digest is
`sha256-` and the first 16 hex digits of the SHA-256 of the canonical item
(`{"input":"..."}`, compact, keys sorted, UTF-8): the same text keeps its id wherever it moves
in the file, so an edited file never makes a known item new. Empty lines are skipped. Every other
line becomes one error line in the output (its `id` the declared one, else `null`), with a stable
code, and never stops the other items:

| code | line |
|---|---|
| `ERR_BATCH_INPUT` | not UTF-8, not JSON, longer than `max_line_bytes`, not a string nor `{"id", "input"}` |
| `ERR_BATCH_DUPLICATE_ID` | an id an earlier line already used (the first one runs); two equal bare strings |
| `ERR_BATCH_INPUT_CHANGED` | resuming: an id whose input differs from the one the batch started with |

The whole file is refused (`ERR_INVALID_INPUT`, one line naming the line number) when it is not a
regular file or a pipe (see `_files`), holds more than `max_lines` lines, more than
`MAX_BAD_LINES` lines that cannot run (random bytes are not a JSON Lines file), or a line with no
end within `MAX_SKIP_BYTES` (`/dev/zero` through a pipe). Memory stays bounded by the size of the
valid items: an over-long line is skipped in chunks, never held whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, TypeGuard

from ..errors import ConfigError
from ._files import open_inputs
from ._store import Item

__all__ = [
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_LINE_BYTES",
    "MAX_BAD_LINES",
    "MAX_SKIP_BYTES",
    "InputError",
    "item_digest_id",
    "read_inputs",
]

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
"""The longest input line (1 MiB; `--max-line-bytes`)."""
DEFAULT_MAX_LINES = 1_000_000
"""The most lines an input file may hold, empty ones included (`--max-lines`)."""
MAX_BAD_LINES = 10_000
"""The most lines that cannot run before the whole file is refused."""
MAX_SKIP_BYTES = 64 * 1024 * 1024
"""An over-long line must end within this many bytes (or 4x `max_line_bytes`), else the file is refused."""
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class InputError:
    """An input line that cannot run: its output line."""

    line: int
    id: str | int | None
    code: str
    message: str

    def to_line(self) -> dict[str, object]:
        return {
            "id": self.id,
            "line": self.line,
            "outcome": "failed",
            "errorCode": self.code,
            "error": self.message,
            "text": None,
            "output": None,
            "usage": None,
            "costMicros": 0,
            "runId": None,
        }


def _refuse(shown: str, number: int, why: str) -> ConfigError:
    return ConfigError(f"--inputs {shown}: line {number}: {why}", code="ERR_INVALID_INPUT")


def _lines(f: BinaryIO, cap: int, max_lines: int, shown: str) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes or None when longer than cap) for each line, reading at most cap+1 at once."""
    number = 0
    skip_limit = max(MAX_SKIP_BYTES, 4 * cap)
    while True:
        data = f.readline(cap + 1)
        if not data:
            return
        number += 1
        if number > max_lines:
            raise _refuse(shown, number, f"more than {max_lines} lines (raise --max-lines)")
        if len(data) > cap and not data.endswith(b"\n"):
            skipped = len(data)
            while True:  # skip the rest of the over-long line
                more = f.readline(_CHUNK)
                skipped += len(more)
                if not more or more.endswith(b"\n"):
                    break
                if skipped > skip_limit:
                    raise _refuse(shown, number, f"no end of line within {skip_limit} bytes: not JSON Lines")
            yield number, None
            continue
        yield number, data.rstrip(b"\r\n")


def item_digest_id(text: str) -> str:
    """The id of an item declared without one: `sha256-` and 16 hex digits of its canonical form."""
    canonical = json.dumps({"input": text}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _item_id(value: object) -> TypeGuard[str | int]:
    return (isinstance(value, str) and len(value) <= 1024) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    )


def read_inputs(
    path: str | os.PathLike[str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_lines: int = DEFAULT_MAX_LINES,
) -> tuple[list[Item], list[InputError]]:
    """The valid items of an input file (`-`: standard input), and an error for each line that cannot run.

    Raises:
        ConfigError: (`ERR_INVALID_INPUT`) the file cannot be opened, is not a regular file or a
            pipe, or breaks a bound (see the module docs).
    """
    items: list[Item] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    shown = os.fspath(path)
    with open_inputs(path) as f:
        for number, raw in _lines(f, max_line_bytes, max_lines, shown):
            if len(errors) >= MAX_BAD_LINES:
                raise _refuse(
                    shown, number, f"more than {MAX_BAD_LINES} lines cannot run: is it a JSON Lines file?"
                )
            if raw is None:
                errors.append(
                    InputError(
                        number,
                        None,
                        "ERR_BATCH_INPUT",
                        f"line {number} is longer than {max_line_bytes} bytes",
                    )
                )
                continue
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                errors.append(InputError(number, None, "ERR_BATCH_INPUT", f"line {number} is not UTF-8"))
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                errors.append(InputError(number, None, "ERR_BATCH_INPUT", f"line {number} is not JSON"))
                continue
            if isinstance(value, str):
                item_id: str | int | None = None
                item_input = value
            elif (
                isinstance(value, dict)
                and isinstance(value.get("input"), str)
                and ("id" not in value or _item_id(value["id"]))
            ):
                item_id, item_input = value.get("id"), value["input"]
            else:
                errors.append(
                    InputError(
                        number,
                        value.get("id") if isinstance(value, dict) and _item_id(value.get("id")) else None,
                        "ERR_BATCH_INPUT",
                        f'line {number} is neither a JSON string nor {{"id": str or int, "input": str}}',
                    )
                )
                continue
            try:
                item_input.encode("utf-8")
            except UnicodeEncodeError:
                errors.append(
                    InputError(number, item_id, "ERR_BATCH_INPUT", f"line {number} holds a lone surrogate")
                )
                continue
            if item_id is None:
                item_id = item_digest_id(item_input)
            key = json.dumps(item_id)
            if key in seen:
                errors.append(
                    InputError(
                        number, item_id, "ERR_BATCH_DUPLICATE_ID", f"line {number} repeats the id {key[:80]}"
                    )
                )
                continue
            seen.add(key)
            digest = hashlib.sha256(item_input.encode("utf-8")).hexdigest()
            items.append(Item(key=key, id=item_id, line=number, input=item_input, sha256=digest))
    return items, errors
