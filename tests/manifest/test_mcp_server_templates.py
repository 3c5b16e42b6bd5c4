"""The URI templates of `Mcp.Resources` entries (RFC 6570 level 1: each `{var}` one path
segment): a match gives back the variables that rebuild the URI; any template and any URI are
answered (a pattern or none, a match or none) without an exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.manifest._mcp_server_reads import template_pattern

_SEGMENT = st.text(
    st.characters(blacklist_characters="/{}", blacklist_categories=("Cs",)), min_size=1, max_size=8
)
_LITERAL = st.text(st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=8)


def test_level_one_templates_match_one_segment_per_variable() -> None:
    pattern = template_pattern("notes://by-name/{name}/v{version}")
    assert pattern is not None
    match = pattern.fullmatch("notes://by-name/todo/v2")
    assert match is not None and match.groupdict() == {"name": "todo", "version": "2"}
    assert pattern.fullmatch("notes://by-name/a/b/v2") is None  # a variable is one segment
    assert pattern.fullmatch("notes://by-name/.*/v2") is not None  # literal text, no regex
    assert template_pattern("notes://{+path}") is None  # other levels match nothing
    assert template_pattern("q{?x}") is None
    assert template_pattern("{a}/{a}") is None  # a variable named twice
    assert template_pattern("open{") is None


@settings(max_examples=200, deadline=None)
@given(literals=st.lists(_LITERAL, min_size=1, max_size=4), values=st.lists(_SEGMENT, min_size=3, max_size=3))
def test_a_match_rebuilds_the_uri(literals: list[str], values: list[str]) -> None:
    names = ["a", "b", "c"][: len(literals) - 1]
    template = literals[0] + "".join(f"{{{n}}}{lit}" for n, lit in zip(names, literals[1:], strict=True))
    uri = literals[0] + "".join(f"{v}{lit}" for v, lit in zip(values, literals[1:], strict=False))
    pattern = template_pattern(template)
    assert pattern is not None
    match = pattern.fullmatch(uri)
    assert match is not None, (template, uri)  # the values themselves are one assignment
    rebuilt = literals[0] + "".join(f"{match[n]}{lit}" for n, lit in zip(names, literals[1:], strict=True))
    assert rebuilt == uri and all("/" not in match[n] for n in names)


@settings(max_examples=200, deadline=None)
@given(template=st.text(max_size=40), uri=st.text(max_size=80))
def test_any_template_and_uri_are_answered(template: str, uri: str) -> None:
    pattern = template_pattern(template)
    if pattern is not None:
        pattern.fullmatch(uri)
