"""The schema checks every adapter runs on a tool's parameters: any JSON at all is either kept as
a checked copy or left out with one log line; nothing raises, nothing is changed in place."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.integrations._core import Converter, usable
from toolbridge.tools import ToolSpec

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
SCHEMAISH = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["object", "array", "string", 7, None]),
        "properties": st.dictionaries(st.text(max_size=6), JSON | st.just({"type": "string"}), max_size=4)
        | JSON,
        "required": st.lists(st.text(max_size=6), max_size=3) | JSON,
        "additionalProperties": st.booleans() | JSON,
        "$defs": JSON,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parameters=JSON | SCHEMAISH)
def test_any_parameters_are_kept_as_a_checked_copy_or_left_out_with_one_line(
    parameters: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    before = copy.deepcopy(parameters)
    spec = ToolSpec("tool", "d", parameters)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="toolbridge.integrations"):
        kept = usable([spec], "test", lambda s, p: p)
    assert parameters == before  # never changed in place
    lines = [r.getMessage() for r in caplog.records]
    if kept:
        (checked,) = kept
        assert checked["type"] == "object" and isinstance(checked["properties"], dict)
        assert checked is not parameters and json.loads(json.dumps(checked)) == checked
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("test: left out tool 'tool': ")
        assert "\n" not in lines[0] and len(lines[0]) < 500


def test_a_converter_checks_each_spec_once_and_logs_each_refusal_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = ToolSpec("good", "d", {"type": "object", "properties": {"x": {"type": "string"}}})
    bad = ToolSpec("bad", "d", {"type": "object", "properties": {"x": {"type": 7}}})
    seen: list[str] = []

    def convert(spec: ToolSpec, parameters: dict[str, Any]) -> str:
        seen.append(spec.name)
        return spec.name

    convert_all = Converter("where", convert)
    with caplog.at_level(logging.WARNING, logger="toolbridge.integrations"):
        for _ in range(5):
            assert convert_all([good, bad]) == ["good"]
    assert seen == ["good"]
    assert len([r for r in caplog.records if "left out tool 'bad'" in r.getMessage()]) == 1
    # a new spec object (the provider's tools changed) is converted again
    changed = ToolSpec("good", "new", {"type": "object"})
    assert convert_all([changed]) == ["good"] and seen == ["good", "good"]


def test_a_converter_that_raises_leaves_the_tool_out() -> None:
    def refuse(spec: ToolSpec, parameters: dict[str, Any]) -> str:
        raise ValueError("the framework refused it\nsecond line")

    assert usable([ToolSpec("t", "d", {"type": "object"})], "x", refuse) == []
