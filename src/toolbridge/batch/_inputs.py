"""Reading a batch's input file: one item per line, hostile lines refused one by one.

A line is a JSON object `{"id": ..., "input": "..."}` (the id a string or an integer) or a bare
JSON string (its line number becomes its id). Empty lines are skipped. Every other line becomes
one error line in the output, with a stable code, and never stops the other items:

| code | line |
|---|---|
| `ERR_BATCH_INPUT` | not UTF-8, not JSON, longer than `max_line_bytes`, not a string nor `{"id", "input"}` |
| `ERR_BATCH_DUPLICATE_ID` | an id an earlier line already used (the first one runs) |
| `ERR_BATCH_INPUT_CHANGED` | resuming: an id whose input differs from the one the batch started with |

Memory stays bounded by the size of the valid items: an over-long line is skipped in chunks,
never held whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import ConfigError
from ._store import Item

__all__ = ["DEFAULT_MAX_LINE_BYTES", "InputError", "read_inputs"]

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class InputError:
    """An input line that cannot run: its output line."""

    line: int
    id: Any
    code: str
    message: str

    def to_line(self) -> dict[str, Any]:
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


def _lines(f: BinaryIO, cap: int) -> Any:
    """(number, bytes or None when longer than cap) for each line, reading at most cap+1 at once."""
    number = 0
    while True:
        data = f.readline(cap + 1)
        if not data:
            return
        number += 1
        if len(data) > cap and not data.endswith(b"\n"):
            while True:  # skip the rest of the over-long line
                more = f.readline(_CHUNK)
                if not more or more.endswith(b"\n"):
                    break
            yield number, None
            continue
        yield number, data.rstrip(b"\r\n")


def _item_id(value: Any) -> bool:
    return (isinstance(value, str) and len(value) <= 1024) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    )


def read_inputs(
    path: str | os.PathLike[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[list[Item], list[InputError]]:
    """The valid items of an input file, and an error for each line that cannot run.

    Raises:
        ConfigError: (`ERR_INVALID_INPUT`) when the file cannot be opened.
    """
    items: list[Item] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ConfigError(
            f"cannot read --inputs {os.fspath(path)}: {exc.strerror}", code="ERR_INVALID_INPUT"
        ) from None
    with f:
        for number, raw in _lines(f, max_line_bytes):
            if raw is None:
                errors.append(
                    InputError(
                        number,
                        number,
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
                errors.append(InputError(number, number, "ERR_BATCH_INPUT", f"line {number} is not UTF-8"))
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                errors.append(InputError(number, number, "ERR_BATCH_INPUT", f"line {number} is not JSON"))
                continue
            if isinstance(value, str):
                item_id: Any = number
                item_input = value
            elif (
                isinstance(value, dict) and isinstance(value.get("input"), str) and _item_id(value.get("id"))
            ):
                item_id, item_input = value["id"], value["input"]
            else:
                errors.append(
                    InputError(
                        number,
                        value.get("id") if isinstance(value, dict) and _item_id(value.get("id")) else number,
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
