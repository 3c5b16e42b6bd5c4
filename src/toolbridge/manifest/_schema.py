"""The JSON Schema of the manifest format, generated from the kind models.

One schema covers every document of a multi-document file: the YAML language server applies a
schema to each document separately, and the schema is a `oneOf` over the kinds, chosen by the
`kind` field (a discriminator). Every kind's object is closed (`additionalProperties: false`), so
an editor flags misspelt keys as you type. Ref slots are strings carrying `x-toolbridge-ref`
(the kinds they accept); editors see `!ref Name` as a tagged string.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from ._kinds_run import ALL_KINDS

__all__ = ["SCHEMA_ID", "manifest_json_schema"]

SCHEMA_ID = "https://toolbridge.dev/schemas/manifest.json"


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one manifest document, any kind."""
    union = Union[tuple(ALL_KINDS.values())]  # type: ignore[valid-type]  # noqa: UP007
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[union, Field(discriminator="kind")])  # type: ignore[arg-type]
    schema = adapter.json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "toolbridge manifest document",
        "description": "One document of a toolbridge manifest; `kind` selects the schema.",
        **schema,
    }
