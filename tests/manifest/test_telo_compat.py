"""Telo compatibility of the analyzer: how Telo writes imports, libraries, references, variables and
targets, each from a manifest of our own written the way Telo's modules and docs write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError
from telo_stanzas import everything_client

from toolbridge.cli import main
from toolbridge.errors import ConfigError
from toolbridge.manifest import check_manifest, load_manifest

UNSUPPORTED = "ERR_MANIFEST_UNSUPPORTED"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def codes(path: Path, **kwargs: Any) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in check_manifest(path, **kwargs).diagnostics]


# ---------------------------------------------------------------- imports by relative path

SERVER_TEST = """\
kind: Telo.Application
metadata: { name: ServerTest, version: 1.0.0 }
imports:
  Mcp: ../
  McpClient: ../../mcp-client
targets: [ !ref Call ]
---
kind: Mcp.Tools
metadata: { name: WeatherTools }
entries: [ { name: get_weather, handler: !ref Impl } ]
---
kind: Mcp.HttpEndpoint
metadata: { name: Endpoint }
tools: [ !ref WeatherTools ]
---
kind: McpClient.HttpClient
metadata: { name: Client }
url: http://127.0.0.1:9/mcp
---
kind: McpClient.ToolsCall
metadata: { name: Call }
client: !ref Client
"""


def test_a_dot_dot_import_names_the_module_directory(tmp_path: Path) -> None:
    """`Mcp: ../` in `modules/mcp-server/tests/` is Telo's mcp-server module, not the MCP client."""
    path = write(tmp_path / "modules" / "mcp-server" / "tests" / "http-call.yaml", SERVER_TEST)
    report = check_manifest(path)
    # Mcp.Tools is the server module's, checked as such (its handler names no document here);
    # Mcp.HttpEndpoint is that module's too, checked as such (it lacks its serverInfo)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_DANGLING_REF", 10),
        ("ERR_MANIFEST_MISSING_FIELD", 12),
    ]
    assert (
        "McpServer.HttpEndpoint Endpoint: missing required field `serverInfo`"
        in report.diagnostics[1].message
    )
    assert not any("did you mean" in d.message for d in report.diagnostics)


def test_a_dot_dot_import_of_a_provided_module_runs(tmp_path: Path, everything_js: str) -> None:
    """`McpClient: ../` in `modules/mcp-client/tests/` and `Ai: ../../` one level deeper."""
    client = write(
        tmp_path / "modules" / "mcp-client" / "tests" / "call.yaml",
        f"""\
kind: Telo.Application
metadata: {{ name: CallTest }}
imports: {{ McpClient: ../ }}
targets:
  - name: add
    invoke: !ref Call
    inputs: {{ name: get-sum, arguments: {{ a: 1, b: 2 }} }}
---
{everything_client(everything_js)}""",
    )
    assert codes(client) == []
    text = write(
        tmp_path / "modules" / "ai" / "tests" / "__fixtures__" / "t.yaml",
        "kind: Telo.Application\nmetadata: { name: T }\nimports: { Ai: ../../ }\n---\n"
        "kind: Ai.ScriptedModel\nmetadata: { name: M }\nturns: [ { text: hi } ]\n---\n"
        "kind: Ai.Text\nmetadata: { name: Say }\nmodel: !ref M\n",
    )
    assert codes(text) == []
    # The same `../` from a directory that is not a module of toolbridge's names that directory.
    elsewhere = write(tmp_path / "mine" / "tests" / "fixtures" / "t.yaml", text.read_text())
    findings = check_manifest(elsewhere).diagnostics
    assert [d.code for d in findings] == [UNSUPPORTED, UNSUPPORTED]
    assert "Telo's module mine (imported from ../../)" in findings[0].message


# ---------------------------------------------------------------- libraries and kind definitions


def test_a_library_manifest_is_one_finding(tmp_path: Path) -> None:
    path = write(
        tmp_path / "lib" / "telo.yaml",
        """\
kind: Telo.Library
metadata: { name: Chat, version: 0.1.0 }
imports:
  AiOpenai: oci://ghcr.io/telorun/ai-openai@0.15.3
  Sql: oci://ghcr.io/telorun/sql@0.21.3
secrets:
  openaiApiKey: { type: string }
exports: { kinds: [Helper] }
---
kind: Telo.Definition
metadata: { name: Helper }
capability: Telo.Invocable
---
kind: AiOpenai.OpenaiModel
metadata: { name: model }
model: !cel "variables.model"
apiKey: !cel "secrets.openaiApiKey"
---
kind: Sql.Query
metadata: { name: Load }
""",
    )
    [finding] = check_manifest(path).diagnostics
    assert (finding.code, finding.line, finding.column) == (UNSUPPORTED, 1, 7)
    assert "Telo library's own manifest (Telo.Library Chat)" in finding.message
    assert "runs applications" in finding.message


def test_kind_definitions_in_an_application_are_one_finding_each(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Telo.Application
metadata: { name: App }
---
kind: Telo.Definition
metadata: { name: Greeter }
extends: Ai.ToolProvider
---
kind: Telo.Abstract
metadata: { name: Shape }
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: hi } ]
---
kind: Ai.Agent
metadata: { name: A }
model: !ref M
toolProviders: [ { provider: !ref Greeter } ]
""",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [(UNSUPPORTED, 4), (UNSUPPORTED, 8)]
    assert "Telo kind definition" in report.diagnostics[0].message
    assert "abstract Telo kind" in report.diagnostics[1].message


# ---------------------------------------------------------------- `!ref Alias.member`


def test_a_dotted_ref_into_an_import_names_its_module(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Telo.Application
metadata: { name: Console }
imports:
  Ai: oci://ghcr.io/telorun/ai@0.16.3
  Console: ../../modules/console
targets:
  - name: ask
    invoke: !ref Console.readLine
    inputs: { prompt: "describe an image" }
  - name: other
    invoke: !ref Ai.defaultModel
  - name: typo
    invoke: !ref Konsole.readLine
""",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        (UNSUPPORTED, 8),
        (UNSUPPORTED, 11),
        ("ERR_MANIFEST_DANGLING_REF", 13),
    ]
    first, second, third = (d.message for d in report.diagnostics)
    assert "`readLine` of the import Console" in first and "Telo's module console" in first
    assert "Telo's module ai exports no instance toolbridge provides" in second
    assert "no import is aliased Konsole" in third


# ---------------------------------------------------------------- variables and secrets


def test_variables_take_telo_types_and_keywords(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Telo.Application
metadata: { name: Hub }
variables:
  seedRefs: { env: TB_T_SEEDS, type: array, default: [], items: { type: string } }
  flags: { env: TB_T_FLAGS, type: object, default: { fast: true } }
  level: { env: TB_T_LEVEL, type: string, enum: [low, high], default: low }
  retries: { env: TB_T_RETRIES, type: integer, minimum: 1, default: 3 }
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: hi } ]
---
kind: Ai.Text
metadata: { name: T }
model: !ref M
system: !cel "variables.level + ':' + variables.seedRefs[1]"
options:
  retries: !cel "variables.retries"
  fast: !cel "variables.flags.fast"
  seeds: !cel "variables.seedRefs"
""",
    )
    env = {"TB_T_SEEDS": '["oci://a", "oci://b"]', "TB_T_LEVEL": "high"}
    manifest = load_manifest(path, env=env)
    model = manifest.analysis.docs["T"].model
    assert model.system == "high:oci://b"  # type: ignore[attr-defined]
    expected = {"retries": 3, "fast": True, "seeds": ["oci://a", "oci://b"]}
    assert model.options == expected  # type: ignore[attr-defined]
    # A value that breaks its declaration is named with the keyword it breaks, where it is read.
    bad = {"TB_T_SEEDS": '{"not": "a list"}', "TB_T_LEVEL": "medium", "TB_T_RETRIES": "0"}
    report = check_manifest(path, env=bad)
    messages = [d.message for d in report.diagnostics]
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_EXPRESSION", n) for n in (16, 16, 18, 20)
    ]
    assert "variable level has no value ($TB_T_LEVEL: it does not match its declaration" in messages[0]
    assert "variable seedRefs has no value ($TB_T_SEEDS: it is not an array" in messages[1]
    assert "variable retries has no value ($TB_T_RETRIES: it does not match" in messages[2]
    assert codes(path, env={"TB_T_SEEDS": "[not json"})[0][0] == "ERR_MANIFEST_EXPRESSION"


def test_a_misspelt_declaration_keyword_is_an_unknown_field(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        "kind: Telo.Application\nmetadata: { name: A }\n"
        "variables:\n  n: { env: N, type: integer, minimun: 1 }\n  m: { env: M, type: list }\n",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_UNKNOWN_FIELD", 4),
        ("ERR_MANIFEST_INVALID_VALUE", 5),
    ]
    assert "did you mean `minimum`?" in report.diagnostics[0].message
    assert "'array'" in report.diagnostics[1].message


def test_a_secret_of_the_wrong_type_never_shows_its_value(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Telo.Application
metadata: { name: A }
secrets:
  port: { env: TB_T_PORT, type: integer }
  pin: { env: TB_T_PIN, type: string, pattern: "^[0-9]+$" }
---
kind: AiOpenai.OpenaiModel
metadata: { name: M }
model: gpt-4o-mini
apiKey: !cel "string(secrets.port)"
baseUrl: !cel "secrets.pin"
""",
    )
    report = check_manifest(path, env={"TB_T_PORT": "sk-not-a-number-77", "TB_T_PIN": "sk-letters-88"})
    text = json.dumps(report.to_dict())
    assert "sk-not-a-number-77" not in text and "sk-letters-88" not in text
    assert [d.code for d in report.diagnostics] == ["ERR_MANIFEST_INVALID_VALUE"] * 2
    assert "secret port is not a valid integer" in report.diagnostics[0].message
    assert "secret pin is not a valid string: it does not match" in report.diagnostics[1].message


# ---------------------------------------------------------------- one expectation per union


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int


class _Unions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scalar: str | int | float | bool | None = None
    either: _Inner | list[int] | None = None
    table: dict[str, int | str] = {}


def _plain(data: Any) -> list[dict[str, Any]]:
    from toolbridge.manifest._schema_errors import plain_errors

    try:
        _Unions.model_validate(data)
    except ValidationError as exc:
        return plain_errors(_Unions, exc.errors(include_url=False))
    return []


def test_a_union_gives_one_plain_expectation() -> None:
    [err] = _plain({"scalar": [1]})
    assert err["loc"] == ("scalar",) and err["type"] == "union_type"
    assert err["msg"] == "a string, an integer, a number or true or false"
    # A member that took the type but refused what is inside is the one reported.
    [err] = _plain({"either": {"size": "x"}})
    assert err["loc"] == ("either", "size") and err["type"] in ("int_parsing", "int_type")
    [err] = _plain({"table": {"k": [1]}})
    assert err["loc"] == ("table", "k") and err["type"] == "union_type"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["scalar", "either", "table", "other"]), _JSON, max_size=4))
@example({"scalar": None, "either": {"str": None}})  # the user's own key "str": CI found this one
@example({"either": 1.5, "scalar": {}})
def test_union_errors_never_name_a_member(data: dict[str, Any]) -> None:
    """Whatever the input, no location carries pydantic's member labels and no place repeats.

    A label may appear only where it is the user's own key (the input may well hold ``{"str": ...}``):
    the location is walked through the input, and a label that is not a key there is pydantic's.
    """
    errors = _plain(data)
    labels = {"str", "int", "float", "bool", "_Inner", "list[int]"}
    places = [tuple(e["loc"]) for e in errors if e["type"] == "union_type"]
    assert len(places) == len(set(places))
    for err in errors:
        assert not _member_labels_in(data, err["loc"], labels), err


def _member_labels_in(data: Any, loc: tuple[Any, ...], labels: set[str]) -> list[Any]:
    """The parts of ``loc`` that are member labels rather than keys or indexes of ``data``."""
    found: list[Any] = []
    node: Any = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            node = node[part]
        else:
            if str(part) in labels:
                found.append(part)
            node = None
    return found


def test_manifest_union_findings_are_one_line_each(tmp_path: Path) -> None:
    """Through the analyzer: a target that is neither a ref nor an entry is one finding."""
    path = write(
        tmp_path / "app.yaml",
        "kind: Telo.Application\nmetadata: { name: A }\n"
        "targets: [ 42, { name: x, invoke: !ref Nope, when: maybe } ]\n",
    )
    report = check_manifest(path)
    assert all("\n" not in d.message for d in report.diagnostics)
    assert not any(".str`" in d.message or ".int`" in d.message for d in report.diagnostics)
    assert [d.code for d in report.diagnostics] == [
        "ERR_MANIFEST_WRONG_TYPE",  # 42: neither `!ref Doc` nor a mapping
        "ERR_MANIFEST_DANGLING_REF",
    ]  # `when: maybe` is true-y, as Telo reads a `when` (it was once ERR_MANIFEST_WRONG_TYPE)


# ---------------------------------------------------------------- reference forms


def test_telo_reference_forms_say_what_to_write(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Mcp.StdioClient
metadata: { name: FilesMcp }
command: node
---
kind: AiMcp.ToolProvider
metadata: { name: Old }
client: { kind: Mcp.StdioClient, name: FilesMcp }
---
kind: AiMcp.ToolProvider
metadata: { name: Bare }
client: FilesMcp
---
kind: AiMcp.ToolProvider
metadata: { name: Inline }
client: { kind: Mcp.HttpClient, url: "http://127.0.0.1:9/mcp" }
---
kind: Mcp.HttpClient
metadata: { name: Registry }
url: http://127.0.0.1:9/mcp
sessionProvider: RegistryVaultSession
""",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_REF_FORM", n) for n in (7, 11, 15, 20)
    ]
    old, bare, inline, provider = (d.message for d in report.diagnostics)
    assert "old `{kind, name}` reference form" in old and "write `!ref FilesMcp`" in old
    assert "Telo refuses" in old and "INVALID_REFERENCE_FORM" in old
    assert "bare name" in bare and "`!ref FilesMcp`" in bare
    assert "inline declaration" in inline
    assert "`!ref RegistryVaultSession`" in provider


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_any_value_in_a_ref_slot_is_one_finding(tmp_path_factory: pytest.TempPathFactory, value: Any) -> None:
    path = tmp_path_factory.mktemp("ref") / "m.yaml"
    path.write_text(
        "kind: AiMcp.ToolProvider\nmetadata: { name: P }\nclient: " + json.dumps(value) + "\n",
    )
    report = check_manifest(path)
    [finding] = report.diagnostics
    assert finding.code == "ERR_MANIFEST_REF_FORM"
    assert "\n" not in finding.message and len(finding.message) < 400


# ---------------------------------------------------------------- Telo's other namespaces and targets


def test_telo_namespaces_are_named(tmp_path: Path) -> None:
    path = write(
        tmp_path / "app.yaml",
        """\
kind: Mcp.HttpClient
metadata: { name: RegistryMcp }
url: http://127.0.0.1:9/mcp
headers:
  authorization: "Bearer ${{ resources.Env.token }}"
---
kind: Ai.ScriptedModel
metadata: { name: M }
turns: [ { text: hi } ]
---
kind: Ai.Text
metadata: { name: T }
model: !ref M
system: !cel "inputs.topic"
""",
    )
    report = check_manifest(path)
    assert [(d.code, d.line) for d in report.diagnostics] == [(UNSUPPORTED, 5), (UNSUPPORTED, 14)]
    assert "reads Telo's `resources`" in report.diagnostics[0].message
    assert "reads Telo's `inputs`" in report.diagnostics[1].message


TARGETS = """\
kind: Telo.Application
metadata: {{ name: Steps }}
imports: {{ McpClient: oci://ghcr.io/telorun/mcp-client@0.14.3 }}
variables:
  a: {{ env: TB_T_A, type: integer, default: 2 }}
  listing: {{ env: TB_T_LISTING, type: boolean, default: false }}
secrets:
  token: {{ env: TB_T_TOKEN, type: string }}
targets:
  - name: add
    invoke: !ref Call
    inputs:
      name: get-sum
      arguments: !cel "{{'a': variables.a, 'b': 40}}"
  - ref: !ref List
    when: !cel "variables.listing"
  - name: twice
    invoke: !ref Call
    inputs: {{ name: !cel "steps.add.result.content[0].text" }}
  - name: leak
    when: !cel "size(steps.add.result.content) > 0"
    invoke: !ref Call
    inputs: {{ name: echo, arguments: {{ message: !cel "secrets.token" }} }}
---
{everything}"""


def test_target_expressions(
    tmp_path: Path, everything_js: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = TARGETS.format(everything=everything_client(everything_js, listing=True))
    path = write(tmp_path / "app.yaml", app)
    env = {"TB_T_TOKEN": "sk-target-token-5"}
    report = check_manifest(path, env=env)
    assert [(d.code, d.line) for d in report.diagnostics] == [
        ("ERR_MANIFEST_SECRET_PLACEMENT", 23),  # a secret into a tool's arguments
    ]  # `steps` in a target's inputs and `when` is kept for when the target runs
    assert "sk-target-token-5" not in json.dumps(report.to_dict())
    lines = path.read_text().splitlines()
    ok = write(tmp_path / "ok.yaml", "\n".join(lines[:16] + lines[23:]) + "\n")
    manifest = load_manifest(ok, env={**env, "TB_T_A": "5"})
    # The gate over `variables.listing` is closed: `add` is the only target, its inputs evaluated.
    assert manifest.pick_target() == manifest.pick_target("add")
    assert manifest.pick_target().inputs == {"name": "get-sum", "arguments": {"a": 5, "b": 40}}
    opened = load_manifest(ok, env={**env, "TB_T_LISTING": "true"})
    with pytest.raises(ConfigError, match=r"several targets \(add, List\)"):
        opened.pick_target()
    monkeypatch.setenv("TB_T_A", "7")
    monkeypatch.setenv("TB_T_TOKEN", "sk-target-token-5")
    assert main(["run", str(ok), "--target", "add", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["content"][0]["text"] == "The sum of 7 and 40 is 47."


def test_a_placeholder_name_says_what_a_name_is(tmp_path: Path) -> None:
    """Telo's docs write `metadata: { name: <Name> }`: the finding says what a name is."""
    path = write(tmp_path / "m.yaml", "kind: Mcp.StdioClient\nmetadata: { name: <Name> }\ncommand: node\n")
    [finding] = check_manifest(path).diagnostics
    assert finding.code == "ERR_MANIFEST_INVALID_VALUE"
    assert (
        "`metadata.name` must be a name (letters, digits" in finding.message and "'<Name>'" in finding.message
    )


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("./-_aZ\\\x00 @#:")), max_size=20),
    st.sampled_from(["/", "/a/b", "/srv/modules/mcp-server/tests", "relative/dir"]),
)
def test_module_of_a_path_import_never_crashes(source: str, base: str) -> None:
    """Any import source: a module name without a path separator, or None; never an exception."""
    from toolbridge.manifest._kinds_run import ALL_KINDS
    from toolbridge.manifest._telo import KindResolver, module_of_source

    module = module_of_source(source, base)
    assert module is None or (module and "/" not in module)
    resolution = KindResolver(ALL_KINDS, {"Mcp": source}, base).resolve("Mcp.Tools")
    assert resolution.kind in (None, "McpServer.Tools") and "\n" not in resolution.message
