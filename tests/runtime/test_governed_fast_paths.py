"""The per-call fast paths of the governed call agree with the slow paths they stand for.

- `Permissions.first_missing(needs)` (remembered per tool) is `missing(needs.required())[0]`
  (or None), for any allow list and any needs, asked once or many times;
- `DeclaredTool.grant_needs()` (built once) follows a replaced `id`, `effects` or `capabilities`;
- `ToolCatalog.current()` gives the built catalog only while it is current (a provider whose
  tools changed makes it None, and `resolve` lists again);
- `canonical_json` (the C encoder made once) is `json.dumps` with the canonical options, and
  refuses what it refuses (a cycle or deep nesting as a `ValueError`); `to_json_text` is the
  `json.dumps` it stands for;
- `DeadlineWatch.scope_class()` is the very class `anyio.CancelScope()` makes in the loop, and a
  scope made from it is cancelled by its deadline like any other.
"""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge import create_runtime, define_tool
from toolbridge._canonical import canonical_json
from toolbridge._deadlines import deadline_watch
from toolbridge.agent._types import ToolBinding
from toolbridge.catalog import ToolCatalog
from toolbridge.content import json_text, to_json_text
from toolbridge.errors import PolicyError
from toolbridge.runtime._permissions import EFFECTS, Permissions, ToolGrantNeeds
from toolbridge.tools import ToolSpec

_names = st.sampled_from(["a", "b", "c", "pay:refund", "tool:a", "tool:b", "effect:read", "effect:write"])


@settings(max_examples=300, deadline=None)
@given(
    allow=st.lists(_names, max_size=6),
    asks=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(EFFECTS),
            st.lists(st.sampled_from(["pay:refund", "a", "x"]), max_size=3).map(tuple),
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_first_missing_agrees_with_missing(
    allow: list[str], asks: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    permissions = Permissions(allow)
    for tool_id, effects, caps in asks * 2:  # asked again: the remembered answer
        needs = ToolGrantNeeds(tool_id, effects, caps)
        slow = permissions.missing(needs.required())
        assert permissions.first_missing(needs) == (slow[0] if slow else None)


def _tool() -> object:
    return define_tool(
        id="fast.t", version="1", description="d",
        input={"type": "object"}, output={"type": "object"},
        effects="read", capabilities=["pay:refund"], execute=lambda args, ctx: {"ok": True},
    )  # fmt: skip


def test_grant_needs_follows_replaced_attributes() -> None:
    tool = _tool()
    first = tool.grant_needs()  # type: ignore[attr-defined]
    assert first == ToolGrantNeeds("fast.t", "read", ("pay:refund",))
    assert tool.grant_needs() is first  # type: ignore[attr-defined]
    tool.effects = "write"  # type: ignore[attr-defined]
    assert tool.grant_needs() == ToolGrantNeeds("fast.t", "write", ("pay:refund",))  # type: ignore[attr-defined]
    tool.capabilities = ()  # type: ignore[attr-defined]
    assert tool.grant_needs() == ToolGrantNeeds("fast.t", "write", ())  # type: ignore[attr-defined]


async def test_a_replaced_effect_is_governed_with_the_new_grant() -> None:
    tool = _tool()
    runtime = create_runtime(permissions={"allow": ["tool:fast.t", "pay:refund", "effect:read"]})
    async with runtime.session(tools=[tool]) as session:
        assert (await session.call_tool("fast_t", {})).structured == {"ok": True}
    tool.effects = "write"  # type: ignore[attr-defined]
    async with runtime.session(tools=[tool]) as session:
        with pytest.raises(PolicyError) as info:
            await session.call_tool("fast_t", {})
    assert info.value.code == "PERMISSION_DENIED"


class _Provider:
    """A provider whose tools change when told (its generation moves)."""

    def __init__(self) -> None:
        self.names = ["one"]
        self.generation = 0
        self.listed = 0

    async def list_tools(self) -> list[ToolSpec]:
        self.listed += 1
        return [ToolSpec(name=n, description=n, parameters={"type": "object"}) for n in self.names]

    async def call_tool(self, name: str, arguments: object) -> object:  # pragma: no cover - not called
        raise AssertionError


async def test_catalog_current_only_while_current() -> None:
    provider = _Provider()
    catalog = ToolCatalog((ToolBinding.coerce(provider),), ())
    assert catalog.current() is None  # never built
    built = await catalog.resolve()
    assert catalog.current() is built
    provider.names = ["one", "two"]
    provider.generation += 1
    assert catalog.current() is None
    again = await catalog.resolve()
    assert sorted(again.targets) == ["one", "two"] and provider.listed == 2
    declared_only = ToolCatalog((), (_tool(),))
    assert declared_only.current() is None
    built = await declared_only.resolve()
    assert declared_only.current() is built


async def test_scope_class_is_the_loops_cancel_scope() -> None:
    watch = deadline_watch()
    assert watch.scope_class is type(anyio.CancelScope())
    with watch.scope_class() as scope:
        assert isinstance(scope, anyio.CancelScope)
        watch.arm(scope, anyio.current_time() + 0.05)
        try:
            await anyio.sleep(5)
        finally:
            watch.disarm(scope)
    assert scope.cancelled_caught


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_canonical_json_is_json_dumps_canonical(value: object) -> None:
    """The C encoder made once gives exactly what `json.dumps` gives for the canonical options."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == expected.encode("utf-8")


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (float("nan"), ValueError),
        ({"x": [float("inf")]}, ValueError),
        (object(), TypeError),
        ({(1,): 2}, TypeError),
        ({"b": 1, 2: 3}, TypeError),  # keys that cannot be sorted together
    ],
)
def test_canonical_json_refuses_what_json_dumps_refuses(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        json.dumps(bad, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    with pytest.raises(error):
        canonical_json(bad)


def test_canonical_json_refuses_cycles_and_deep_nesting_as_value_errors() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    deep: object = []
    for _ in range(100_000):
        deep = [deep]
    for bad in (cycle, deep):
        with pytest.raises(ValueError):
            canonical_json(bad)


_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_any_json)
def test_to_json_text_is_its_json_dumps(value: object) -> None:
    """`to_json_text` (the C encoder, built per call) is the `json_text` it stands for (NaN and
    the infinities as `null`), integer keys and objects turned to text included."""
    expected = json_text(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False, default=str)
    assert to_json_text(value) == expected
    assert to_json_text({"o": _Odd()}) == '{"o":"odd"}'
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular"):
        to_json_text(cycle)


class _Odd:
    def __str__(self) -> str:
        return "odd"
