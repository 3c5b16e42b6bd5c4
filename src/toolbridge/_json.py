"""JSON data as a type: what `json.loads` returns and `json.dumps` accepts.

The floor's one JSON type, shared by every package (there is no second one). Use it for JSON
that toolbridge builds or has already checked; for untrusted JSON that has not been checked yet,
take `object` and narrow it with `isinstance`, which is what hostile input needs.

    JsonValue   one JSON value: an object, an array, a string, a number, a boolean or null
    JsonObject  a JSON object: `dict[str, JsonValue]`
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = dict[str, "JsonValue"] | list["JsonValue"] | str | int | float | bool | None
"""One JSON value, as the `json` module reads and writes it."""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object, as the `json` module reads and writes it."""
