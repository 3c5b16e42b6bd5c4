"""The command line's surface is uniform: help, option placement and JSON keys, for every subcommand.

- every subcommand, and every action of one (`runs show`, `batch status`, `journal migrate`),
  prints its own `--help`;
- every option of every subcommand may come before, between or after its positional arguments
  (before `--`, after which a server's command line starts);
- every key of `run --json`, `runs --json` and `runs show --json` is camelCase (one style,
  docs/cli.md), and `runs --json` gives each run's calls.

Walked over the real parser, so a subcommand or option added later is covered without a new test.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolbridge.cli import build_parser, main
from toolbridge.cli._parsing import action_parsers, split_argv

ROOT = Path(__file__).resolve().parents[2]
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
HOSTILE = [sys.executable, str(ROOT / "tests" / "faults" / "hostile_server.py")]
FILESYSTEM = ROOT / "tests" / "servers" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def _commands() -> dict[str, argparse.ArgumentParser]:
    commands: dict[str, argparse.ArgumentParser] = build_parser().get_default("commands")
    return commands


# -- help -----------------------------------------------------------------------------------------


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    out: str = capsys.readouterr().out
    return out


def test_every_subcommand_and_every_action_prints_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands()
    assert {"runs", "batch", "journal"} <= set(commands)
    seen: dict[str, str] = {}
    for name, parser in commands.items():
        text = _help([name, "--help"], capsys)
        assert text.startswith(f"usage: toolbridge {name} "), (name, text[:200])
        seen[name] = text
        for action in action_parsers(parser):
            for argv in ([name, action, "--help"], [name, action, "-h"]):
                shown = _help(argv, capsys)
                assert shown.startswith(f"usage: toolbridge {name} {action} "), (argv, shown[:200])
                assert shown != text
                assert shown == action_parsers(parser)[action].format_help()
            seen[f"{name} {action}"] = shown
    assert {"runs show", "batch status", "journal migrate"} <= set(seen)
    assert len(set(seen.values())) == len(seen)  # no two alike


def test_an_action_word_after_the_double_dash_is_the_servers(capsys: pytest.CaptureFixture[str]) -> None:
    # `--help` after `--` belongs to the server's command line: not the action's, not ours
    head, tail = split_argv(_commands(), ["call", "echo", "--", "node", "show", "--help"])
    assert (head, tail) == (["call", "echo"], ["node", "show", "--help"])


# -- option placement -----------------------------------------------------------------------------

# Positionals of each subcommand (the first names the action where there is one).
POSITIONALS: dict[str, list[list[str]]] = {
    "tools": [[]],
    "call": [["echo", '{"text": "x"}']],
    "check": [["a.yaml", "b.yaml"]],
    "run": [["m.yaml"]],
    "schema": [[]],
    "serve-tasks": [["tools.json"]],
    "runs": [[], ["show", "run_1"]],
    "lock": [["m.yaml"]],
    "gateway": [["m.yaml"]],
    "batch": [["m.yaml"], ["status", "b_1"]],
    "journal": [["migrate", "postgresql://u@h/db"]],
    "console": [["journal.db"]],
}

VALUES = {
    "--secret": "A=b",
    "--env": "A=b",
    "--header": "A:b",
    "--server-limit": "a=1",
    "--journal": "j.sqlite",
    "--inputs": "{}",
}


def _sample(action: argparse.Action) -> list[str]:
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return [flag]
    if action.choices:
        return [flag, str(list(action.choices)[-1])]
    if flag in VALUES:
        return [flag, VALUES[flag]]
    if action.type is int or (action.type is not None and action.type is not str):
        return [flag, "3"]
    return [flag, "x"]


def _parse(argv: list[str]) -> dict[str, Any]:
    parser = build_parser()
    head, server_command = split_argv(parser.get_default("commands"), argv)
    args = parser.parse_args(head)
    if server_command is not None:
        args.server_command = server_command
    return {k: v for k, v in vars(args).items() if k not in ("commands", "handler", "_action_parsers")}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction | argparse._VersionAction)
    ]


def test_every_option_of_every_subcommand_goes_anywhere_before_the_double_dash() -> None:
    commands = _commands()
    assert set(POSITIONALS) == set(commands), "a new subcommand: add its positionals to POSITIONALS"
    checked = 0
    for name, parser in commands.items():
        server = ["--", "srv", "--flag"] if parser.get_default("server_command") is not None else []
        for positionals in POSITIONALS[name]:
            for action in _options(parser):
                option = _sample(action)
                required = [w for a in _options(parser) if a.required and a is not action for w in _sample(a)]
                before = _parse([name, *required, *option, *positionals, *server])
                for cut in range(1, len(positionals) + 1):  # between and after the positionals
                    moved = _parse(
                        [name, *required, *positionals[:cut], *option, *positionals[cut:], *server]
                    )
                    assert moved == before, (name, option, cut)
                    checked += 1
                if server:
                    assert before["server_command"] == ["srv", "--flag"]
    assert checked > 60


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "env", '{"name": "B4_LATE"}', "--env", "B4_LATE=after the tool"],
        ["call", "env", "--env", "B4_LATE=after the tool", '{"name": "B4_LATE"}'],
        ["call", "--env", "B4_LATE=after the tool", "env", '{"name": "B4_LATE"}'],
    ],
    ids=["after-arguments", "between", "before"],
)
def test_call_env_is_accepted_after_the_tool_name(argv: list[str]) -> None:
    done = subprocess.run(
        [TOOLBRIDGE, *argv, "--timeout", "60", "--", *HOSTILE],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "after the tool\n", "")


def test_call_inherit_env_is_accepted_after_the_tool_name() -> None:
    import os

    done = subprocess.run(
        [TOOLBRIDGE, "call", "env", '{"name": "B4_INHERITED"}', "--inherit-env", "--", *HOSTILE],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "B4_INHERITED": "yes"},
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "yes\n", "")


def test_options_after_the_double_dash_are_the_servers() -> None:
    args = _parse(["call", "echo", "--", "srv", "--timeout", "5", "--env", "A=b"])
    assert args["server_command"] == ["srv", "--timeout", "5", "--env", "A=b"]
    assert args["timeout"] is None and args["env"] == []


# -- one JSON key style ---------------------------------------------------------------------------

DATA_KEYS = {"arguments", "content", "structuredContent"}
"""Keys whose values are a tool's or a model's data (their keys are theirs, not toolbridge's)."""


def _keys(value: Any, path: str = "$") -> list[tuple[str, str]]:
    """Every (path, key) of toolbridge's own objects in `value`."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((path, key))
            if key not in DATA_KEYS:
                found.extend(_keys(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(_keys(item, f"{path}[{i}]"))
    return found


def _assert_camel(value: Any) -> int:
    keys = _keys(value)
    bad = [(path, key) for path, key in keys if not CAMEL.match(key)]
    assert not bad, bad
    return len(keys)


@pytest.fixture
def durable_manifest(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("ship it\n")
    journal = tmp_path / "journal.sqlite"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "kind: Runtime\nmetadata: { name: Policy }\nprofile: durable\n"
        f"journal: {json.dumps(str(journal))}\n"
        "permissions: { allow: [model:scripted, tool:fs_read_file, effect:read] }\n---\n"
        "kind: Ai.ScriptedModel\nmetadata: { name: Scripted }\nturns:\n"
        "  - toolCalls: [{ name: fs_read_file, arguments: { path: notes.txt, snake_case_key: 1 } }]\n"
        "  - text: done\n---\n"
        "kind: Mcp.StdioClient\nmetadata: { name: FilesMcp }\ncommand: node\n"
        f"args: [{json.dumps(str(FILESYSTEM / 'dist' / 'index.js'))}, {json.dumps(str(data))}]\n---\n"
        "kind: AiMcp.ToolProvider\nmetadata: { name: FileTools }\nclient: !ref FilesMcp\n---\n"
        "kind: Ai.Agent\nmetadata: { name: Reader }\nmodel: !ref Scripted\n"
        "toolProviders: [{ provider: !ref FileTools, prefix: fs_, include: [read_file], effects: read }]\n"
    )
    return manifest, journal


def test_run_runs_and_runs_show_json_keys_are_all_camel_case(
    durable_manifest: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, journal = durable_manifest
    assert main(["run", str(manifest), "--input", "q", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["outcome"] == "succeeded" and run["runId"]
    # the model's own argument keys are its data and are kept as they are
    assert run["steps"][0]["toolCalls"][0]["arguments"] == {"path": "notes.txt", "snake_case_key": 1}
    assert _assert_camel(run) > 15

    assert main(["runs", "--journal", str(journal), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert _assert_camel(listed) > 25
    [record] = listed
    assert record["runId"] == run["runId"] and record["usage"]["modelCalls"] == 2
    [call] = record["calls"]  # the list holds the calls too, as `show` does
    assert (call["toolId"], call["outcome"], call["requestSent"]) == ("fs_read_file", "succeeded", True)
    assert len(call["argsSha256"]) == 64

    assert main(["runs", "show", run["runId"], "--journal", str(journal), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert _assert_camel(shown) > 25
    assert shown == record


def test_the_key_walk_catches_snake_case() -> None:
    with pytest.raises(AssertionError):
        _assert_camel({"ok": [{"run_id": 1}]})
    assert _assert_camel({"arguments": {"snake_key": 1}, "content": {"a_b": 2}}) == 2


# -- a missing extra ------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["psycopg", "psycopg_pool"])
def test_journal_migrate_without_psycopg_names_the_extra(missing: str) -> None:
    script = (
        "import sys\n"
        f"sys.modules[{missing!r}] = None  # as if not installed\n"
        "from toolbridge.cli import main\n"
        "sys.exit(main(['journal', 'migrate', 'postgresql://user:pw@127.0.0.1:9/db']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        f"toolbridge: ERR_MISSING_EXTRA: journal migrate needs the 'postgres' extra ({missing} is not "
        "installed): pip install 'toolbridge[postgres]'\n"
    )


@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_run_json_keys_without_a_runtime_and_streamed_are_camel_case(
    durable_manifest: tuple[Path, Path], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, _ = durable_manifest
    text = manifest.read_text().split("---\n", 1)[1]  # no Runtime
    if mode == "stream":
        text = text.replace("kind: Ai.Agent\n", "kind: Ai.AgentStream\n")
    manifest.write_text(text)
    assert main(["run", str(manifest), "--input", "q", "--json"]) == 0
    out = capsys.readouterr().out
    parts = [json.loads(line) for line in out.splitlines()] if mode == "stream" else [json.loads(out)]
    assert sum(_assert_camel(part) for part in parts) > 10
    if mode == "stream":
        assert {p["type"] for p in parts} >= {"tool-call", "tool-result", "finish"}
