"""Placeholder substitution in instruction params.

TinyAgent replaced `{{key}}` with `String.replaceAll` in the top-level string params only, so
numbers became strings, an omitted argument became the text `"undefined"`, nested params were
never visited and unknown names stayed as literal `{{x}}`. Here the rules are:

- **Whole value.** A string that is exactly one placeholder (`"{{count}}"`, spaces inside the
  braces allowed) takes the value itself, with its JSON type: a number stays a number, an object
  stays an object (a deep copy).
- **Interpolation.** Placeholders inside a longer string are replaced by text: strings as they
  are, numbers as JSON numbers, `true`/`false`/`null`, objects and arrays as compact JSON.
- **Nesting.** Objects and arrays in params are visited at every depth (values only; keys are
  never substituted).
- **Escape.** `\\{{` is a literal `{{` and starts no placeholder.
- **Omitted values.** When the resolver reports a value as missing (an optional argument the
  model left out and that has no `default`), a whole-value param is left out (its key removed, or
  its array element dropped) and an interpolated one raises `MissingValue`: the text
  `undefined` or `None` never appears.

The resolver is a function from a placeholder name to its value; it raises `MissingValue` for a
missing one, or returns `LEAVE` to keep the placeholder text as it is (used when substituting one
name at a time, as `McpToolParser.replace_instruction_param_value` does).

References to earlier results (`{{step1.rows[0].name}}`) use `get_path` to walk into the result.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "LEAVE",
    "OMIT",
    "MissingValue",
    "PathError",
    "Placeholder",
    "get_path",
    "iter_placeholders",
    "parse_path",
    "render",
    "to_text",
]

_TOKEN: Final = re.compile(r"\\\{\{|\{\{\s*([^{}\s]+)\s*\}\}")
_WHOLE: Final = re.compile(r"^\{\{\s*([^{}\s]+)\s*\}\}$")
_PATH_PART: Final = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


LEAVE: Final[Any] = _Sentinel("LEAVE")
"""Returned by a resolver to keep the placeholder text unchanged."""

OMIT: Final[Any] = _Sentinel("OMIT")
"""Returned by `render` for a whole-value placeholder whose value is missing."""


class MissingValue(Exception):
    """Raised by a resolver for a placeholder whose value is missing.

    `render` re-raises it for an interpolated placeholder with `path` set to the param's location.
    """

    def __init__(self, name: str, path: str = "") -> None:
        super().__init__(name)
        self.name = name
        self.path = path


class PathError(Exception):
    """A `{{id.path}}` reference walks to something the result does not have."""


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One placeholder found in params.

    Attributes:
        name: the text between the braces, trimmed (`name`, or `step1.rows[0]`).
        whole: True when the string is exactly this placeholder (the value keeps its type).
        path: where it was found, relative to the params (`.value`, `.items[2].text`).
    """

    name: str
    whole: bool
    path: str


Resolver = Callable[[str], Any]


def iter_placeholders(value: Any, path: str = "") -> Iterator[Placeholder]:
    """Every placeholder in `value`, depth first, with where it was found."""
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole:
            yield Placeholder(whole.group(1), True, path)
            return
        for m in _TOKEN.finditer(value):
            if m.group(1) is not None:
                yield Placeholder(m.group(1), False, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_placeholders(item, _join_key(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from iter_placeholders(item, f"{path}[{i}]")


def _join_key(path: str, key: Any) -> str:
    key = str(key)
    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def to_text(value: Any) -> str:
    """How a value reads inside a longer string: JSON text, except that strings are bare."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(value: Any, resolve: Resolver, path: str = "") -> Any:
    """Substitute every placeholder in `value` (a params object, or any JSON value).

    Args:
        value: the template (never modified).
        resolve: maps a placeholder name to its value; raises `MissingValue` or returns `LEAVE`.
        path: where `value` sits, for error messages.

    Returns:
        The substituted value, or `OMIT` when `value` itself is a whole-value placeholder whose
        value is missing.

    Raises:
        MissingValue: an interpolated placeholder's value is missing (`.path` says where).
        PathError: a reference walks to something a result does not have (from the resolver).
    """
    if isinstance(value, str):
        return _render_str(value, resolve, path)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            rendered = render(item, resolve, _join_key(path, key))
            if rendered is not OMIT:
                out[key] = rendered
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for i, item in enumerate(value):
            rendered = render(item, resolve, f"{path}[{i}]")
            if rendered is not OMIT:
                items.append(rendered)
        return items
    return value


def _render_str(text: str, resolve: Resolver, path: str) -> Any:
    whole = _WHOLE.match(text)
    if whole:
        try:
            found = resolve(whole.group(1))
        except MissingValue:
            return OMIT
        return text if found is LEAVE else copy.deepcopy(found)
    if "{{" not in text:
        return text

    def replace(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:  # the escape \{{
            return "{{"
        try:
            found = resolve(name)
        except MissingValue as exc:
            raise MissingValue(exc.name, path) from None
        return m.group(0) if found is LEAVE else to_text(found)

    return _TOKEN.sub(replace, text)


def parse_path(text: str) -> list[str | int]:
    """Split a reference path such as `.rows[0].name` (or `.rows.0.name`) into its steps.

    Raises:
        ValueError: the text is not a path.
    """
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _PATH_PART.match(text, pos)
        if m is None:
            raise ValueError(f"bad reference path {text!r} at character {pos}")
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return steps


def get_path(value: Any, steps: list[str | int], label: str) -> Any:
    """Walk `steps` into `value`; a digit step indexes a list.

    Raises:
        PathError: a step names a key or index that is not there (the message names `label`).
    """
    current = value
    walked = label
    for step in steps:
        if isinstance(current, dict) and str(step) in current:
            current = current[str(step)]
            walked = f"{walked}.{step}"
            continue
        if isinstance(current, list):
            try:
                index = int(step)
            except ValueError:
                index = None
            if index is not None and -len(current) <= index < len(current):
                current = current[index]
                walked = f"{walked}[{index}]"
                continue
        kind = "null" if current is None else type(current).__name__.replace("dict", "object")
        raise PathError(f"{walked} has no {step!r} (it is {kind}: {to_text(current)[:200]})")
    return current
