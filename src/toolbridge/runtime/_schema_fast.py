"""A fast proof that a value satisfies a simple JSON Schema, tried before the full validator.

Every governed call validates its arguments and its result against the declared schemas. The
`jsonschema` validator walks each keyword through generators and type-checker lookups (about a
dozen Python calls for `{"type": "object"}`, several per property). Most declared schemas use a
small part of the language: `type`, `properties`, `required`, `additionalProperties`, `items`,
and annotations. `compile_prover` turns such a schema into one function that answers "proven
valid" or "not proven" using exact Python types only; "not proven" never means invalid: the full
validator then decides, and says why. A schema with any other keyword (or `$ref`, or a draft
other than 4, 6, 7, 2019-09 and 2020-12) gets no prover, and is validated exactly as before.

What a proof rests on, for these drafts: a JSON `string` is a `str`, an `integer` an `int` that
is not a `bool` (floats such as 1.0 are left to the validator), a `number` an `int` or `float`
(not `bool`), `boolean` a `bool`, `null` `None`, `object` a `dict`, `array` a `list`; object
keywords apply to objects only and `items` to arrays only. The prover is built from the schema
as it is when the tool is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["Prover", "compile_prover"]

Prover = Callable[[Any], bool]

_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
_SUPPORTED: Final = frozenset({"type", "properties", "required", "additionalProperties", "items"})
_EXACT: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}


def _always(value: Any) -> bool:
    return True


def _types(schema: Mapping[str, Any]) -> tuple[type, ...] | bool | None:
    """The exact types `type` allows: a tuple, None (no `type`: any), or False (not understood)."""
    declared = schema.get("type")
    if declared is None:
        return None
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not names:
        return False
    allowed: list[type] = []
    for name in names:
        if not isinstance(name, str) or name not in _EXACT:
            return False
        allowed.extend(_EXACT[name])
    return tuple(dict.fromkeys(allowed))


def _simple(schema: Any) -> tuple[type, ...] | None:
    """The exact types of a subschema that says nothing but `type` (and annotations), else None."""
    if not isinstance(schema, dict) or (schema.keys() - _ANNOTATIONS) != {"type"}:
        return None
    types = _types(schema)
    return types if isinstance(types, tuple) else None


def compile_prover(schema: Any, *, root: bool = True) -> Prover | None:
    """A function proving values valid against `schema` (see the module docs), or None.

    `schema` must already be a valid schema of one of the drafts named above (the caller checks
    it, and chooses the draft); `root` allows `$schema` at the top only.
    """
    if schema is True:
        return _always
    if not isinstance(schema, dict):
        return None  # `false`, or not a schema: the validator decides
    keys = schema.keys() - _ANNOTATIONS
    if root:
        keys -= {"$schema"}
    if not keys <= _SUPPORTED:
        return None
    allowed = _types(schema)
    if allowed is False:
        return None
    required_list = schema.get("required", [])
    if not isinstance(required_list, list) or not all(isinstance(k, str) for k in required_list):
        return None
    required = frozenset(required_list)
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return None
    simple: dict[str, tuple[type, ...]] = {}
    nested: dict[str, Prover] = {}
    for name, sub in properties.items():
        exact = _simple(sub)
        if exact is not None:
            simple[name] = exact
            continue
        prover = compile_prover(sub, root=False)
        if prover is None:
            return None
        nested[name] = prover
    extra_schema = schema.get("additionalProperties", True)
    extra_allowed = extra_schema is not False
    extra: Prover | None = None
    if extra_schema is not True and extra_schema is not False:
        extra = compile_prover(extra_schema, root=False)
        if extra is None:
            return None
    items_schema = schema.get("items", True)
    items: Prover | None = None
    item_types = _simple(items_schema)
    if items_schema is not True and item_types is None:
        items = compile_prover(items_schema, root=False)
        if items is None:
            return None
    types: tuple[type, ...] | None = allowed if isinstance(allowed, tuple) else None
    checks_objects = bool(required or simple or nested or not extra_allowed or extra is not None)
    checks_arrays = items is not None or item_types is not None

    def prove(value: Any) -> bool:
        kind = type(value)
        if types is not None and kind not in types:
            return False
        if kind is dict and checks_objects:
            if required and not required <= value.keys():
                return False
            for key, item in value.items():
                exact = simple.get(key)
                if exact is not None:
                    if type(item) not in exact:
                        return False
                    continue
                sub = nested.get(key)
                if sub is not None:
                    if not sub(item):
                        return False
                elif not extra_allowed or (extra is not None and not extra(item)):
                    return False
        elif kind is list and checks_arrays:
            if item_types is not None:
                for item in value:
                    if type(item) not in item_types:
                        return False
            elif items is not None:
                for item in value:
                    if not items(item):
                        return False
        return True

    return prove
