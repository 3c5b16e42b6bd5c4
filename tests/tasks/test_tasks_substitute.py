"""Substitution: types kept, nesting, interpolation, defaults, omitted arguments, escapes, references."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolbridge.errors import ConfigError
from toolbridge.tasks import McpToolParser, compile_tools
from toolbridge.tasks._substitute import (
    LEAVE,
    OMIT,
    MissingValue,
    PathError,
    get_path,
    iter_placeholders,
    parse_path,
    render,
)


def resolver(values: dict[str, Any], missing: tuple[str, ...] = ()) -> Any:
    def resolve(name: str) -> Any:
        if name in missing:
            raise MissingValue(name)
        return values.get(name, LEAVE)

    return resolve


def test_whole_value_keeps_json_types() -> None:
    values = {"n": 3, "f": 1.5, "b": False, "nul": None, "obj": {"a": [1, 2]}, "arr": [1, "x"]}
    params = {k: "{{" + k + "}}" for k in values}
    out = render(params, resolver(values))
    assert out == values
    assert isinstance(out["n"], int) and out["b"] is False and out["nul"] is None
    out["obj"]["a"].append(3)
    assert values["obj"]["a"] == [1, 2], "a whole value is a copy, not shared"


def test_spaces_inside_braces_are_allowed() -> None:
    assert render({"v": "{{ n }}"}, resolver({"n": 7})) == {"v": 7}


def test_interpolation_renders_json_text_never_none_or_undefined() -> None:
    values = {"s": "Ada", "n": 42, "f": 2.5, "t": True, "nul": None, "obj": {"k": "v"}, "arr": [1, 2]}
    out = render(
        {"v": "s={{s}} n={{n}} f={{f}} t={{t}} nul={{nul}} obj={{obj}} arr={{arr}}"}, resolver(values)
    )
    assert out == {"v": 's=Ada n=42 f=2.5 t=true nul=null obj={"k":"v"} arr=[1,2]'}
    assert "None" not in out["v"] and "undefined" not in out["v"]


def test_every_occurrence_is_replaced_and_dollar_patterns_are_plain_text() -> None:
    out = render({"v": "{{x}}-{{x}}"}, resolver({"x": "$&$1"}))
    assert out == {"v": "$&$1-$&$1"}


def test_nested_objects_and_arrays_are_visited() -> None:
    template = {"a": {"b": ["{{n}}", {"c": "id-{{n}}"}]}, "keys": {"{{n}}": "key kept"}}
    out = render(template, resolver({"n": 5}))
    assert out == {"a": {"b": [5, {"c": "id-5"}]}, "keys": {"{{n}}": "key kept"}}
    assert template["a"]["b"][0] == "{{n}}", "the template is not modified"


def test_escaped_braces_are_literal() -> None:
    out = render({"v": r"\{{name}} is {{name}}", "w": r"\{{name}}"}, resolver({"name": "Ada"}))
    assert out == {"v": "{{name}} is Ada", "w": "{{name}}"}


def test_missing_whole_value_is_left_out_of_objects_and_arrays() -> None:
    out = render({"keep": 1, "gone": "{{x}}", "list": ["{{x}}", 2]}, resolver({}, missing=("x",)))
    assert out == {"keep": 1, "list": [2]}
    assert render("{{x}}", resolver({}, missing=("x",))) is OMIT


def test_missing_interpolated_value_raises_with_its_path() -> None:
    with pytest.raises(MissingValue) as info:
        render({"a": {"b": "hello {{x}}"}}, resolver({}, missing=("x",)), "params")
    assert info.value.name == "x"
    assert info.value.path == "params.a.b"


def test_iter_placeholders_reports_kind_and_path() -> None:
    found = list(iter_placeholders({"a": "{{x}}", "b": ["pre {{y}} {{z.w[0]}}"], "c": r"\{{no}}"}, "p"))
    assert [(p.name, p.whole, p.path) for p in found] == [
        ("x", True, "p.a"),
        ("y", False, "p.b[0]"),
        ("z.w[0]", False, "p.b[0]"),
    ]


def test_paths_walk_objects_and_arrays() -> None:
    value = {"rows": [{"name": "Ada"}, {"name": "Bob"}], "0": "zero"}
    assert parse_path(".rows[1].name") == ["rows", 1, "name"]
    assert get_path(value, parse_path(".rows[1].name"), "s") == "Bob"
    assert get_path(value, parse_path(".rows.0.name"), "s") == "Ada"
    assert get_path(value, parse_path(".0"), "s") == "zero"
    with pytest.raises(PathError, match=r"s\.rows\[0\] has no 'age'"):
        get_path(value, parse_path(".rows[0].age"), "s")
    with pytest.raises(ValueError):
        parse_path(".rows[x]")


# --- McpToolParser.replace_instruction_param_value (the seed's API) ----------------------------


def test_replace_instruction_param_value_as_in_the_seed() -> None:
    instruction = {"action": "register", "params": {"name": "{{name}}"}}
    returned = McpToolParser.replace_instruction_param_value(instruction, "name", "queryTool")
    assert instruction == {"action": "register", "params": {"name": "queryTool"}}
    assert returned is instruction


def test_replace_instruction_param_value_keeps_other_names_and_types() -> None:
    instruction: dict[str, Any] = {
        "action": "x",
        "params": {"n": "{{n}}", "text": "{{n}} of {{total}}", "deep": [{"v": "{{n}}"}]},
        "catchInstruction": {"action": "y", "params": {"n": "{{n}}"}},
    }
    McpToolParser.replace_instruction_param_value(instruction, "n", 3)
    assert instruction["params"] == {"n": 3, "text": "3 of {{total}}", "deep": [{"v": 3}]}
    assert instruction["catchInstruction"]["params"] == {"n": 3}
    McpToolParser.replace_instruction_param_value(instruction, "total", 9)
    assert instruction["params"]["text"] == "3 of 9"


def test_replace_instruction_param_value_rejects_non_object_params() -> None:
    with pytest.raises(ConfigError) as info:
        McpToolParser.replace_instruction_param_value({"action": "x", "params": [1]}, "n", 1)
    assert info.value.code == "ERR_TASK_INVALID"


# --- arguments of a compiled tool: validation, defaults, omitted values ---------------------------


def _tool(
    properties: dict[str, Any], instructions: list[dict[str, Any]], required: list[str] | None = None
) -> Any:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    data = {"tools": [{"name": "t", "inputSchema": schema, "task": {"instructions": instructions}}]}
    return compile_tools(copy.deepcopy(data))[0]


def test_defaults_fill_omitted_arguments() -> None:
    tool = _tool(
        {"ms": {"type": "integer", "default": 5}, "label": {"type": "string", "default": "x"}},
        [
            {"action": "wait", "params": {"ms": "{{ms}}"}},
            {"action": "result", "params": {"value": "{{label}}!"}},
        ],
    )
    args = tool.prepare_arguments({})
    assert args == {"ms": 5, "label": "x"}
    assert tool.render_params(tool.instructions[0], "i0", args, {}) == {"ms": 5}
    assert tool.render_params(tool.instructions[1], "i1", args, {}) == {"value": "x!"}


def test_omitted_optional_argument_drops_a_whole_value_param() -> None:
    tool = _tool(
        {"selector": {"type": "string"}, "text": {"type": "string"}},
        [{"action": "clickByText", "params": {"text": "{{text}}", "selector": "{{selector}}"}}],
        required=["text"],
    )
    args = tool.prepare_arguments({"text": "Save"})
    assert tool.render_params(tool.instructions[0], "i0", args, {}) == {"text": "Save"}
    tool.check_ready(args)  # selector is optional for clickByText: fine


def test_omitted_argument_needed_inside_a_text_fails_before_anything_runs() -> None:
    tool = _tool(
        {"name": {"type": "string"}},
        [
            {"action": "wait", "params": {"ms": 1}},
            {"action": "result", "params": {"value": "Hello {{name}}"}},
        ],
    )
    with pytest.raises(ConfigError) as info:
        tool.check_ready(tool.prepare_arguments({}))
    assert info.value.code == "ERR_TASK_ARGUMENT_MISSING"
    assert "task.instructions[1].params.value" in str(info.value)
    assert "'name'" in str(info.value)


def test_omitted_argument_for_a_required_param_fails_before_anything_runs() -> None:
    tool = _tool({"ms": {"type": "integer"}}, [{"action": "wait", "params": {"ms": "{{ms}}"}}])
    with pytest.raises(ConfigError) as info:
        tool.check_ready(tool.prepare_arguments({}))
    assert info.value.code == "ERR_TASK_ARGUMENT_MISSING"
    assert "argument 'ms' was not given" in str(info.value)
    assert "task.instructions[0].params.ms (wait) needs it" in str(info.value)


def test_arguments_are_validated_against_the_input_schema() -> None:
    tool = _tool(
        {"ms": {"type": "integer", "minimum": 0}, "name": {"type": "string"}},
        [{"action": "wait", "params": {"ms": "{{ms}}"}}],
        required=["ms"],
    )
    with pytest.raises(ConfigError) as info:
        tool.prepare_arguments({"name": 3})
    text = str(info.value)
    assert info.value.code == "ERR_TASK_ARGUMENTS"
    assert "'ms' is a required property" in text and "arguments.name" in text
    with pytest.raises(ConfigError, match=r"arguments\.ms: -1 is less than the minimum"):
        tool.prepare_arguments({"ms": -1})


def test_substituted_value_of_the_wrong_type_is_caught_before_running() -> None:
    tool = _tool({"ms": {}}, [{"action": "wait", "params": {"ms": "{{ms}}"}}])
    with pytest.raises(ConfigError) as info:
        tool.check_ready(tool.prepare_arguments({"ms": "soon"}))
    assert info.value.code == "ERR_TASK_PARAMS"
    assert "task.instructions[0].params.ms" in str(info.value)


def test_references_take_values_from_earlier_results() -> None:
    tool = _tool(
        {"who": {"type": "string"}},
        [
            {"action": "result", "id": "first", "params": {"value": {"rows": [{"n": 1}, {"n": 2}]}}},
            {
                "action": "result",
                "params": {"value": {"n": "{{first.rows[1].n}}", "t": "{{who}} has {{first.rows}}"}},
            },
        ],
    )
    args = tool.prepare_arguments({"who": "Ada"})
    results = {"first": {"rows": [{"n": 1}, {"n": 2}]}}
    out = tool.render_params(tool.instructions[1], "i1", args, results)
    assert out == {"value": {"n": 2, "t": 'Ada has [{"n":1},{"n":2}]'}}
    # before the task runs, references stay in place (and the instruction is not type-checked)
    assert tool.render_params(tool.instructions[1], "i1", args, None)["value"]["n"] == "{{first.rows[1].n}}"
    with pytest.raises(PathError, match=r"first\.rows"):
        tool.render_params(tool.instructions[1], "i1", args, {"first": {"rows": []}})


def test_argument_values_are_never_substituted_again() -> None:
    tool = _tool(
        {"name": {"type": "string"}},
        [
            {"action": "result", "id": "secret", "params": {"value": "s3cr3t"}},
            {"action": "result", "params": {"value": "hello {{name}}"}},
        ],
    )
    args = tool.prepare_arguments({"name": "{{secret}}"})
    out = tool.render_params(tool.instructions[1], "i1", args, {"secret": "s3cr3t"})
    assert out == {"value": "hello {{secret}}"}
