"""What a client refuses to send: arguments no server could read, checked before anything leaves.

A model provider may hand over JSON that Python parses but that cannot be sent on: a lone UTF-16
surrogate (`"\\ud800"` is legal JSON text, but no UTF-8 encoder accepts it), `NaN` or `Infinity`
(not JSON at all; the SDK's encoder would silently send `null`), or nesting deeper than any
server's parser accepts (and a cyclic structure is infinitely deep). Sent as is, such a value
either changes meaning on the way or breaks the shared connection's writer, failing every call on
it. `check_arguments` walks the value once, without recursion, and refuses it with
`ERR_INVALID_INPUT`, so only the call that carries it fails, before anything is sent. The error's
`details["request_sent"]` is False, for a caller that journals what left the process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._bounded import MAX_ARGUMENT_DEPTH as _MAX_ARGUMENT_DEPTH
from ..errors import ConfigError

__all__ = ["MAX_ARGUMENT_DEPTH", "check_arguments", "check_text"]

MAX_ARGUMENT_DEPTH: Final = _MAX_ARGUMENT_DEPTH
"""The deepest nesting of objects and arrays accepted in one call's arguments (64; a governed
session refuses deeper arguments before planning the call, with the same bound).

Servers parse with limits of their own (pydantic-core: 200 levels for the whole message, Python's
`json`: about 1,000); 64 leaves room for the JSON-RPC envelope and for real schemas.
"""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _where(path: list[str | int]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[:12])
    return "arguments" + text + ("…" if len(path) > 12 else "")


def _refuse(what: Callable[[], str], message: str) -> ConfigError:
    return ConfigError(
        f"{what()}: {message}; nothing was sent", code="ERR_INVALID_INPUT", details={"request_sent": False}
    )


def check_text(text: str, what: Callable[[], str], field: str) -> None:
    """Refuse a string that cannot be encoded as UTF-8 (a lone surrogate).

    Raises:
        ConfigError: `ERR_INVALID_INPUT`.
    """
    found = _SURROGATE.search(text)
    if found is not None:
        raise _refuse(
            what, f"{field} holds a lone surrogate (U+{ord(found.group()):04X}), which is no Unicode text"
        )


def _plain(arguments: Any) -> bool:
    """Whether `arguments` is plainly sendable: built only of dicts, lists, ASCII strings (keys
    too), ints, bools, None and finite floats, nested at most `MAX_ARGUMENT_DEPTH` levels.

    The fast path of `check_arguments`, for what models and callers almost always send: exact
    types only, and no path kept. False means "not proven", never "bad": the full walk decides.
    """
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is str:
            if not value.isascii():
                return False
        elif kind is dict or kind is list:
            if depth > MAX_ARGUMENT_DEPTH:
                return False
            if kind is dict:
                for key in value:
                    if type(key) is not str or not key.isascii():
                        return False
                items = value.values()
            else:
                items = value
            for item in items:
                if type(item) in _SCALARS:
                    if type(item) is float and not math.isfinite(item):
                        return False
                else:
                    stack.append((item, depth + 1))
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif kind not in _SCALARS:
            return False
    return True


_SCALARS: Final = frozenset({int, bool, float, type(None)})


def check_arguments(arguments: Mapping[str, Any], what: Callable[[], str]) -> None:
    """Refuse arguments that no server could read as the caller meant them.

    Walks the value once, iteratively: strings (keys included) must be valid Unicode, numbers
    finite, nesting at most `MAX_ARGUMENT_DEPTH` levels. Values of other types are left to the
    SDK's encoder (which fails only this call if it cannot encode them).

    Args:
        arguments: the call's arguments.
        what: builds the operation's name for the message (only when it is needed).

    Raises:
        ConfigError: `ERR_INVALID_INPUT`, naming where in the arguments the bad value is.
    """
    if _plain(arguments):
        return
    stack: list[tuple[Any, int, list[str | int]]] = [(arguments, 1, [])]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value) is not None:
                raise _refuse(what, f"{_where(path)} holds a lone surrogate, which is no Unicode text")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _refuse(what, f"{_where(path)} is {value!r}, which JSON cannot carry")
        elif isinstance(value, Mapping | list | tuple):
            if depth > MAX_ARGUMENT_DEPTH:
                raise _refuse(
                    what,
                    f"{_where(path)} is nested deeper than {MAX_ARGUMENT_DEPTH} levels (or holds a cycle)",
                )
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if isinstance(key, str) and _SURROGATE.search(key) is not None:
                        raise _refuse(what, f"a key in {_where(path)} holds a lone surrogate")
                    stack.append((item, depth + 1, [*path, str(key)] if len(path) < 13 else path))
            else:
                for index, item in enumerate(value):
                    stack.append((item, depth + 1, [*path, index] if len(path) < 13 else path))
