"""The fast proof of simple JSON Schemas (`_schema_fast`) never accepts what jsonschema rejects.

A declared schema made of `type`, `properties`, `required`, `additionalProperties`, `items` and
annotations gets a prover that answers "proven valid" with exact Python types, before the full
validator runs. These properties generate such schemas (and some with other keywords) and
hostile values, and demand: whatever the prover proves, jsonschema accepts; and a declared
schema validates (returns, or refuses with the same message) exactly as it does without the
prover.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.runtime import _declared
from toolbridge.runtime._schema_fast import compile_prover

_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
_names = st.sampled_from(["a", "b", "c", "n", "x"])
_type = st.sampled_from(_TYPES) | st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True)
_annotations = st.fixed_dictionaries({}, optional={"title": st.just("T"), "description": st.just("d")})


def _schemas(depth: int = 2) -> st.SearchStrategy[Any]:
    leaf = st.builds(lambda t, a: {"type": t, **a}, _type, _annotations) | st.just(True) | st.just({})
    if depth == 0:
        return leaf
    sub = _schemas(depth - 1)
    obj = st.builds(
        lambda t, props, req, extra, other: {
            **({"type": t} if t else {}),
            **({"properties": props} if props else {}),
            **({"required": req} if req else {}),
            **({"additionalProperties": extra} if extra is not None else {}),
            **other,
        },
        st.sampled_from([None, "object", ["object", "null"]]),
        st.dictionaries(_names, sub, max_size=3),
        st.lists(_names, max_size=2, unique=True),
        st.none() | st.booleans() | sub,
        st.sampled_from([{}, {}, {}, {"minProperties": 1}, {"enum": [{"a": 1}]}]),  # some unsupported
    )
    arr = st.builds(
        lambda items, other: {"type": "array", **({"items": items} if items is not None else {}), **other},
        st.none() | sub,
        st.sampled_from([{}, {}, {"maxItems": 1}]),
    )
    return leaf | obj | arr


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([1.0, 2.5, -0.0, float("nan"), float("inf")])
    | st.text(max_size=3)
    | st.tuples(st.integers(0, 1))
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_names | st.integers(0, 2), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_schemas(), _values)
def test_what_is_proven_jsonschema_accepts(schema: Any, value: Any) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    prove = compile_prover(schema)
    if prove is not None and prove(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)


def _outcome(schema: _declared._Schema, value: Any) -> tuple[str, Any]:
    try:
        return "ok", schema.validate(value)
    except Exception as exc:  # a refusal (ValueError), or whatever the validator itself raises
        return type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None)
@given(_schemas(), _values)
def test_a_declared_schema_validates_as_without_the_prover(schema: Any, value: Any) -> None:
    if not isinstance(schema, dict):
        schema = {"allOf": [schema]}
    declared = _declared._Schema(schema, "test", require_object=False)
    plain = _declared._Schema(schema, "test", require_object=False)
    plain._prove = None
    fast, slow = _outcome(declared, value), _outcome(plain, value)
    assert fast[0] == slow[0] and (fast[1] is slow[1] or fast[1] == slow[1]), (schema, value)


def test_the_plain_cases_are_proven_and_the_rest_left_to_the_validator() -> None:
    anything = compile_prover({"type": "object", "additionalProperties": True})
    assert anything is not None and anything({"x": [1, {"y": None}]}) and not anything([])
    typed = compile_prover(
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "s": {"type": "string", "title": "S"}},
            "required": ["n"],
            "additionalProperties": False,
        }
    )
    assert typed is not None
    assert typed({"n": 1, "s": "x"})
    assert not typed({"n": 1.0})  # an integral float: valid JSON Schema, but not proven here
    assert not typed({"n": True})  # a bool is no integer
    assert not typed({"s": "x"})  # required
    assert not typed({"n": 1, "other": 1})  # additionalProperties false
    numbers = compile_prover({"type": "array", "items": {"type": "number"}})
    assert numbers is not None and numbers([1, 2.5]) and not numbers([1, False]) and not numbers((1,))
    for unsupported in (
        {"type": "string", "maxLength": 3},
        {"$ref": "#/$defs/x", "$defs": {"x": {}}},
        {"type": "object", "properties": {"a": {"enum": [1]}}},
        {"items": [{"type": "string"}]},
        {"type": "object", "properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}},
        False,
    ):
        assert compile_prover(unsupported) is None, unsupported


@pytest.mark.parametrize(
    ("draft", "proven"),
    [
        ("http://json-schema.org/draft-03/schema#", False),  # `required` means something else there
        ("http://json-schema.org/draft-07/schema#", True),
        ("https://json-schema.org/draft/2020-12/schema", True),
    ],
)
def test_only_the_drafts_it_understands_get_a_prover(draft: str, proven: bool) -> None:
    schema = _declared._Schema({"$schema": draft, "type": "object"}, "test", require_object=True)
    assert (schema._prove is not None) is proven
    assert schema.validate({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError):
        schema.validate([])
