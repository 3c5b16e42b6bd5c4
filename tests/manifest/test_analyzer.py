"""The analyzer: every finding, each at its exact 1-based line and column."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from toolbridge.manifest import Diagnostic, check_manifest

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "manifests" / "seed-assistant.yaml"

BASE = """\
kind: Ai.ScriptedModel
metadata: { name: Script }
turns:
  - text: hello
---
kind: Mcp.StdioClient
metadata: { name: Files }
command: node
---
kind: AiMcp.ToolProvider
metadata: { name: FileTools }
client: !ref Files
---
"""
# BASE is 13 lines long; documents appended to it start on line 14.


def diagnostics(tmp_path: Path, text: str, **kwargs: object) -> list[Diagnostic]:
    """The analyzer's findings on `text` written as a manifest file (no environment unless given)."""
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return check_manifest(path, env=kwargs.pop("env", {}), **kwargs).diagnostics  # type: ignore[arg-type]


def found(tmp_path: Path, text: str, **kwargs: object) -> list[tuple[str, int, int]]:
    return [(d.code, d.line, d.column) for d in diagnostics(tmp_path, textwrap.dedent(text), **kwargs)]


def test_seed_manifest_passes_with_the_key_set() -> None:
    report = check_manifest(SEED, env={"OPENAI_API_KEY": "sk-test"})
    assert report.ok, [d.format() for d in report.diagnostics]
    assert report.diagnostics == []


def test_seed_manifest_fails_without_the_key() -> None:
    report = check_manifest(SEED, env={})
    assert not report.ok
    [diag] = report.diagnostics
    assert (diag.code, diag.line, diag.column) == ("ERR_MANIFEST_SECRET_UNRESOLVED", 4, 9)
    assert "secret openaiApiKey cannot be resolved" in diag.message
    assert diag.format().startswith(f"{SEED}:4:9: error ERR_MANIFEST_SECRET_UNRESOLVED: secret openaiApiKey")


def test_clean_manifest(tmp_path: Path) -> None:
    assert found(tmp_path, BASE) == []


def test_yaml_syntax_error(tmp_path: Path) -> None:
    assert found(tmp_path, "kind: Ai.Agent\nmetadata: { name: A\nmodel: x\n") == [("ERR_MANIFEST_YAML", 3, 6)]


def test_yaml_bad_indentation(tmp_path: Path) -> None:
    text = "kind: Mcp.StdioClient\nmetadata:\n  name: A\n command: node\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_YAML", 4, 2)]


def test_unknown_tag_and_duplicate_key(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: { name: B }\ncommand: !env node\ncommand: x\n"
    assert found(tmp_path, text) == [
        ("ERR_MANIFEST_UNSUPPORTED", 16, 10),
        ("ERR_MANIFEST_DUPLICATE_KEY", 17, 1),
    ]


def test_unknown_kind(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClent\nmetadata: { name: B }\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_UNKNOWN_KIND", 14, 7)
    assert "did you mean Mcp.StdioClient?" in d.message


def test_missing_kind_and_not_a_mapping(tmp_path: Path) -> None:
    text = BASE + "metadata: { name: B }\n---\n- a list\n"
    assert found(tmp_path, text) == [
        ("ERR_MANIFEST_MISSING_FIELD", 14, 1),
        ("ERR_MANIFEST_WRONG_TYPE", 16, 1),
    ]


def test_missing_required_field(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: { name: B }\nargs: [x]\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_MISSING_FIELD", 14, 1)
    assert d.message == "Mcp.StdioClient B: missing required field `command`"


def test_missing_nested_field_points_at_its_mapping(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Ai.Agent\n"
        "metadata: { name: A }\n"
        "model: !ref Script\n"
        "toolProviders:\n"
        "  - prefix: fs_\n"  # line 18: the binding lacks `provider`
    )
    assert found(tmp_path, text) == [("ERR_MANIFEST_MISSING_FIELD", 18, 5)]


def test_missing_metadata_name(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: {}\ncommand: node\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_MISSING_FIELD", 15, 11)]


def test_unknown_field_points_at_the_key(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: { name: B }\ncommand: node\n  \nargz: [x]\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_UNKNOWN_FIELD", 18, 1)
    assert "unknown field `argz`; did you mean `args`?" in d.message


def test_unknown_nested_field(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Ai.Agent\n"
        "metadata: { name: A }\n"
        "model: !ref Script\n"
        "toolProviders:\n"
        "  - provider: !ref FileTools\n"
        "    prefx: fs_\n"
    )
    assert found(tmp_path, text) == [("ERR_MANIFEST_UNKNOWN_FIELD", 19, 5)]


def test_wrong_type_points_at_the_value(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Ai.Agent\n"
        "metadata: { name: A }\n"
        "model: !ref Script\n"
        "maxSteps: lots\n"
        "toolProviders:\n"
        "  - provider: !ref FileTools\n"
        "    include: read_file\n"
    )
    diags = diagnostics(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in diags] == [
        ("ERR_MANIFEST_WRONG_TYPE", 17, 11),
        ("ERR_MANIFEST_WRONG_TYPE", 20, 14),
    ]
    assert diags[0].message == "Ai.Agent A: `maxSteps` must be an integer, not a string"
    assert diags[1].message == "Ai.Agent A: `toolProviders[0].include` must be a list, not a string"


def test_invalid_value(tmp_path: Path) -> None:
    text = (
        BASE + "kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref Script\nonToolError: ignore\nmaxSteps: 0\n"
    )
    assert found(tmp_path, text) == [
        ("ERR_MANIFEST_INVALID_VALUE", 17, 14),
        ("ERR_MANIFEST_INVALID_VALUE", 18, 11),
    ]


def test_ref_form_plain_string_in_a_ref_slot(tmp_path: Path) -> None:
    text = BASE + "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: Files\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_REF_FORM", 16, 9)]


def test_ref_where_no_ref_is_taken(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: { name: B }\ncommand: !ref Files\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_REF_FORM", 16, 10)]


def test_dangling_reference(tmp_path: Path) -> None:
    text = BASE + "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: !ref Filez\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_DANGLING_REF", 16, 9)
    assert "did you mean Files?" in d.message


def test_reference_to_the_wrong_kind(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Ai.Agent\n"
        "metadata: { name: A }\n"
        "model: !ref Files\n"  # a client, not a model
        "toolProviders:\n"
        "  - provider: !ref Script\n"  # a model, not a provider
    )
    diags = diagnostics(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in diags] == [
        ("ERR_MANIFEST_REF_KIND", 16, 8),
        ("ERR_MANIFEST_REF_KIND", 18, 15),
    ]
    assert diags[0].message == (
        "`!ref Files` is a Mcp.StdioClient, but this field takes AiOpenai.OpenaiModel or "
        "AiAnthropic.AnthropicModel or AiGoogle.GeminiModel or Ai.ScriptedModel"
    )


def test_references_across_kinds_all_accepted(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        '{"tools": [{"name": "add_user", "inputSchema": {"type": "object"}, '
        '"task": {"instructions": [{"action": "wait", "params": {"ms": 1}}]}}]}'
    )
    text = BASE + textwrap.dedent(
        """\
        kind: Mcp.HttpClient
        metadata: { name: Web }
        url: http://127.0.0.1:1/mcp
        ---
        kind: AiMcp.ToolProvider
        metadata: { name: WebTools }
        client: !ref Web
        ---
        kind: Tasks.ToolSet
        metadata: { name: Tasks }
        file: tools.json
        ---
        kind: Ai.Tools
        metadata: { name: Native }
        functions: ["os.path:basename"]
        ---
        kind: AiMcp.Tool
        metadata: { name: WriteFile }
        id: fs.write
        version: "1"
        description: Write a file.
        remoteName: write_file
        client: !ref Files
        input: { type: object }
        output: { type: object }
        effects: write
        capabilities: [fs.write]
        ---
        kind: Runtime
        metadata: { name: Rt }
        permissions: { allow: ["model:scripted"] }
        limits: { maxToolCalls: 3 }
        ---
        kind: Ai.Agent
        metadata: { name: A }
        model: !ref Script
        toolProviders:
          - { provider: !ref FileTools, prefix: fs_ }
          - { provider: !ref WebTools }
          - { provider: !ref Tasks, include: [add_user] }
          - { provider: !ref Native, include: [basename] }
        tools: [!ref WriteFile]
        """
    )
    assert found(tmp_path, text) == []


def test_duplicate_names(tmp_path: Path) -> None:
    text = BASE + "kind: Mcp.StdioClient\nmetadata: { name: Files }\ncommand: node\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_DUPLICATE_NAME", 15, 19)
    assert "a Mcp.StdioClient on line 7 already has it" in d.message


def test_reference_cycle(tmp_path: Path) -> None:
    text = (
        "kind: AiMcp.ToolProvider\n"
        "metadata: { name: P1 }\n"
        "client: !ref P2\n"
        "---\n"
        "kind: AiMcp.ToolProvider\n"
        "metadata: { name: P2 }\n"
        "client: !ref P1\n"
    )
    diags = diagnostics(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in diags] == [
        ("ERR_MANIFEST_REF_KIND", 3, 9),
        ("ERR_MANIFEST_REF_KIND", 7, 9),
        ("ERR_MANIFEST_REF_CYCLE", 7, 9),
    ]
    assert diags[2].message == "reference cycle: P1 -> P2 -> P1"


def test_self_reference_is_a_cycle(tmp_path: Path) -> None:
    text = "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: !ref P\n"
    assert ("ERR_MANIFEST_REF_CYCLE", 3, 9) in found(tmp_path, text)


def test_unresolved_secret_in_a_nested_value(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Mcp.HttpClient\n"
        "metadata: { name: Web }\n"
        "url: http://127.0.0.1:1/mcp\n"
        "headers:\n"
        '  Authorization: "Bearer ${{ secrets.webToken }}"\n'
    )
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_SECRET_UNRESOLVED", 18, 18)
    assert "secret webToken cannot be resolved" in d.message
    assert "$WEB_TOKEN" in d.message


def test_secret_in_a_field_that_takes_none(tmp_path: Path) -> None:
    text = BASE + 'kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref Script\nsystem: "${{ secrets.x }}"\n'
    assert found(tmp_path, text, secrets={"x": "value-1"}) == [("ERR_MANIFEST_SECRET_PLACEMENT", 17, 9)]


def test_secret_nested_in_free_json(tmp_path: Path) -> None:
    text = BASE + (
        "kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref Script\n"
        'options:\n  nested:\n    deeper: "${{ secrets.x }}"\n'
    )
    assert found(tmp_path, text, secrets={"x": "value-1"}) == [("ERR_MANIFEST_SECRET_PLACEMENT", 19, 13)]


def test_unknown_expression(tmp_path: Path) -> None:
    text = BASE + 'kind: Mcp.StdioClient\nmetadata: { name: B }\ncommand: "${{ vars.node }}"\n'
    assert found(tmp_path, text) == [("ERR_MANIFEST_EXPRESSION", 16, 10)]


def test_toolset_file_that_fails_to_load(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"tools": [ {"name": "x",, } ]}')
    text = BASE + "kind: Tasks.ToolSet\nmetadata: { name: T }\nfile: bad.json\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_TOOLSET_LOAD", 16, 7)
    assert "bad.json:1:26: the tools file is not valid JSON" in d.message


def test_toolset_file_missing(tmp_path: Path) -> None:
    text = BASE + "kind: Tasks.ToolSet\nmetadata: { name: T }\nfile: nowhere.json\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_TOOLSET_LOAD", 16, 7)]


def test_toolset_needs_exactly_one_source(tmp_path: Path) -> None:
    text = BASE + "kind: Tasks.ToolSet\nmetadata: { name: T }\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_INVALID_VALUE", 14, 1)]


def test_include_names_a_tool_the_set_does_not_have(tmp_path: Path) -> None:
    text = BASE + textwrap.dedent(
        """\
        kind: Tasks.ToolSet
        metadata: { name: T }
        tools:
          - name: add_user
            description: Add a user.
            inputSchema: { type: object }
            task: { instructions: [ { action: wait, params: { ms: 1 } } ] }
        ---
        kind: Ai.Agent
        metadata: { name: A }
        model: !ref Script
        toolProviders:
          - provider: !ref T
            include: [add_user, add_usr]
            exclude: [nothing]
        """
    )
    diags = diagnostics(tmp_path, text)
    assert [(d.code, d.line, d.column, d.severity) for d in diags] == [
        ("ERR_MANIFEST_UNKNOWN_TOOL", 27, 25, "error"),
        ("ERR_MANIFEST_UNKNOWN_TOOL", 28, 15, "warning"),
    ]
    assert "include names 'add_usr', which T does not have; did you mean add_user?" in diags[0].message


def test_ai_tools_import_failure(tmp_path: Path) -> None:
    text = (
        BASE
        + 'kind: Ai.Tools\nmetadata: { name: N }\nfunctions:\n  - "os.path:basename"\n  - "no_such_mod:f"\n'
    )
    assert found(tmp_path, text) == [("ERR_MANIFEST_IMPORT", 18, 5)]


def test_two_runtimes(tmp_path: Path) -> None:
    text = BASE + "kind: Runtime\nmetadata: { name: R1 }\n---\nkind: Runtime\nmetadata: { name: R2 }\n"
    assert found(tmp_path, text) == [("ERR_MANIFEST_MULTIPLE_RUNTIMES", 17, 7)]


def test_unreadable_file(tmp_path: Path) -> None:
    report = check_manifest(tmp_path / "missing.yaml")
    assert [(d.code, d.line, d.column) for d in report.diagnostics] == [("ERR_MANIFEST_FILE", 1, 1)]


def test_several_files_and_json_shape(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(BASE)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Nope\nmetadata: { name: X }\n")
    report = check_manifest([good, bad], env={})
    data = report.to_dict()
    assert data["ok"] is False and data["errorCount"] == 1
    assert data["diagnostics"] == [
        {
            "file": str(bad),
            "line": 1,
            "column": 7,
            "severity": "error",
            "code": "ERR_MANIFEST_UNKNOWN_KIND",
            "message": data["diagnostics"][0]["message"],
        }
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: Secrets\nmetadata: { name: S }\nenv: { token: [x] }\n", [("ERR_MANIFEST_WRONG_TYPE", 3, 15)]),
        ("kind: Runtime\nmetadata: { name: R }\nprofile: durable\n", [("ERR_MANIFEST_INVALID_VALUE", 1, 1)]),
        (
            "kind: Runtime\nmetadata: { name: R }\nlimits: { maxSteps: -1 }\n",
            [("ERR_MANIFEST_INVALID_VALUE", 3, 21)],
        ),
        (
            "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ {} ]\n",
            [("ERR_MANIFEST_INVALID_VALUE", 3, 10)],
        ),
        (
            "kind: Ai.ScriptedModel\nmetadata: { name: 1M }\nturns: [ text: x ]\n",
            [("ERR_MANIFEST_INVALID_VALUE", 2, 19)],
        ),
    ],
)
def test_more_schema_findings(tmp_path: Path, text: str, expected: list[tuple[str, int, int]]) -> None:
    assert found(tmp_path, text) == expected


def test_inline_task_tool_error_points_into_the_tool(tmp_path: Path) -> None:
    text = BASE + textwrap.dedent(
        """\
        kind: Tasks.ToolSet
        metadata: { name: T }
        tools:
          - name: add_user
            description: Add a user.
            inputSchema: { type: object }
            task:
              instructions:
                - action: wait
                  params: { ms: 1 }
                - action: teleport
                  params: {}
        """
    )
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_TOOLSET_LOAD", 24, 19)
    assert "tools[0].task.instructions[1].action: unknown action 'teleport'" in d.message
    assert "ERR_TASK_UNKNOWN_ACTION" in d.message


def test_task_file_error_is_reported_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(
        '{"tools": [{"name": "a", "description": "d", "inputSchema": {"type": "object"},'
        ' "task": {"instructions": [{"action": "goto", "params": {"url": "{{nowhere}}"}}]}}]}'
    )
    text = BASE + "kind: Tasks.ToolSet\nmetadata: { name: T }\nfile: tools.json\n"
    [d] = diagnostics(tmp_path, text)
    assert (d.code, d.line, d.column) == ("ERR_MANIFEST_TOOLSET_LOAD", 16, 7)
    assert "tools.json: tools[0].task.instructions[0].params.url: placeholder {{nowhere}}" in d.message


def test_declared_tool_schemas_are_checked(tmp_path: Path) -> None:
    text = BASE + textwrap.dedent(
        """\
        kind: AiMcp.Tool
        metadata: { name: W }
        id: fs.write
        version: "1"
        description: Write.
        client: !ref Files
        input:
          type: object
          properties:
            path: { type: 12 }
        output: { type: string }
        effects: write
        capabilities: []
        """
    )
    diags = diagnostics(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in diags] == [
        ("ERR_MANIFEST_INVALID_VALUE", 23, 19),
        ("ERR_MANIFEST_INVALID_VALUE", 24, 9),
    ]
    assert "`input.properties.path.type` is not a valid JSON Schema" in diags[0].message
