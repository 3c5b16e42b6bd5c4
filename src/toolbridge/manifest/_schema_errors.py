"""Turning pydantic's validation errors into the analyzer's plain findings.

- `plain_errors` drops pydantic's union member labels from error locations and folds the errors
  of one union into one expectation (`must be a string, an integer or a number, not a list`),
  never one finding per member;
- `model_at`, `aliases_of`: the model at a location and its field names (for suggestions);
- `type_name`, `TYPE_WORDS`: values and expected types in words.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ._secrets import Secret
from ._yaml import Ref

__all__ = ["TYPE_WORDS", "aliases_of", "model_at", "plain_errors", "type_name"]


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside `annotation` (through Optional, list, dict, Annotated)."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if origin is typing.Annotated:
        return _unwrap_model(typing.get_args(annotation)[0])
    if origin in (list, dict, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _unwrap_model(arg)
            if found is not None:
                return found
    return None


def model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model whose fields the location `loc` (a document path) is in, if any."""
    current: type[BaseModel] | None = model
    key_next = False  # the next part is a key of a mapping of models, not a field
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int) or key_next:
            key_next = False
            continue
        by_alias = {(f.alias or n): f for n, f in current.model_fields.items()}
        info = by_alias.get(part)
        if info is None:
            return None
        key_next = typing.get_origin(_strip(info.annotation)) is dict
        current = _unwrap_model(info.annotation)
    return current


def aliases_of(model: type[BaseModel]) -> list[str]:
    """The names a document may write for `model`'s fields (and any further keys it takes)."""
    names = [(f.alias or n) for n, f in model.model_fields.items() if not (f.alias or n).startswith("x-")]
    return names + sorted(getattr(model, "EXTRA_KEYS", ()))


TYPE_WORDS = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "float_type": "a number",
    "float_parsing": "a number",
}


def _union_members(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members if len(members) > 1 else []
    return []


def _strip(annotation: Any) -> Any:
    """`annotation` without `Annotated` and without an `Optional`'s None."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def _member_for(members: list[Any], label: str) -> Any:
    """The union member pydantic labels `label` in an error's location (`str`, a tag, a model)."""
    for member in members:
        if typing.get_origin(member) is typing.Annotated:
            for meta in typing.get_args(member)[1:]:
                if getattr(meta, "tag", None) == label:
                    return member
        bare = _strip(member)
        name = getattr(bare, "__name__", None) or getattr(typing.get_origin(bare), "__name__", None)
        if name and (label == name or label.lower().startswith(f"{name.lower()}[")):
            return member
    return None


def _union_split(
    model: type[BaseModel], loc: Sequence[str | int]
) -> tuple[tuple[str | int, ...], int | None]:
    """`loc` without pydantic's union member labels, and how long the path to the innermost union is.

    `("variables", "x", "default", "str")` of a `str | int | ...` field is `(("variables", "x",
    "default"), 3)`: the last part names which member failed, not a place in the document.
    """
    annotation: Any = model
    clean: list[str | int] = []
    union_at: int | None = None
    for part in loc:
        annotation = _strip(annotation) if annotation is not None else None
        members = _union_members(annotation) if annotation is not None else []
        if part == "[key]":
            clean.append(part)
            annotation = None
            continue
        if members and isinstance(part, str):
            union_at = len(clean)
            annotation = _member_for(members, part)
            continue
        clean.append(part)
        if annotation is None:
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            by_alias = {(f.alias or n): f for n, f in annotation.model_fields.items()}
            info = by_alias.get(part) if isinstance(part, str) else None
            annotation = info.annotation if info is not None else None
            continue
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin in (list, tuple, set, frozenset) and args:
            annotation = args[0]
        elif origin is dict and len(args) == 2:
            annotation = args[1]
        else:
            annotation = None
    return tuple(clean), union_at


def plain_errors(model: type[BaseModel], errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic's errors with one plain expectation per union, never one finding per union member.

    A value that fits none of a union's members gives pydantic one error per member (`default.str
    must be a string`, `default.int must be an integer`, …). When every member refused the value's
    type, that is one `union_type` error naming the accepted types together; when some member took
    the type but refused something inside, only those (more specific) errors are kept.
    """
    out: list[dict[str, Any]] = []
    groups: dict[tuple[str | int, ...], list[dict[str, Any]]] = {}
    for err in errors:
        clean, union_at = _union_split(model, err["loc"])
        fixed = {**err, "loc": clean}
        if union_at is None:
            out.append(fixed)
            continue
        key = clean[:union_at]
        if key not in groups:
            groups[key] = []
            out.append({"type": "__group__", "loc": key})
        groups[key].append(fixed)
    result: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for err in out:
        if err["type"] != "__group__":
            result.append(err)
            continue
        members = groups[err["loc"]]
        specific = [m for m in members if m["type"] not in TYPE_WORDS or len(m["loc"]) > len(err["loc"])]
        if specific:
            for m in specific:
                mark = (tuple(m["loc"]), m["type"], m.get("msg"))
                if mark not in seen:
                    seen.add(mark)
                    result.append(m)
            continue
        words: list[str] = []
        for m in members:
            word = TYPE_WORDS[m["type"]]
            if word not in words:
                words.append(word)
        expected = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        result.append(
            {"type": "union_type", "loc": err["loc"], "msg": expected, "input": members[0].get("input")}
        )
    return result


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Ref):
        return "a !ref"
    if isinstance(value, Secret):
        return "a secret"
    return type(value).__name__
