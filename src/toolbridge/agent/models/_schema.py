"""Best-effort conversions of a tool's JSON Schema to what a provider accepts, on a copy.

`to_gemini_schema` converts to the OpenAPI-subset `Schema` of Gemini function declarations, or
returns `None` (the caller then sends the original as `parametersJsonSchema`); see its docstring.

Strict function calling requires every object to list all its properties in `required` and to
set `additionalProperties: false`; optional properties are expressed as nullable instead.
`to_strict_schema` does this on a deep copy after inlining local `$ref`s (`#/$defs/...`,
`#/definitions/...`; sibling keywords next to a `$ref` win over the referenced schema). When a
schema cannot be made strict faithfully (open objects, recursive or remote refs, keywords strict
mode does not accept) it returns `None`, and the caller sends the original schema unchanged.
The original is never modified.

`resolve_local_refs` is exposed on its own for providers that want inlined schemas without
strictness.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

__all__ = ["NotConvertible", "resolve_local_refs", "to_gemini_schema", "to_strict_schema"]

_UNSUPPORTED = frozenset(
    {
        "patternProperties",
        "if",
        "then",
        "else",
        "not",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "propertyNames",
        "contains",
    }
)


class NotConvertible(Exception):
    """Raised internally when a schema cannot be converted."""


def _pointer(root: Mapping[str, object], ref: str) -> object:
    if not ref.startswith("#"):
        raise NotConvertible(f"non-local $ref {ref!r}")
    node: object = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise NotConvertible(f"unresolvable $ref {ref!r}")
    return node


def _inline(node: object, root: Mapping[str, object], stack: tuple[str, ...]) -> object:
    if isinstance(node, list):
        return [_inline(item, root, stack) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in stack:
            raise NotConvertible(f"recursive $ref {ref!r}")
        target = _pointer(root, ref)
        if not isinstance(target, Mapping):
            raise NotConvertible(f"$ref {ref!r} is not a schema")
        merged = {**copy.deepcopy(dict(target)), **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, root, (*stack, ref))
    return {k: _inline(v, root, stack) for k, v in node.items() if k not in ("$defs", "definitions")}


def resolve_local_refs(schema: Mapping[str, object]) -> dict[str, object]:
    """A copy of `schema` with every local `$ref` inlined and `$defs` / `definitions` dropped.

    Raises:
        NotConvertible: for recursive, remote or unresolvable references.
    """
    result = _inline(schema, schema, ())
    assert isinstance(result, dict)
    return result


def _nullable(node: dict[str, object]) -> dict[str, object]:
    kind = node.get("type")
    if isinstance(kind, str) and "enum" not in node:
        return {**node, "type": [kind, "null"]} if kind != "null" else node
    if isinstance(kind, list) and "enum" not in node:
        return node if "null" in kind else {**node, "type": [*kind, "null"]}
    any_of = node.get("anyOf")
    if isinstance(any_of, Iterable) and len(node) == 1:
        options = list(any_of)
        if not any(isinstance(o, Mapping) and o.get("type") == "null" for o in options):
            options.append({"type": "null"})
        return {"anyOf": options}
    return {"anyOf": [node, {"type": "null"}]}


def _strict(node: object) -> object:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    bad = _UNSUPPORTED.intersection(node)
    if bad:
        raise NotConvertible(f"keywords {sorted(bad)}")
    out: dict[str, object] = {str(k): v for k, v in node.items() if k != "default"}
    if "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")
    if "allOf" in out:
        parts = out.pop("allOf")
        if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], Mapping):
            raise NotConvertible("allOf")
        out = {**{str(k): v for k, v in parts[0].items()}, **out}
    if "anyOf" in out:
        options = out["anyOf"]
        if not isinstance(options, Iterable):
            raise NotConvertible("anyOf")
        out["anyOf"] = [_strict(option) for option in options]
    if "items" in out:
        out["items"] = _strict(out["items"])
    kind = out.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in out
    if is_object:
        props = out.get("properties") or {}
        if not isinstance(props, Mapping):
            raise NotConvertible("properties")
        extra = out.get("additionalProperties")
        if extra not in (None, False):
            raise NotConvertible("open object (additionalProperties)")
        if not props and extra is None:
            raise NotConvertible("object without declared properties")
        required = _names(out.get("required"))
        new_props: dict[str, object] = {}
        for name, sub in props.items():
            converted = _strict(sub)
            if name not in required:
                if not isinstance(converted, dict):
                    raise NotConvertible(f"property {name!r}")
                converted = _nullable(converted)
            new_props[name] = converted
        out["properties"] = new_props
        out["required"] = list(new_props)
        out["additionalProperties"] = False
    return out


def _names(required: object) -> set[object]:
    """The names a `required` keyword lists (none when it is absent; refused when not a list)."""
    if not required:
        return set()
    if not isinstance(required, Iterable):
        raise NotConvertible("required")
    return set(required)


def to_strict_schema(schema: Mapping[str, object]) -> dict[str, object] | None:
    """A strict-mode copy of `schema`, or `None` when it cannot be made strict faithfully."""
    try:
        result = _strict(resolve_local_refs(schema))
    except (NotConvertible, RecursionError):
        return None
    return result if isinstance(result, dict) else None


def optional_top_level(schema: Mapping[str, object]) -> frozenset[str]:
    """Names of the top-level properties the original schema does not require."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return frozenset()
    try:
        required = _names(schema.get("required"))
    except NotConvertible:
        required = set()
    return frozenset(name for name in props if name not in required)


# -- Gemini ------------------------------------------------------------------------------------

# Keywords Gemini's `Schema` (an OpenAPI 3.0 subset) takes, with their JSON Schema spelling.
_TEXT = (str,)
_NUMBER = (int, float)
_GEMINI_KEEP: dict[str, tuple[type, ...]] = {
    "description": _TEXT,
    "title": _TEXT,
    "pattern": _TEXT,
    "default": (object,),
    "minimum": _NUMBER,
    "maximum": _NUMBER,
    "minItems": (int,),
    "maxItems": (int,),
    "minLength": (int,),
    "maxLength": (int,),
    "minProperties": (int,),
    "maxProperties": (int,),
}
# Keywords that only annotate: dropped without changing what the schema accepts.
_GEMINI_DROP = frozenset(
    {"$schema", "$id", "$comment", "readOnly", "writeOnly", "deprecated", "contentMediaType", "examples"}
)
_GEMINI_FORMATS = {
    "string": {"date-time", "enum"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
_GEMINI_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


def _gemini(given: object, top: bool = False) -> dict[str, object]:
    if not isinstance(given, Mapping):
        raise NotConvertible("not a schema")
    node: dict[str, object] = {str(k): v for k, v in given.items()}
    if "allOf" in node:
        parts = node.pop("allOf")
        if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], Mapping):
            raise NotConvertible("allOf")
        node = {**{str(k): v for k, v in parts[0].items()}, **node}
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    if "const" in node:
        node["enum"] = [node.pop("const")]
    out: dict[str, object] = {}
    nullable = False
    kind = node.get("type")
    if isinstance(kind, list):
        if not all(isinstance(k, str) for k in kind):
            raise NotConvertible("type list")
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) < len(kind)
        if len(kinds) == 1:
            kind = kinds[0]
        elif not kinds:
            kind = "null"
        else:
            rest = {k: v for k, v in node.items() if k != "type"}
            options = [_gemini({**rest, "type": k}) for k in kinds]
            return {"anyOf": options, **({"nullable": True} if nullable else {})}
    if kind is not None:
        if not isinstance(kind, str) or kind not in _GEMINI_TYPES:
            raise NotConvertible(f"type {kind!r}")
        out["type"] = str(kind).upper()
    for key, value in node.items():
        if key in ("type", "properties", "required", "items", "anyOf", "enum", "format"):
            continue
        if key in _GEMINI_KEEP:
            if not isinstance(value, _GEMINI_KEEP[key]) or (isinstance(value, bool) and key != "default"):
                raise NotConvertible(f"{key} value")
            out[key] = value
        elif key == "additionalProperties":
            if value not in (False, None):
                raise NotConvertible("open object (additionalProperties)")
        elif key not in _GEMINI_DROP:
            raise NotConvertible(f"keyword {key!r}")
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _GEMINI_FORMATS.get(str(kind), set()):
        out["format"] = fmt
    if "enum" in node:
        values = node["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise NotConvertible("non-string enum")
        out["enum"] = list(values)
        out.setdefault("type", "STRING")
    if "anyOf" in node:
        choices = node["anyOf"]
        if not isinstance(choices, list) or not choices:
            raise NotConvertible("anyOf")
        kept = [
            o for o in choices if not (isinstance(o, Mapping) and o.get("type") == "null" and len(o) == 1)
        ]
        nullable = nullable or len(kept) < len(choices)
        converted = [_gemini(o) for o in kept]
        if len(converted) == 1:
            out = {**converted[0], **out}
        else:
            out["anyOf"] = converted
    if "items" in node:
        out["items"] = _gemini(node["items"])
    if kind == "object" or "properties" in node:
        props = node.get("properties") or {}
        if not isinstance(props, Mapping):
            raise NotConvertible("properties")
        if not props and not top:
            raise NotConvertible("object without declared properties")
        out["type"] = "OBJECT"
        if props:
            properties = {str(name): _gemini(sub) for name, sub in props.items()}
            out["properties"] = properties
            required_raw = node.get("required") or []
            if not isinstance(required_raw, list):
                raise NotConvertible("required")
            required = [r for r in required_raw if isinstance(r, str) and r in properties]
            if required:
                out["required"] = required
    if nullable:
        out["nullable"] = True
    return out


def to_gemini_schema(schema: Mapping[str, object]) -> dict[str, object] | None:
    """A copy of a tool's JSON Schema in the form Gemini's `parameters` take, or `None`.

    Local `$ref`s are inlined; `type: [T, "null"]` and `anyOf` with `null` become `nullable`;
    `oneOf` becomes `anyOf`, `const` a one-value enum; annotation-only keywords are dropped.
    `None` when that cannot be done faithfully (recursive or remote refs, open objects, nested
    objects without properties, non-string enums, keywords Gemini lacks): the caller then sends
    the original as `parametersJsonSchema`. An object without properties at the top level gives
    `{}` (a function without parameters).
    """
    try:
        result = _gemini(resolve_local_refs(schema), top=True)
    except (NotConvertible, RecursionError, TypeError):  # TypeError: a value of an unexpected shape
        return None
    if result.get("type") not in (None, "OBJECT") or "anyOf" in result:
        return None
    if not result.get("properties"):
        return {}
    return result
