"""The fast path of `check_arguments` (`_plain`) never decides differently from the full walk.

`_plain` only proves arguments sendable (exact plain types, ASCII text, finite numbers, bounded
nesting); anything it cannot prove goes to the full walk, which names the bad value. These
properties run the check with and without the fast path on hostile values and demand the same
verdict and the same message.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.clients import _outbound
from toolbridge.clients._outbound import MAX_ARGUMENT_DEPTH, check_arguments
from toolbridge.errors import ConfigError

_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8) | st.sampled_from(
    ["", "plain", "\ud800", "a\udfffb", "é", "\u2028"]
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
    | st.tuples(st.integers())
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30,
)


def _verdict(arguments: Any) -> str | None:
    try:
        check_arguments(arguments, lambda: "tools/call 't'")
    except ConfigError as exc:
        assert exc.code == "ERR_INVALID_INPUT"
        assert exc.details == {"request_sent": False}
        return exc.message
    return None


def _full_walk(arguments: Any, monkeypatch: pytest.MonkeyPatch) -> str | None:
    with monkeypatch.context() as patched:
        patched.setattr(_outbound, "_plain", lambda value: False)
        return _verdict(arguments)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_text, _values, max_size=5))
def test_the_fast_path_agrees_with_the_full_walk(arguments: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _verdict(arguments) == _full_walk(arguments, monkeypatch)
        if _outbound._plain(arguments):
            assert _full_walk(arguments, monkeypatch) is None  # proven plain: the full walk agrees


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth - 1):
        value = {"k": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH - 1, MAX_ARGUMENT_DEPTH, MAX_ARGUMENT_DEPTH + 1])
def test_depth_at_the_limit(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    arguments = {"a": _nested(depth, 1)}  # the root and depth - 1 containers under it
    verdict = _verdict(arguments)
    assert verdict == _full_walk(arguments, monkeypatch)
    assert (verdict is None) == (depth <= MAX_ARGUMENT_DEPTH)


def test_hostile_values_still_refused() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for bad in (
        {"a": math.nan},
        {"a": [1, -math.inf]},
        {"a": "\ud800"},
        {"\udc00": 1},
        {"a": {"b": ["x", "y\udfff"]}},
        cyclic,
    ):
        assert _verdict(bad) is not None, bad
    assert _outbound._plain({"a": [1, 2.5, None, True, "x", {"b": []}]})
    assert not _outbound._plain({"a": "é"})  # not ASCII: not proven, the full walk decides
    assert _verdict({"a": "é"}) is None
