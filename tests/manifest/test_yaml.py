"""The position-keeping YAML loader."""

from __future__ import annotations

import pytest

from toolbridge.manifest._yaml import Pos, Ref, YamlSyntaxError, parse_documents


def test_positions_of_keys_and_values() -> None:
    [doc] = parse_documents("a: 1\nb:\n  - x\n  - { c: !ref Name }\n")
    assert doc.data == {"a": 1, "b": ["x", {"c": Ref("Name")}]}
    assert doc.keys[("a",)] == Pos(1, 1)
    assert doc.values[("a",)] == Pos(1, 4)
    assert doc.values[("b", 1)] == Pos(4, 5)
    assert doc.keys[("b", 1, "c")] == Pos(4, 7)
    ref = doc.data["b"][1]["c"]
    assert ref.pos == Pos(4, 10)
    assert doc.value_pos(("b", 1, "missing")) == Pos(4, 5)  # nearest recorded ancestor


def test_multiple_documents_and_empty_ones() -> None:
    docs = parse_documents("---\n# only a comment\n---\na: 1\n---\n---\nb: 2\n")
    assert [d.data for d in docs if d.data is not None] == [{"a": 1}, {"b": 2}]
    assert [d.pos for d in docs if d.data is not None] == [Pos(4, 1), Pos(7, 1)]


def test_anchors_aliases_and_merge_keys() -> None:
    [doc] = parse_documents("base: &b { x: 1 }\nother:\n  <<: *b\n  y: 2\ncopy: *b\n")
    assert doc.data["other"] == {"x": 1, "y": 2}
    assert doc.data["copy"] == {"x": 1}


@pytest.mark.parametrize(
    ("text", "code", "pos"),
    [
        ("a: !ref\n", "ERR_MANIFEST_REF_FORM", Pos(1, 4)),
        ("a: !ref [x]\n", "ERR_MANIFEST_REF_FORM", Pos(1, 4)),
        ("a: !!python/name:os.system x\n", "ERR_MANIFEST_YAML", Pos(1, 4)),
        ("a: 1\na: 2\n", "ERR_MANIFEST_DUPLICATE_KEY", Pos(2, 1)),
        ("? [1, 2]\n: x\n", "ERR_MANIFEST_WRONG_TYPE", Pos(1, 3)),
    ],
)
def test_problems(text: str, code: str, pos: Pos) -> None:
    [doc] = parse_documents(text)
    assert [(p.code, p.pos) for p in doc.problems] == [(code, pos)]


def test_syntax_error_position_and_no_snippet() -> None:
    with pytest.raises(YamlSyntaxError) as info:
        parse_documents('a: 1\nb: "sk-secret-value\n')
    assert info.value.pos.line >= 2
    assert "sk-secret-value" not in info.value.message


def test_tab_indentation_is_a_syntax_error() -> None:
    with pytest.raises(YamlSyntaxError) as info:
        parse_documents("a:\n\t- x\n")
    assert info.value.pos == Pos(2, 1)
