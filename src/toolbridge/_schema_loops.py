"""Finding `$ref` loops in a JSON Schema before anything is validated against it.

A schema may refer to itself: `{"properties": {"child": {"$ref": "#"}}}` describes a tree, and
validating a value against it ends, because each `$ref` is reached one level deeper into the
value. A loop of in-place applicators (`$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `if` / `then` /
`else`, `dependentSchemas`, ...) that never steps into the value never ends: `{"$ref": "#"}`, or
`$defs.a -> $defs.b -> $defs.a`, makes a validator recurse until Python's stack gives out, at the
first call. `ref_loop(schema)` finds such a loop statically, so a tool with one is refused when it
is loaded.

Only references inside the schema document are followed (`#`, `#/json/pointer`, `#anchor`, and
`$id`-named subschemas); a reference to anything else is left to the validator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from ._bounded import MAX_DEPTH, depth_exceeds

__all__ = ["ref_loop", "schema_hazard"]

# Keywords whose subschemas apply to the same value (in place): a loop through them never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")

# Keywords whose subschemas apply to parts of the value (or hold definitions): walked to find all
# subschemas, but not edges of a loop.
_CHILD_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "contentSchema",
)
_CHILD_LIST = ("prefixItems", "items")
_CHILD_MAP = ("properties", "patternProperties", "$defs", "definitions")

Pointer = tuple[str, ...]


def _subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[Pointer, Any, bool]]:
    """(relative pointer, subschema, in place?) for each subschema of `schema`."""
    for key in _IN_PLACE_ONE:
        if key in schema:
            yield (key,), schema[key], True
    for key in _IN_PLACE_LIST:
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                yield (key, str(i)), sub, True
    for key in _IN_PLACE_MAP:
        if isinstance(schema.get(key), Mapping):
            for name, sub in schema[key].items():
                yield (key, str(name)), sub, True
    for key in _CHILD_ONE:
        if key in schema:
            yield (key,), schema[key], False
    for key in _CHILD_LIST:
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                yield (key, str(i)), sub, False
    for key in _CHILD_MAP:
        if isinstance(schema.get(key), Mapping):
            for name, sub in schema[key].items():
                yield (key, str(name)), sub, False


def _pointer_text(pointer: Pointer) -> str:
    return "#" + "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in pointer)


class _Index:
    """Every subschema of a document by pointer, with `$id`s, `$anchor`s and in-place edges."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.nodes: dict[Pointer, Mapping[str, Any]] = {}
        self.resource: dict[Pointer, Pointer] = {}  # pointer -> pointer of its enclosing `$id` resource
        self.ids: dict[str, Pointer] = {}
        self.anchors: dict[tuple[Pointer, str], Pointer] = {}
        self.in_place: dict[Pointer, list[Pointer]] = {}
        stack: list[tuple[Pointer, Any, Pointer]] = [((), root, ())]
        while stack:
            pointer, node, resource = stack.pop()
            if not isinstance(node, Mapping) or pointer in self.nodes:
                continue
            if pointer and isinstance(node.get("$id"), str):
                resource = pointer
                self.ids[node["$id"].rstrip("#")] = pointer
            self.nodes[pointer] = node
            self.resource[pointer] = resource
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self.anchors[(resource, node[key])] = pointer
            edges: list[Pointer] = []
            for rel, sub, in_place in _subschemas(node):
                child = (*pointer, *rel)
                if in_place:
                    edges.append(child)
                stack.append((child, sub, resource))
            self.in_place[pointer] = edges

    def resolve(self, pointer: Pointer, ref: str) -> Pointer | None:
        base, _, fragment = ref.partition("#")
        if base:
            found = self.ids.get(base)
            if found is None:
                return None
            resource = found
        else:
            resource = self.resource[pointer]
        if not fragment:
            return resource
        if not fragment.startswith("/"):
            return self.anchors.get((resource, fragment))
        parts = [unquote(p).replace("~1", "/").replace("~0", "~") for p in fragment[1:].split("/")]
        target = (*resource, *parts)
        return target if target in self.nodes else None


def ref_loop(schema: Any) -> str | None:
    """The first loop of in-place references in `schema`, as `#/a -> #/b -> #/a`; None when there is none."""
    if not isinstance(schema, Mapping):
        return None
    index = _Index(schema)
    edges: dict[Pointer, list[Pointer]] = {}
    for pointer, node in index.nodes.items():
        out = list(index.in_place[pointer])
        for key in _REFS:
            ref = node.get(key)
            if isinstance(ref, str):
                target = index.resolve(pointer, ref)
                if target is not None:
                    out.append(target)
        edges[pointer] = out
    state: dict[Pointer, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path: list[Pointer] = [start]
        state[start] = 1
        iters = [iter(edges[start])]
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                iters.pop()
                state[path.pop()] = 2
                continue
            if state.get(nxt) == 1:
                loop = [*path[path.index(nxt) :], nxt]
                return " -> ".join(_pointer_text(p) for p in loop)
            if nxt not in state and nxt in edges:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(edges[nxt]))
    return None


def schema_hazard(schema: Any) -> str | None:
    """Why validating against `schema` could not end, or None: too deep a nesting, or a `$ref` loop.

    Check this before `check_schema` (which recurses into the schema) and before validating.
    """
    if depth_exceeds(schema, MAX_DEPTH):
        return f"nests deeper than {MAX_DEPTH} levels"
    loop = ref_loop(schema)
    if loop is not None:
        return f"has a $ref loop that never reaches a value: {loop}"
    return None
