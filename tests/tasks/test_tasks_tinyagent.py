"""TinyAgent fidelity without a browser (issue 18): the parser API as TinyAgent behaves, keys
TinyAgent ignores as warnings (`--strict` errors), TinyAgent's retired file formats rewritten with
one deprecation warning (`--strict`: refused with one precise message), and actions of your own
from the command line or a manifest.

The tool files here are written for these tests, the way TinyAgent's files are written; they are
not TinyAgent's. `scripts/check_tinyagent_upstream.py` cross-checks TinyAgent's own files when a
copy of them is at hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.tasks import McpToolParser, TaskOutcome, TaskRequest, TaskToolSet, TaskWarning, compile_tools
from toolbridge.tasks.actions._registry import registry_with
from toolbridge.tasks.actions.tinyagent import ApiConfirmParams, _matches


def instr(action: str, **params: Any) -> dict[str, Any]:
    return {"action": action, "params": params}


def form_tool(**extra: Any) -> dict[str, Any]:
    return {
        "name": "addUserByUI",
        "description": "Add a user through the form",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "date": {"type": "string"}},
        },
        "task": {"instructions": [instr("input", selector=".user-input input", value="{{name}}")]},
        **extra,
    }


# --- the parser API -------------------------------------------------------------------------------


def test_replace_fills_params_in_place() -> None:
    instruction: dict[str, Any] = {"action": "input", "params": {"selector": "#n", "value": "{{name}}"}}
    held = instruction["params"]
    returned = McpToolParser.replace_instruction_param_value(instruction, "name", "Ada")
    assert returned is instruction and instruction["params"] is held
    assert held == {"selector": "#n", "value": "Ada"}


async def _never(request: TaskRequest, progress: Any = None) -> TaskOutcome:
    raise AssertionError("not called")


def test_a_custom_placeholder_function_sets_the_syntax() -> None:
    parser = McpToolParser(_never, placeholder=lambda key: "<%" + key + "%>")
    instruction: dict[str, Any] = {
        "action": "input",
        "params": {"value": "<%a%> {{a}} \\<%a%>", "n": "<%n%>"},
    }
    parser.replace_instruction_param_value(instruction, "a", "A")
    parser.replace_instruction_param_value(instruction, "n", 3)
    assert instruction["params"] == {"value": "A {{a}} <%a%>", "n": 3}
    # the tools this parser loads use it too: {{x}} is plain text there, <%x%> a placeholder
    tool = {
        "name": "t",
        "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "task": {"instructions": [instr("result", value="<%who%> and {{who}}")]},
    }
    [extracted] = parser.extract_all_tools({"tools": [tool]})
    assert extracted.tool.syntax.prefix == "<%"
    with pytest.raises(ConfigError) as info:
        parser.extract_tool({**tool, "task": {"instructions": [instr("result", value="<%nobody%>")]}})
    assert info.value.code == "ERR_TASK_PLACEHOLDER"


def test_a_placeholder_function_must_wrap_the_key() -> None:
    for bad in (lambda key: key.upper(), lambda key: "x", lambda key: 1 / 0):
        with pytest.raises(ConfigError) as info:
            McpToolParser(_never, placeholder=bad)  # type: ignore[arg-type]
        assert info.value.code == "ERR_CONFIG"


def test_a_raising_do_task_gives_the_error_envelope() -> None:
    async def boom(request: TaskRequest, progress: Any = None) -> TaskOutcome:
        raise KeyError("scheduler state lost")

    async def tinyagent_style(request: TaskRequest, progress: Any = None) -> Any:
        return {"status": "error", "index": 2, "error": {"message": "step 3 failed"}}

    tool = {"name": "t", "inputSchema": {"type": "object"}, "task": {"instructions": [instr("wait", ms=1)]}}

    async def call(do_task: Any) -> dict[str, Any]:
        [extracted] = McpToolParser(do_task).extract_all_tools({"tools": [tool]})
        result: dict[str, Any] = await extracted.cb({})
        return result

    result = anyio.run(call, boom)
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "error"
    assert (
        result["structuredContent"]["error"]["message"]
        == "the task runner failed: KeyError: 'scheduler state lost'"
    )
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    envelope = anyio.run(call, tinyagent_style)["structuredContent"]
    assert envelope == {"status": "error", "index": 2, "error": {"message": "step 3 failed"}}


# --- keys TinyAgent ignores -------------------------------------------------------------------------


def test_ignored_keys_are_warnings_and_strict_makes_them_errors() -> None:
    tool = form_tool(type="ui")
    tool["task"] = {"id": "123", "instructions": [instr("input", selector="#n", value="{{name}}", tip="hi")]}
    warnings: list[Any] = []
    [compiled] = compile_tools({"tools": [tool]}, warnings=warnings)
    assert [w.path for w in warnings] == [
        "tools[0].type",
        "tools[0].task.id",
        "tools[0].task.instructions[0].params.tip",
    ]
    assert all(w.code == "ERR_TASK_IGNORED_KEY" for w in warnings)
    assert "is ignored (as TinyAgent does)" in str(warnings[2]) and "'input'" in str(warnings[2])
    assert compiled.instructions[0].params == {"selector": "#n", "value": "{{name}}"}  # tip dropped
    with pytest.raises(ConfigError) as info:
        compile_tools({"tools": [tool]}, strict=True)
    assert info.value.code == "ERR_TASK_IGNORED_KEY"
    assert [p["path"] for p in info.value.details["problems"]] == [w.path for w in warnings]


def test_near_misses_of_known_keys_stay_errors() -> None:
    tool = form_tool()
    tool["task"]["instructions"][0]["catchInstrution"] = instr("click", selector="#x")
    tool["task"]["instructions"].append(instr("click", selectr="#y"))
    with pytest.raises(ConfigError) as info:
        compile_tools({"tools": [tool]})
    text = str(info.value)
    assert "did you mean 'catchInstruction'" in text and "addUserByUI" in text


def test_inputschema_without_type_reads_as_an_object_schema() -> None:
    tool = form_tool()
    tool["inputSchema"] = {"properties": {"name": {"type": "string"}}}
    [compiled] = compile_tools({"tools": [tool]})
    assert compiled.input_schema["type"] == "object"


def test_serve_tasks_check_lists_warnings_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = form_tool()
    tool["task"]["id"] = "123"
    path = tmp_path / "mcp-tool.json"
    path.write_text(json.dumps({"tools": [tool]}), encoding="utf-8")
    assert main(["serve-tasks", str(path), "--check"]) == 0
    captured = capsys.readouterr()
    assert "1 task tools ok: addUserByUI (1 warnings)" in captured.out
    assert (
        "warning" in captured.err
        and "tools[0].task.id" in captured.err
        and "ERR_TASK_IGNORED_KEY" in captured.err
    )
    assert main(["serve-tasks", str(path), "--check", "--strict"]) == 1
    err = capsys.readouterr().err
    assert "ERR_TASK_IGNORED_KEY" in err and "tools[0].task.id" in err and err.count("\n") == 1


# --- TinyAgent's retired formats -------------------------------------------------------------------


LEGACY_CASES = [
    ([form_tool()], "a top-level JSON array of tools"),
    (
        {
            "addUser": {
                "name": "addUser",
                "inputSchema": {"id": "1", "instructions": [instr("click", selector="#a")]},
            }
        },
        "tools keyed by name",
    ),
    ({"tools": [{**form_tool(), "inputSchema": {"name": {"type": "string"}}}]}, "inputSchema as a bare map"),
    (
        {"tools": [{**form_tool(), "inputSchema": [{"name": "name", "type": "string"}]}]},
        "a list of {name, type}",
    ),
    (
        {"tools": [{**form_tool(), "task": {"instructions": [instr("vue_push", to="/users")]}}]},
        "the action 'vue_push' (TinyAgent renamed it 'vueRouterPush')",
    ),
]


@pytest.mark.parametrize(("data", "feature"), LEGACY_CASES)
def test_retired_formats_load_rewritten_with_one_deprecation_warning(data: Any, feature: str) -> None:
    warnings: list[TaskWarning] = []
    tools = compile_tools(data, warnings=warnings)
    legacy = [w for w in warnings if w.code == "ERR_TASK_LEGACY"]
    assert len(legacy) == 1, warnings
    message = str(legacy[0])
    assert message.startswith("deprecated: TinyAgent's early mock-server format") and feature in message
    assert "\n" not in message
    assert [t.name for t in tools] == ["addUserByUI"] or [t.name for t in tools] == ["addUser"]


@pytest.mark.parametrize(("data", "feature"), LEGACY_CASES)
def test_retired_formats_under_strict_fail_with_one_message_naming_the_feature(
    data: Any, feature: str
) -> None:
    with pytest.raises(ConfigError) as info:
        compile_tools(data, strict=True)
    assert info.value.code == "ERR_TASK_LEGACY"
    message = str(info.value)
    assert "TinyAgent itself no longer reads" in message and feature in message and "\n" not in message


def test_the_rewrite_is_mechanical_and_loses_nothing() -> None:
    old = {
        "addUser": {
            "name": "addUser",
            "description": "Add a user",
            "params": [
                {"name": "name", "type": "string", "description": "who"},
                {"name": "email", "type": "string"},
            ],
            "inputSchema": {
                "id": "123",
                "instructions": [
                    {**instr("vue_push", to="/users"), "catchInstruction": instr("vue_push", to="/home")},
                    instr("input", selector="#name", value="{{name}}"),
                ],
            },
        }
    }
    current = {
        "tools": [
            {
                "name": "addUser",
                "description": "Add a user",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "who"},
                        "email": {"type": "string"},
                    },
                },
                "task": {
                    "instructions": [
                        {
                            **instr("vueRouterPush", to="/users"),
                            "catchInstruction": instr("vueRouterPush", to="/home"),
                        },
                        instr("input", selector="#name", value="{{name}}"),
                    ]
                },
            }
        ]
    }
    (rewritten,) = compile_tools(old)
    (written,) = compile_tools(current)
    assert rewritten.mcp_definition() == written.mcp_definition()
    assert rewritten.instructions == written.instructions
    assert "vue_push" in json.dumps(old)  # the caller's data is not changed


def test_a_tool_without_a_task_is_refused_as_an_app_side_function(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {
                "jumpToAddUser": {
                    "name": "jumpToAddUser",
                    "task": {"instructions": [instr("vue_push", to="/a")]},
                },
                "registerUser": {
                    "name": "registerUser",
                    "type": "operation",
                    "inputSchema": [{"name": "n", "type": "string"}],
                },
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(path)
    assert info.value.code == "ERR_TASK_INVALID"
    message = info.value.message
    assert "tool 'registerUser' has no task" in message and "app-side function" in message
    assert "TinyAgent type 'operation'" in message and "jumpToAddUser" not in message


def test_a_file_with_several_retired_features_names_each_once(tmp_path: Path) -> None:
    tools = [
        {**form_tool(), "inputSchema": {"name": {"type": "string"}}},
        {**form_tool(), "name": "other", "task": {"instructions": [instr("vue_push", to="/a")]}},
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(path, strict=True)
    message = info.value.message
    assert message.startswith("old.json: this tool file uses TinyAgent's early mock-server format")
    assert message.count("top-level JSON array") == 1 and message.count("bare map") == 1
    assert "vue_push" in message
    loaded = TaskToolSet.from_file(path)
    (legacy,) = [w for w in loaded.warnings if w.code == "ERR_TASK_LEGACY"]
    assert str(legacy).count("top-level JSON array") == 1 and str(legacy).count("bare map") == 1
    assert loaded.names == ["addUserByUI", "other"]


def test_serve_tasks_check_prints_the_deprecation_and_strict_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps([form_tool()]), encoding="utf-8")
    assert main(["serve-tasks", str(path), "--check"]) == 0
    err = capsys.readouterr().err
    assert err.count("deprecated: TinyAgent's early mock-server format") == 1 and "ERR_TASK_LEGACY" in err
    assert main(["serve-tasks", str(path), "--check", "--strict"]) == 1
    assert "ERR_TASK_LEGACY" in capsys.readouterr().err


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.sampled_from(["name", "vue_push", "instructions", "x"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                ["name", "params", "inputSchema", "task", "instructions", "action", "type", "tools"]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(data=_JSON)
def test_any_json_loads_or_fails_with_one_task_error(data: Any) -> None:
    try:
        compile_tools(data)
    except ConfigError as exc:
        assert exc.code.startswith("ERR_TASK_") and "Traceback" not in exc.message


# --- actions of your own ------------------------------------------------------------------------------


ACTIONS_PY = """
from toolbridge.tasks import ActionContext, ActionParams, ActionSpec


class ShoutParams(ActionParams):
    text: str


async def shout(params: ShoutParams, ctx: ActionContext) -> dict[str, str]:
    return {"text": params.text.upper() + "!"}


def register(registry):
    registry.register("shout", shout)


SPECS = [ActionSpec("whisper", shout, ShoutParams)]
"""


def _shout_tools(action: str = "shout") -> dict[str, Any]:
    return {
        "tools": [
            {
                "name": "loud",
                "inputSchema": {"type": "object", "properties": {"t": {"type": "string"}}},
                "task": {"instructions": [instr(action, text="{{t}}")]},
            }
        ]
    }


def test_actions_from_a_file_and_attribute(tmp_path: Path) -> None:
    (tmp_path / "my_actions.py").write_text(ACTIONS_PY, encoding="utf-8")
    registry = registry_with([f"{tmp_path / 'my_actions.py'}:register", "my_actions.py:SPECS"], tmp_path)
    assert "shout" in registry and "whisper" in registry and "goto" in registry

    async def run() -> TaskOutcome:
        async with TaskToolSet(_shout_tools(), registry=registry) as ts:
            return await ts.run("loud", {"t": "hey"})

    assert anyio.run(run).envelope["result"] == {"text": "HEY!"}


def test_serve_tasks_actions_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "my_actions.py").write_text(ACTIONS_PY, encoding="utf-8")
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(_shout_tools()), encoding="utf-8")
    assert main(["serve-tasks", str(path), "--check"]) == 1
    assert "unknown action 'shout'" in capsys.readouterr().err
    actions = f"{tmp_path / 'my_actions.py'}:register"
    assert main(["serve-tasks", str(path), "--check", "--actions", actions]) == 0
    assert "1 task tools ok: loud" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("ref", "said"),
    [
        ("no_such_module_xyz", "importing 'no_such_module_xyz' failed: ModuleNotFoundError"),
        ("missing.py", "no file"),
        ("my_actions.py:nothing", "has no attribute 'nothing'"),
        ("my_actions.py:ShoutParams", "must name a module, a callable register(registry)"),
        (":x", "give MODULE or MODULE:ATTR"),
    ],
)
def test_bad_actions_refs_fail_with_one_line(tmp_path: Path, ref: str, said: str) -> None:
    (tmp_path / "my_actions.py").write_text(ACTIONS_PY, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        registry_with([ref], tmp_path)
    assert info.value.code == "ERR_TASK_ACTION_PLUGIN"
    assert said in info.value.message and "\n" not in info.value.message


# --- apiConfirm matching --------------------------------------------------------------------------


def test_api_confirm_matches_as_tinyagent() -> None:
    def match(url: str, got: str, sent: str = "GET", **kw: Any) -> bool:
        return _matches(ApiConfirmParams(url=url, **kw), sent, got)

    assert match("/api/users/:id", "http://h/api/users/7?x=1")
    assert not match("/api/users/:id", "http://h/api/users/7/roles")
    assert match("/api/*", "http://h/api/users/7/roles")
    assert match("/api/users", "http://h/api/users/")
    assert match("/api/users", "http://h/api/users", "post", method="POST")
    assert not match("/api/users", "http://h/api/users", "GET", method="POST")
    assert match("/api/users", "http://h/api/users?source=form&x=1", query={"source": "form"})
    assert not match("/api/users", "http://h/api/users?source=other", query={"source": "form"})
    assert match("http://h:1/api/users", "http://h:1/api/users")
    assert not match("http://h:1/api/users", "http://evil:1/api/users")
    assert not match("/api/v1.0", "http://h/api/v1x0")  # a literal segment is literal


# --- `actions:` on a manifest's Tasks.ToolSet ---------------------------------------------------------


MANIFEST = """\
kind: Tasks.ToolSet
metadata: { name: Loud }
tools:
  - name: loud
    inputSchema: { type: object, properties: { t: { type: string } } }
    task:
      instructions:
        - { action: shout, params: { text: "{{t}}" } }
"""


def test_manifest_tool_set_with_actions_of_your_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolbridge.manifest import load_manifest

    (tmp_path / "my_actions.py").write_text(ACTIONS_PY, encoding="utf-8")
    without = tmp_path / "without.yaml"
    without.write_text(MANIFEST, encoding="utf-8")
    assert main(["check", str(without)]) == 1
    assert "unknown action 'shout'" in capsys.readouterr().out
    path = tmp_path / "with.yaml"
    path.write_text(
        MANIFEST
        + "actions: [my_actions.py:register]\nbrowserAllow: ['127.0.0.1']\nstartUrl: http://127.0.0.1:9/\n",
        encoding="utf-8",
    )
    assert main(["check", str(path)]) == 0, capsys.readouterr()

    async def run() -> TaskOutcome:
        manifest = load_manifest(path)
        async with manifest.open() as live:
            tool_set = await live.build("Loud")
            assert isinstance(tool_set, TaskToolSet)
            assert tool_set.services.browser.navigation.refusal("http://127.0.0.1:5/") is None
            return await tool_set.run("loud", {"t": "ok"})

    assert anyio.run(run).envelope["result"] == {"text": "OK!"}
