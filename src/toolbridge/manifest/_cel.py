"""`!cel` expressions: checked statically, evaluated with a maintained CEL library.

A `!cel "expression"` is evaluated either when the manifest is loaded (fields such as `apiKey`,
whose expressions see `secrets` and `variables`), or when a tool runs (`Ai.Tools` entries'
`inputs`, which see `arguments`, and `result`, which also sees `result`).

A plain dotted path (`secrets.openaiApiKey`, `arguments.city`) is understood without any
library. Anything else needs the CEL library of the optional extra `toolbridge[cel]`
(`common-expression-language`), imported only when such an expression is met. Statically, the
expression must parse, name only the variables of its place, and be at most
`MAX_EXPRESSION_CHARS` long with at most `MAX_COMPREHENSIONS` comprehension macros (`map`,
`filter`, `all`, `exists`, `exists_one`), so its evaluation stays bounded.
"""

from __future__ import annotations

import base64
import datetime
import re
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Protocol

from .._extras import install_line
from .._json import JsonValue

__all__ = ["MAX_EXPRESSION_CHARS", "CelError", "evaluate", "members_of", "variables_of"]

MAX_EXPRESSION_CHARS = 2048
MAX_COMPREHENSIONS = 2

# A plain dotted path; used with fullmatch, since `$` would also pass a trailing newline.
_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_MACRO = re.compile(r"\.\s*(?:map|filter|exists_one|exists|all)\s*\(\s*([A-Za-z_]\w*)\s*,")
_EXTRA_HINT = f"the 'cel' extra: {install_line('cel')}"


class CelError(Exception):
    """An expression that cannot be checked or evaluated; `message` is one line, value-free."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Program(Protocol):
    """A compiled CEL expression of the `cel` library."""

    def execute(self, scope: dict[str, object]) -> object: ...

    def references(self) -> Mapping[str, Iterable[str]]: ...


def _library() -> ModuleType | None:
    try:
        import cel  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    return cel


def _first_line(text: str, limit: int = 140) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _compile(expr: str) -> _Program:
    lib = _library()
    if lib is None:
        raise CelError(f"this `!cel` expression needs {_EXTRA_HINT}")
    try:
        program: _Program = lib.compile(expr)
    except (ValueError, RuntimeError) as exc:
        text = str(exc)
        where = text.find("<input>:")
        detail = text[where + len("<input>:") :] if where >= 0 else "cannot parse"
        raise CelError(f"invalid CEL: {_first_line(detail)}") from None
    return program


def _check_size(expr: str) -> None:
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise CelError(f"a `!cel` expression may be at most {MAX_EXPRESSION_CHARS} characters")
    if len(_MACRO.findall(expr)) > MAX_COMPREHENSIONS:
        raise CelError(f"a `!cel` expression may use at most {MAX_COMPREHENSIONS} comprehension macros")


def variables_of(expr: str) -> set[str]:
    """The top-level variables `expr` reads (comprehension variables excluded).

    Raises:
        CelError: too long, too many comprehensions, a syntax error, or the library is missing
            for an expression that is not a plain dotted path.
    """
    _check_size(expr)
    if _PATH.fullmatch(expr):
        return {expr.split(".", 1)[0]}
    program = _compile(expr)
    names = set(program.references()["variables"])
    return names - set(_MACRO.findall(expr))


def members_of(expr: str, root: str) -> set[str]:
    """The names read directly under `root` (`arguments.city` and `arguments["city"]` give `city`)."""
    pattern = re.compile(
        rf"(?<![\w.]){re.escape(root)}\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*[\"']([^\"'\]]+)[\"']\s*\])"
    )
    return {a or b for a, b in pattern.findall(expr)}


def _walk(expr: str, scope: Mapping[str, object]) -> object:
    value: object = scope
    for part in expr.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise CelError(f"`{expr}` has no value here (no `{part}`)")
        value = value[part]
    return value


def _jsonable(value: object) -> JsonValue:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds():g}s"
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def evaluate(expr: str, scope: Mapping[str, object], *, redact: tuple[str, ...] = ()) -> JsonValue:
    """Evaluate `expr` over `scope`; the result is plain JSON data.

    Args:
        expr: the expression.
        scope: the variables it may read.
        redact: values (secrets) that must not appear in an error message.

    Raises:
        CelError: the expression cannot be evaluated (a missing key, a type error, …); the
            message names the problem; any `redact` value in it reads `***`.
    """
    _check_size(expr)
    if _PATH.fullmatch(expr):
        return _jsonable(_walk(expr, scope))
    program = _compile(expr)
    try:
        return _jsonable(program.execute(dict(scope)))
    except Exception as exc:  # the library's own errors (missing keys, undefined names, types)
        text = f"no key {exc}" if isinstance(exc, KeyError) else str(exc).split(". ", 1)[0]
        for value in redact:
            if value:
                text = text.replace(value, "***")
        raise CelError(f"cannot evaluate: {_first_line(text, 120)}") from None
