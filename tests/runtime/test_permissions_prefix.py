"""Prefix grants (`tool:<prefix>*`): what they grant, and what stays exact."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge.runtime import Permissions, ToolGrantNeeds, tool_prefix


def test_a_prefix_grant_grants_the_tools_under_its_prefix_only() -> None:
    perms = Permissions(["tool:gh_*", "effect:read"])
    assert perms.prefixes == ("gh_",)
    assert perms.missing(["tool:gh_create_issue", "effect:read"]) == []
    assert perms.missing(["tool:gl_create_issue", "tool:gh", "tool:GH_x"]) == [
        "tool:gl_create_issue",
        "tool:gh",
        "tool:GH_x",
    ]
    assert (
        perms.first_missing(ToolGrantNeeds("gh_merge", "write", ())) == "effect:write"
    )  # effects stay exact
    assert perms.first_missing(ToolGrantNeeds("gh_merge", "read", ("payments:refund",))) == "payments:refund"
    assert perms.granted_by("tool:gh_merge") == "tool:gh_*"
    assert perms.granted_by("effect:read") == "effect:read"
    assert perms.granted_by("tool:other") is None
    assert not perms.has("tool:gh_merge")  # `has` is the exact list


@pytest.mark.parametrize("grant", ["tool:*", "tool:a*b*", "tool:**", "effect:*", "model:*", "tool:gh_"])
def test_other_stars_are_plain_grant_names(grant: str) -> None:
    assert tool_prefix(grant) is None
    perms = Permissions([grant])
    assert perms.prefixes == ()
    assert perms.missing(["tool:anything", "effect:write", "model:scripted"]) == [
        "tool:anything",
        "effect:write",
        "model:scripted",
    ]


@given(st.text(min_size=1, max_size=20).filter(lambda p: "*" not in p), st.text(max_size=20))
def test_prefix_matching_is_startswith(prefix: str, rest: str) -> None:
    perms = Permissions([f"tool:{prefix}*"])
    assert perms.missing([f"tool:{prefix}{rest}"]) == []
    other = f"tool:{rest}"
    assert (perms.missing([other]) == []) == rest.startswith(prefix)
