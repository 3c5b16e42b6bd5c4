"""Hostile JSON inputs: task tool files, lock files, JSON Schemas and `call`'s arguments.

Non-UTF-8 bytes, nesting of 1,000 to 100,000 levels, NaN, numbers too long to convert, FIFOs and
`$ref` loops each end in one clear error with a stable code when the input is loaded, never in a
RecursionError later.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from toolbridge._bounded import InputLimitError, loads_json, read_text_file
from toolbridge._schema_loops import ref_loop, schema_hazard
from toolbridge.errors import ConfigError
from toolbridge.manifest import check_manifest
from toolbridge.pinning import read_lock
from toolbridge.runtime import define_tool
from toolbridge.tasks import TaskToolSet

ROOT = Path(__file__).resolve().parents[2]
TOOLS = json.loads((ROOT / "examples" / "tasks" / "tools.json").read_text())


def _deep(levels: int) -> str:
    return '{"tools": ' + "[" * levels + "]" * levels + "}"


HOSTILE_FILES: list[tuple[str, bytes, str]] = [
    ("latin-1", '{"tools": [{"name": "caf\xe9"}]}'.encode("latin-1"), "not UTF-8"),
    ("deep-1000", _deep(1000).encode(), "deeper than 100"),
    ("deep-100000", _deep(100_000).encode(), "deeper than 100"),
    ("nan", b'{"tools": [], "x": NaN}', "NaN"),
    ("infinity", b'{"tools": [], "x": -Infinity}', "-Infinity"),
    ("overflow", b'{"tools": [], "x": 1e999}', "overflows"),
    ("long-int", b'{"tools": [], "x": ' + b"9" * 5000 + b"}", "cannot be read"),
    ("truncated", b'{"tools": [', "not valid JSON"),
]


@pytest.mark.parametrize(("case", "data", "fragment"), HOSTILE_FILES, ids=[c[0] for c in HOSTILE_FILES])
def test_task_tool_files(tmp_path: Path, case: str, data: bytes, fragment: str) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(data)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(path)
    assert time.monotonic() - started < 5
    assert info.value.code == "ERR_TASK_FILE"
    assert fragment in info.value.message and str(path) in info.value.message
    assert "\n" not in str(info.value)


def test_the_position_of_the_problem_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(b'{\n  "tools": [],\n  "x": "caf\xe9"\n}')
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(path)
    assert f"{path}:3:12:" in info.value.message
    path.write_text('{\n  "tools": [],\n  "x": ' + "[" * 200 + "]" * 200 + "\n}")
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(path)
    assert f"{path}:3:107:" in info.value.message  # the root object is level 1: the 100th `[` opens 101


@pytest.mark.parametrize(("case", "data", "fragment"), HOSTILE_FILES, ids=[c[0] for c in HOSTILE_FILES])
def test_lock_files(tmp_path: Path, case: str, data: bytes, fragment: str) -> None:
    path = tmp_path / "tools.lock"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        read_lock(path)
    assert info.value.code == "ERR_LOCK_INVALID" and fragment in info.value.message


@pytest.mark.parametrize(("case", "data", "fragment"), HOSTILE_FILES, ids=[c[0] for c in HOSTILE_FILES])
def test_a_tool_set_file_in_a_manifest(tmp_path: Path, case: str, data: bytes, fragment: str) -> None:
    (tmp_path / "tools.json").write_bytes(data)
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: Tasks.ToolSet\nmetadata: { name: T }\nfile: tools.json\n")
    [d] = check_manifest(manifest).diagnostics
    assert d.code == "ERR_MANIFEST_TOOLSET_LOAD" and fragment in d.message


def test_a_fifo_is_not_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "tools.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        TaskToolSet.from_file(fifo)
    assert "not a regular file" in info.value.message
    with pytest.raises(ConfigError) as info:
        read_lock(fifo)
    assert "not a regular file" in info.value.message
    assert time.monotonic() - started < 2


def test_dev_zero_and_a_file_over_the_limit() -> None:
    with pytest.raises(InputLimitError) as info:
        read_text_file("/dev/zero", max_bytes=1024)
    assert info.value.reason == "not_regular"


def test_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(" " * 2000)
    with pytest.raises(InputLimitError) as info:
        read_text_file(path, max_bytes=1000)
    assert info.value.reason == "too_large" and "1000 bytes" in info.value.message
    assert read_text_file(path, max_bytes=2000) == " " * 2000


@pytest.mark.parametrize(
    "text",
    ['"[[[[{{{{"', '{"a": "NaN", "b": "Infinity", "c": "[[["}', "[" * 100 + "]" * 100, '"\\\\"'],
)
def test_text_that_only_looks_hostile_is_fine(text: str) -> None:
    assert loads_json(text) == json.loads(text)


# ----------------------------------------------------------------------------------- schema loops


def _tool_with_schema(schema: dict[str, Any]) -> dict[str, Any]:
    tool = json.loads(json.dumps(TOOLS["tools"][1]))
    tool["inputSchema"] = schema
    return {"tools": [tool]}


LOOPS: list[dict[str, Any]] = [
    {"type": "object", "$ref": "#"},
    {"type": "object", "allOf": [{"$ref": "#"}]},
    {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    },
    {
        "type": "object",
        "definitions": {"n": {"$anchor": "N", "not": {"$ref": "#N"}}},
        "properties": {"x": {"$ref": "#/definitions/n"}},
    },
    {"type": "object", "properties": {"x": {"if": {"$ref": "#/properties/x"}}}},
]


@pytest.mark.parametrize("schema", LOOPS)
def test_a_ref_loop_in_a_task_tools_input_schema_fails_at_load(schema: dict[str, Any]) -> None:
    assert ref_loop(schema) is not None
    with pytest.raises(ConfigError) as info:
        TaskToolSet(_tool_with_schema(schema))
    assert info.value.code == "ERR_TASK_SCHEMA" and "$ref loop" in info.value.message


def test_a_recursive_schema_that_describes_a_tree_is_fine() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#"}}, "name": {"type": "string"}},
    }
    assert schema_hazard(tree) is None
    assert TaskToolSet(_tool_with_schema(tree)).names == ["list_users"]


def test_a_deep_schema_fails_at_load() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(1000):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(ConfigError) as info:
        TaskToolSet(_tool_with_schema(schema))
    # the definitions' own depth bound (as for a tool file) refuses it before the schema is read
    assert info.value.code == "ERR_TASK_FILE" and "deeper than 100" in info.value.message


@pytest.mark.parametrize("schema", LOOPS[:2])
def test_a_declared_tool_with_a_ref_loop(schema: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        define_tool("t", "1", "d", schema, {"type": "object"}, "none", [], execute=lambda args: {})
    assert info.value.code == "ERR_CONFIG" and "$ref loop" in info.value.message


def test_an_aimcp_tool_with_a_ref_loop_in_a_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: Mcp.StdioClient\nmetadata: { name: C }\ncommand: node\n---\n"
        "kind: AiMcp.Tool\nmetadata: { name: T }\nclient: !ref C\nid: t\nversion: '1'\n"
        "description: d\ninput: { type: object, allOf: [ { $ref: '#' } ] }\noutput: { type: object }\n"
        "effects: none\ncapabilities: []\n"
    )
    found = [d for d in check_manifest(path).diagnostics if "$ref loop" in d.message]
    assert [(d.code, d.line) for d in found] == [("ERR_MANIFEST_INVALID_VALUE", 11)]


# --------------------------------------------------------------------- secrets files, prompts, configs


def test_a_secrets_file_alias_bomb_fails_fast(tmp_path: Path) -> None:
    from toolbridge.manifest._secrets import read_secrets_file

    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = tmp_path / "secrets.yaml"
    path.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        read_secrets_file(path)
    assert time.monotonic() - started < 5
    assert info.value.code == "ERR_MANIFEST_SECRETS_FILE" and "syntax error at line" in info.value.message
    with pytest.raises(ConfigError) as info:
        read_secrets_file("/dev/zero")
    assert "not a regular file" in info.value.message


def test_run_input_file_and_mcp_config_are_bounded(tmp_path: Path) -> None:
    import subprocess
    import sys

    toolbridge = str(Path(sys.executable).parent / "toolbridge")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: hi } ]\n---\n"
        "kind: Ai.Agent\nmetadata: { name: A }\nmodel: !ref M\n"
    )
    proc = subprocess.run(
        [toolbridge, "run", str(manifest), "--input-file", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and "not a regular file" in proc.stderr and "Traceback" not in proc.stderr
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": ' + "[" * 5000 + "]" * 5000 + "}")
    proc = subprocess.run(
        [
            toolbridge,
            "serve-tasks",
            "--check",
            "--mcp-config",
            str(config),
            str(ROOT / "examples/tasks/tools.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and "ERR_CONFIG" in proc.stderr and "deeper than 100" in proc.stderr
