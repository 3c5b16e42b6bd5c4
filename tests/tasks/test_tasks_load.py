"""Load-time validation (every bad-input case names the tool, the path and the code) and the registry."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolbridge.errors import ConfigError, ToolError
from toolbridge.tasks import (
    ActionContext,
    ActionParams,
    ActionRegistry,
    McpToolParser,
    TaskToolSet,
    action,
    compile_tools,
    default_registry,
    task_output_schema,
)
from toolbridge.tasks.actions.browser import find_chromium


def tool(instructions: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "add_user",
        "description": "d",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "task": {"instructions": instructions},
    }
    data.update(extra)
    return data


def load_error(tools: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_tools(tools if isinstance(tools, dict) else {"tools": tools})
    return info.value


OK = {"action": "click", "params": {"selector": "#save"}}


@pytest.mark.parametrize(
    ("tools", "code", "path"),
    [
        ([tool([])], "ERR_TASK_INVALID", "tools[0].task.instructions"),
        ([{"name": "x", "inputSchema": {"type": "object"}}], "ERR_TASK_INVALID", "tools[0].task"),
        ([tool([OK], inputSchemaa={})], "ERR_TASK_INVALID", "tools[0].inputSchemaa"),
        (
            [tool([{"action": "click", "params": {"selector": "#a"}, "catchInstrution": OK}])],
            "ERR_TASK_INVALID",
            "tools[0].task.instructions[0].catchInstrution",
        ),
        ([tool([{"params": {}}])], "ERR_TASK_INVALID", "tools[0].task.instructions[0].action"),
        (
            [tool([OK, {"action": "click", "params": "#a"}])],
            "ERR_TASK_INVALID",
            "tools[0].task.instructions[1].params",
        ),
        (
            [tool([{"action": "click", "id": "1bad", "params": {"selector": "#a"}}])],
            "ERR_TASK_INVALID",
            "tools[0].task.instructions[0].id",
        ),
        (
            [tool([OK, {"action": "clik", "params": {"selector": "#a"}}])],
            "ERR_TASK_UNKNOWN_ACTION",
            "tools[0].task.instructions[1].action",
        ),
        (
            [tool([OK, OK, {"action": "click", "params": {"selectr": "#a"}}])],
            "ERR_TASK_PARAMS",
            "tools[0].task.instructions[2].params.selectr",
        ),
        (
            [tool([{"action": "click", "params": {}}])],
            "ERR_TASK_PARAMS",
            "tools[0].task.instructions[0].params.selector",
        ),
        (
            [tool([{"action": "wait", "params": {"ms": "soon"}}])],
            "ERR_TASK_PARAMS",
            "tools[0].task.instructions[0].params.ms",
        ),
        (
            [tool([{"action": "wait", "params": {"ms": -5}}])],
            "ERR_TASK_PARAMS",
            "tools[0].task.instructions[0].params.ms",
        ),
        (
            [tool([{"action": "input", "params": {"selector": "#n", "value": "{{nme}}"}}])],
            "ERR_TASK_PLACEHOLDER",
            "tools[0].task.instructions[0].params.value",
        ),
        (
            [tool([{"action": "result", "params": {"value": {"deep": ["x {{who}}"]}}}])],
            "ERR_TASK_PLACEHOLDER",
            "tools[0].task.instructions[0].params.value.deep[0]",
        ),
        (
            [
                tool(
                    [
                        {"action": "result", "params": {"value": "{{later.text}}"}},
                        {"action": "getText", "id": "later", "params": {"selector": "#a"}},
                    ]
                )
            ],
            "ERR_TASK_PLACEHOLDER",
            "tools[0].task.instructions[0].params.value",
        ),
        (
            [
                tool(
                    [
                        {
                            "action": "click",
                            "params": {"selector": "#a"},
                            "catchInstruction": {"action": "nope", "params": {}},
                        }
                    ]
                )
            ],
            "ERR_TASK_UNKNOWN_ACTION",
            "tools[0].task.instructions[0].catchInstruction.action",
        ),
        (
            [
                tool(
                    [
                        {
                            "action": "click",
                            "params": {"selector": "#a"},
                            "catchInstruction": {"action": "click", "params": {"selector": "{{zzz}}"}},
                        }
                    ]
                )
            ],
            "ERR_TASK_PLACEHOLDER",
            "tools[0].task.instructions[0].catchInstruction.params.selector",
        ),
        (
            [
                tool(
                    [
                        {
                            "action": "click",
                            "params": {"selector": "#a"},
                            "catchInstruction": {"action": "click", "id": "c", "params": {"selector": "#b"}},
                        }
                    ]
                )
            ],
            "ERR_TASK_INVALID",
            "tools[0].task.instructions[0].catchInstruction.id",
        ),
        (
            [tool([OK], inputSchema={"type": "object", "properties": {"n": {"type": "nonsense"}}})],
            "ERR_TASK_SCHEMA",
            "tools[0].inputSchema.properties.n.type",
        ),
        ([tool([OK], inputSchema={"type": "string"})], "ERR_TASK_SCHEMA", "tools[0].inputSchema.type"),
        ([tool([OK], outputSchema={"type": 5})], "ERR_TASK_SCHEMA", "tools[0].outputSchema.type"),
        ([tool([OK]), tool([OK])], "ERR_TASK_DUPLICATE", "tools[1].name"),
        (
            [
                tool(
                    [
                        {"action": "getText", "id": "a", "params": {"selector": "#a"}},
                        {"action": "getText", "id": "a", "params": {"selector": "#b"}},
                    ]
                )
            ],
            "ERR_TASK_DUPLICATE",
            "tools[0].task.instructions[1].id",
        ),
    ],
)
def test_bad_tool_files_fail_at_load_naming_path_and_code(tools: Any, code: str, path: str) -> None:
    err = load_error(tools)
    assert err.code == code, str(err)
    assert path in str(err), str(err)
    if isinstance(tools, list) and tools and "name" in tools[0]:
        assert "'add_user'" in str(err) or "'x'" in str(err), "the tool is named"


def test_placeholder_error_lists_the_properties_and_suggests_a_fix() -> None:
    err = load_error([tool([{"action": "input", "params": {"selector": "#n", "value": "{{nme}}"}}])])
    assert "{{nme}}" in str(err) and "properties: name" in str(err)


def test_unknown_action_suggests_close_names() -> None:
    err = load_error([tool([{"action": "clik", "params": {"selector": "#a"}}])])
    assert "did you mean 'click'" in str(err)


def test_every_problem_of_every_tool_is_reported_at_once() -> None:
    err = load_error(
        [
            tool([{"action": "nope", "params": {}}]),
            {**tool([{"action": "click", "params": {"selector": "{{missing}}"}}]), "name": "second"},
        ]
    )
    paths = [p["path"] for p in err.details["problems"]]
    assert "tools[0].task.instructions[0].action" in paths
    assert "tools[1].task.instructions[0].params.selector" in paths


def test_a_placeholder_param_is_checked_for_its_key_only() -> None:
    (t,) = compile_tools({"tools": [tool([{"action": "wait", "params": {"ms": "{{name}}"}}])]})
    assert t.name == "add_user"


def test_property_and_id_of_the_same_name_are_refused() -> None:
    err = load_error([tool([{"action": "getText", "id": "name", "params": {"selector": "#a"}}])])
    assert err.code == "ERR_TASK_DUPLICATE" and "'name'" in str(err)


def test_not_an_object_file() -> None:
    assert load_error({"tool": []}).code == "ERR_TASK_INVALID"
    with pytest.raises(ConfigError) as info:
        compile_tools([])
    assert info.value.code == "ERR_TASK_INVALID"


def test_from_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(tmp_path / "missing.json")
    assert info.value.code == "ERR_TASK_FILE"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(bad)
    assert info.value.code == "ERR_TASK_FILE" and "bad.json:1:2:" in str(info.value)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"tools": [tool([{"action": "nope", "params": {}}])]}), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(wrong)
    assert info.value.code == "ERR_TASK_UNKNOWN_ACTION" and "wrong.json" in str(info.value)


# --- the extracted MCP tools ---------------------------------------------------------------------------


async def _never(request: Any, progress: Any = None) -> Any:
    raise AssertionError("not called")


def test_extract_tool_follows_the_mcp_tool_standard() -> None:
    parser = McpToolParser(_never)
    extracted = parser.extract_tool(
        tool([OK], title="Add a user", annotations={"readOnlyHint": False}, outputSchema={"type": "object"})
    )
    definition = extracted.definition()
    assert definition["name"] == "add_user"
    assert definition["title"] == "Add a user"
    assert definition["inputSchema"]["properties"] == {"name": {"type": "string"}}
    assert definition["outputSchema"] == parser.get_task_output_schema({"type": "object"})
    assert definition["annotations"] == {"readOnlyHint": False}
    assert "task" not in definition
    import mcp_types

    mcp_types.Tool.model_validate(definition)  # a valid MCP tool


def test_extract_all_tools_and_the_output_schema() -> None:
    parser = McpToolParser(_never)
    tools = parser.extract_all_tools({"tools": [tool([OK]), {**tool([OK]), "name": "other"}]})
    assert [t.name for t in tools] == ["add_user", "other"]
    schema = parser.get_task_output_schema()
    assert schema["properties"]["status"]["enum"] == ["success", "error", "partial completed"]
    assert schema["required"] == ["status", "index"]
    assert schema == task_output_schema()
    import jsonschema  # type: ignore[import-untyped]

    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"status": "partial completed", "index": 2, "error": {"message": "m"}}, schema)


# --- the registry ------------------------------------------------------------------------------------------


class EchoParams(ActionParams):
    text: str
    times: int = 1


def test_register_infers_the_params_model_from_the_annotation() -> None:
    registry = ActionRegistry()

    @action("echo", registry=registry)
    async def echo(params: EchoParams, ctx: ActionContext) -> str:
        """Repeat a text."""
        return params.text * params.times

    spec = registry.get("echo")
    assert spec is not None and spec.params is EchoParams and spec.description == "Repeat a text."
    (t,) = compile_tools(
        {"tools": [tool([{"action": "echo", "params": {"text": "{{name}}", "times": 2}}])]}, registry
    )
    assert t.instructions[0].action == "echo"
    err = load_error_with(registry, [tool([{"action": "echo", "params": {"times": 2}}])])
    assert err.code == "ERR_TASK_PARAMS" and "params.text" in str(err)


def load_error_with(registry: ActionRegistry, tools: list[dict[str, Any]]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_tools({"tools": tools}, registry)
    return info.value


def test_registration_errors() -> None:
    registry = ActionRegistry()

    async def no_annotation(params, ctx):  # type: ignore[no-untyped-def]
        return None

    with pytest.raises(ConfigError) as info:
        registry.register("x", no_annotation)
    assert info.value.code == "ERR_TASK_ACTION_DEFINITION"

    def not_async(params: EchoParams, ctx: ActionContext) -> None:
        return None

    with pytest.raises(ConfigError) as info:
        registry.register("x", not_async)  # type: ignore[arg-type]
    assert info.value.code == "ERR_TASK_ACTION_DEFINITION"

    class Plain(BaseModel):
        a: int

    async def ok(params: Plain, ctx: ActionContext) -> None:
        return None

    with pytest.raises(ConfigError, match="pass params=Model") as info:
        registry.register("x", ok)  # a local class: the string annotation cannot be resolved
    assert info.value.code == "ERR_TASK_ACTION_DEFINITION"
    registry.register("x", ok, Plain)
    with pytest.raises(ConfigError) as info:
        registry.register("x", ok, Plain)
    assert info.value.code == "ERR_TASK_DUPLICATE"
    registry.register("x", ok, Plain, replace=True)
    assert registry.names() == ["x"]


def test_default_registry_has_the_builtin_actions() -> None:
    names = set(default_registry().names())
    assert {
        "goto",
        "input",
        "click",
        "doubleClick",
        "rightClick",
        "clickByText",
        "select",
        "checkbox",
        "radio",
        "submit",
        "scrollTo",
        "highlight",
        "waitFor",
        "getText",
        "screenshot",
        "goBack",
        "goForward",
        "wait",
        "http",
        "mcp",
        "result",
    } <= names


def test_entry_point_actions_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package declaring `toolbridge.actions` entry points adds actions (module, callable, bad one)."""
    (tmp_path / "tb_plugin_demo.py").write_text(
        textwrap.dedent(
            """
            from toolbridge.tasks import ActionParams, ActionSpec

            class ShoutParams(ActionParams):
                text: str

            async def shout(params: ShoutParams, ctx) -> str:
                return params.text.upper()

            def register(registry):
                registry.register("shout", shout, ShoutParams)

            whisper = ActionSpec("whisper", shout, ShoutParams, "lower")
            """
        ),
        encoding="utf-8",
    )
    dist = tmp_path / "tb_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tb-plugin-demo\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[toolbridge.actions]\nshout = tb_plugin_demo:register\nwhisper = tb_plugin_demo:whisper\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ActionRegistry()
    assert sorted(registry.load_entry_points()) == ["shout", "whisper"]
    assert {"shout", "whisper"} <= set(registry.names())

    (dist / "entry_points.txt").write_text(
        "[toolbridge.actions]\nbroken = tb_no_such_module:x\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as info:
        ActionRegistry().load_entry_points()
    assert info.value.code == "ERR_TASK_ACTION_PLUGIN" and "broken" in str(info.value)
    sys.modules.pop("tb_plugin_demo", None)


@pytest.mark.browser
def test_find_chromium(monkeypatch: pytest.MonkeyPatch, chromium: str) -> None:
    assert find_chromium(chromium) == chromium
    with pytest.raises(ToolError) as info:
        find_chromium("/nonexistent/chromium")
    assert info.value.code == "ERR_TOOL_BROWSER"
    monkeypatch.setenv("TOOLBRIDGE_CHROMIUM", "/nonexistent/env-chromium")
    with pytest.raises(ToolError, match="env-chromium"):
        find_chromium()


def test_extract_tool_structure_errors_name_the_tool() -> None:
    with pytest.raises(ConfigError) as info:
        McpToolParser(_never).extract_tool({"name": "lonely", "task": {"instructions": []}})
    assert info.value.code == "ERR_TASK_INVALID"
    assert "tool.task.instructions" in str(info.value) and "'lonely'" in str(info.value)
