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
    "DEFAULT_SYNTAX",
    "LEAVE",
    "OMIT",
    "Filled",
    "MissingValue",
    "PathError",
    "Placeholder",
    "Syntax",
    "get_path",
    "iter_placeholders",
    "parse_path",
    "render",
    "to_text",
]

_PATH_PART: Final = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_BARE_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+|\[\d+\])*"


class Syntax:
    """How a placeholder is written: `prefix + name + suffix` (`{{name}}` by default).

    TinyAgent's `McpToolParser` takes a function `key -> placeholder text`; `Syntax.of(fn)` reads
    the prefix and suffix off such a function (`lambda key: "${" + key + "}"` gives `${` and `}`).
    A backslash before the prefix makes it literal. The name is any run of characters that are
    neither whitespace nor part of the prefix or suffix (with an empty suffix: an identifier with
    `.key` / `[index]` steps).
    """

    __slots__ = ("prefix", "suffix", "token", "whole")

    def __init__(self, prefix: str = "{{", suffix: str = "}}") -> None:
        if not prefix:
            raise ValueError("a placeholder needs a non-empty prefix")
        self.prefix = prefix
        self.suffix = suffix
        if suffix:
            banned = re.escape("".join(sorted(set(prefix + suffix))))
            name = rf"[^{banned}\s]+"
        else:
            name = _BARE_NAME
        body = rf"{re.escape(prefix)}\s*({name})\s*{re.escape(suffix)}"
        self.token: re.Pattern[str] = re.compile(rf"\\{re.escape(prefix)}|{body}")
        self.whole: re.Pattern[str] = re.compile(rf"^{body}$")

    @classmethod
    def of(cls, placeholder: Callable[[str], str]) -> Syntax:
        """The syntax of a TinyAgent-style placeholder function (`key -> text`).

        Raises:
            ValueError: the function does not write `prefix + key + suffix` for every key.
        """
        marker = "\u0000key\u0000"
        try:
            text = placeholder(marker)
            other = placeholder("other_key")
        except Exception as exc:
            raise ValueError(f"the placeholder function failed: {type(exc).__name__}") from None
        if not isinstance(text, str) or text.count(marker) != 1:
            raise ValueError("the placeholder function must return a text that contains the key once")
        prefix, suffix = text.split(marker)
        if other != f"{prefix}other_key{suffix}":
            raise ValueError("the placeholder function must write the same text before and after every key")
        return cls(prefix, suffix)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Syntax) and (self.prefix, self.suffix) == (other.prefix, other.suffix)

    def __hash__(self) -> int:
        return hash((self.prefix, self.suffix))

    def __repr__(self) -> str:
        return f"Syntax({self.prefix!r}, {self.suffix!r})"

    def write(self, name: str) -> str:
        """The placeholder text for `name`."""
        return f"{self.prefix}{name}{self.suffix}"


DEFAULT_SYNTAX: Final = Syntax()


class Filled(str):
    """A text some of whose parts were inserted (or unescaped) and must never be read again.

    `frozen` holds `(start, end)` spans: substituting again (one name at a time, as
    `McpToolParser.replace_instruction_param_value` does) looks for placeholders only outside
    them, so a value `{{b}}` inserted for `a` stays that text when `b` is substituted later.
    Everywhere else it is a plain `str`.
    """

    frozen: tuple[tuple[int, int], ...]

    def __new__(cls, text: str, frozen: tuple[tuple[int, int], ...]) -> Filled:
        obj = super().__new__(cls, text)
        obj.frozen = frozen
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (Filled, (str(self), self.frozen))

    def __deepcopy__(self, memo: dict[int, Any]) -> Filled:
        return self

    def __copy__(self) -> Filled:
        return self


def _segments(text: str) -> list[tuple[str, bool]]:
    """`text` as `(piece, frozen)` pieces."""
    spans = text.frozen if isinstance(text, Filled) else ()
    if not spans:
        return [(text, False)]
    out: list[tuple[str, bool]] = []
    pos = 0
    for start, end in spans:
        if start > pos:
            out.append((text[pos:start], False))
        out.append((text[start:end], True))
        pos = end
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def _join(pieces: list[tuple[str, bool]], syntax: Syntax) -> str:
    text = "".join(p for p, _ in pieces)
    if not any(frozen for _, frozen in pieces) or syntax.prefix[0] not in text:
        return text
    # An inserted value keeps its span even when empty: `{{a}}{{b}}` with `a=''` leaves
    # `{{b}}` inside a longer template, so `b` is interpolated as text later, never whole.
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece, frozen in pieces:
        if frozen:
            if spans and spans[-1][1] == pos:
                spans[-1] = (spans[-1][0], pos + len(piece))
            else:
                spans.append((pos, pos + len(piece)))
        pos += len(piece)
    return Filled(text, tuple(spans))


def _freeze(value: object, syntax: Syntax) -> Any:
    """An inserted value, with every text that could read as a placeholder made final."""
    if isinstance(value, str):
        if syntax.prefix[0] in value and not isinstance(value, Filled):
            return Filled(value, ((0, len(value)),)) if value else value
        return value
    if isinstance(value, dict):
        return {k: _freeze(v, syntax) for k, v in value.items()}
    if isinstance(value, list):
        return [_freeze(v, syntax) for v in value]
    return value


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


Resolver = Callable[[str], object]


def _whole_name(text: str, syntax: Syntax) -> str | None:
    if isinstance(text, Filled) and text.frozen:
        return None
    m = syntax.whole.match(text)
    return m.group(1) if m else None


def iter_placeholders(
    value: object, path: str = "", syntax: Syntax = DEFAULT_SYNTAX
) -> Iterator[Placeholder]:
    """Every placeholder in `value`, depth first, with where it was found."""
    if isinstance(value, str):
        whole = _whole_name(value, syntax)
        if whole is not None:
            yield Placeholder(whole, True, path)
            return
        for piece, frozen in _segments(value):
            if frozen:
                continue
            for m in syntax.token.finditer(piece):
                if m.group(1) is not None:
                    yield Placeholder(m.group(1), False, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_placeholders(item, _join_key(path, key), syntax)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from iter_placeholders(item, f"{path}[{i}]", syntax)


def _join_key(path: str, key: object) -> str:
    key = str(key)
    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def to_text(value: object) -> str:
    """How a value reads inside a longer string: JSON text, except that strings are bare."""
    if isinstance(value, str):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(value: object, resolve: Resolver, path: str = "", syntax: Syntax = DEFAULT_SYNTAX) -> Any:
    """Substitute every placeholder in `value` (a params object, or any JSON value).

    Inserted values are never read as templates: they come out frozen (see `Filled`), so a
    later `render` of the result (one name at a time) leaves them alone.

    Args:
        value: the template (never modified).
        resolve: maps a placeholder name to its value; raises `MissingValue` or returns `LEAVE`.
        path: where `value` sits, for error messages.
        syntax: how placeholders are written (`{{name}}` by default).

    Returns:
        The substituted value, or `OMIT` when `value` itself is a whole-value placeholder whose
        value is missing.

    Raises:
        MissingValue: an interpolated placeholder's value is missing (`.path` says where).
        PathError: a reference walks to something a result does not have (from the resolver).
    """
    if isinstance(value, str):
        return _render_str(value, resolve, path, syntax)
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            rendered = render(item, resolve, _join_key(path, key), syntax)
            if rendered is not OMIT:
                out[key] = rendered
        return out
    if isinstance(value, list):
        items: list[object] = []
        for i, item in enumerate(value):
            rendered = render(item, resolve, f"{path}[{i}]", syntax)
            if rendered is not OMIT:
                items.append(rendered)
        return items
    return value


def _render_str(text: str, resolve: Resolver, path: str, syntax: Syntax) -> Any:
    whole = _whole_name(text, syntax)
    if whole is not None:
        try:
            found = resolve(whole)
        except MissingValue:
            return OMIT
        return text if found is LEAVE else _freeze(copy.deepcopy(found), syntax)
    if syntax.prefix not in text:
        return text
    pieces: list[tuple[str, bool]] = []
    for piece, frozen in _segments(text):
        if frozen:
            pieces.append((piece, True))
            continue
        pos = 0
        for m in syntax.token.finditer(piece):
            pieces.append((piece[pos : m.start()], False))
            pos = m.end()
            name = m.group(1)
            if name is None:  # the escape: a literal prefix
                pieces.append((syntax.prefix, True))
                continue
            try:
                found = resolve(name)
            except MissingValue as exc:
                raise MissingValue(exc.name, path) from None
            pieces.append((m.group(0), False) if found is LEAVE else (to_text(found), True))
        pieces.append((piece[pos:], False))
    return _join(pieces, syntax)


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


def get_path(value: object, steps: list[str | int], label: str) -> Any:
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
