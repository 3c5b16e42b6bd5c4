"""The published JSON Schema accepts the examples and rejects what the analyzer rejects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from toolbridge.manifest import manifest_json_schema
from toolbridge.manifest._kinds_run import ALL_KINDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "manifests").glob("*.yaml"))


class _EditorLoader(yaml.SafeLoader):
    """What an editor sees: `!ref Name` is a tagged string."""


_EditorLoader.add_constructor("!ref", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type]


def _docs(text: str) -> list[Any]:
    return [d for d in yaml.load_all(text, Loader=_EditorLoader) if d is not None]


def test_schema_is_valid_draft_2020_12() -> None:
    schema = manifest_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["discriminator"]["propertyName"] == "kind"
    assert len(schema["oneOf"]) == len(ALL_KINDS)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(manifest_json_schema())
    for doc in _docs(path.read_text()):
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], (doc.get("kind"), errors)


def test_unknown_field_is_rejected_by_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(manifest_json_schema())
    doc = {"kind": "Mcp.StdioClient", "metadata": {"name": "A"}, "command": "node", "argz": []}
    assert list(validator.iter_errors(doc))


def test_published_schema_file_is_current() -> None:
    """`docs/manifest.schema.json` (referenced by the examples' language-server line) is up to date.

    Regenerate it with `toolbridge schema > docs/manifest.schema.json`.
    """
    import json

    published = json.loads((ROOT / "docs" / "manifest.schema.json").read_text())
    assert published == manifest_json_schema()
