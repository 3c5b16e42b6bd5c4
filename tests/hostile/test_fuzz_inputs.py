"""Property-based tests: the manifest loader, the tool-file and lock-file readers and `call`'s JSON.

For any input: no exception other than the documented one (so no traceback), no hang past the
example deadline, and memory bounded (a generator of nested aliases, a billion-laughs family,
must stay under a fixed peak). The stdio line parser is fuzzed in tests/clients.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge._bounded import InputLimitError, loads_json
from toolbridge.cli._tools import _parse_arguments
from toolbridge.errors import ConfigError
from toolbridge.manifest import check_manifest
from toolbridge.manifest._yaml import YamlSyntaxError, parse_documents
from toolbridge.pinning import read_lock
from toolbridge.tasks import TaskToolSet

# Sane for a loaded 2-core machine: a few seconds per test, a generous per-example deadline.
FUZZ = settings(
    max_examples=60,
    deadline=3000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

YAML_PIECES = st.sampled_from(
    [
        "kind: ",
        "Ai.Agent",
        "metadata:",
        " { name: A }",
        "\n",
        "  ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        ": ",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "<<: ",
        "!ref ",
        "!!set ",
        "!!python/tuple ",
        "!cel ",
        "'",
        '"',
        "#",
        "---\n",
        "...\n",
        "? ",
        "|\n",
        ">\n",
        "\x00",
        "\x1b",
        "\t",
        "\r",
        "\ufeff",
        "é",
        "1e999",
    ]
)
yaml_texts = st.one_of(st.text(max_size=300), st.lists(YAML_PIECES, max_size=60).map("".join))

JSON_PIECES = st.sampled_from(
    [
        '{"tools": ',
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        '"name"',
        '"x"',
        "1",
        "-0.5e3",
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "null",
        "true",
        '"\\ud800"',
        '"\\u0000"',
        " ",
        "\n",
        '"',
        "\\",
    ]
)
json_texts = st.one_of(st.text(max_size=300), st.lists(JSON_PIECES, max_size=80).map("".join))
json_bytes = st.one_of(st.binary(max_size=300), json_texts.map(lambda t: t.encode("utf-8", "surrogatepass")))


@FUZZ
@given(yaml_texts)
def test_the_yaml_loader_never_raises_anything_else(text: str) -> None:
    try:
        docs = parse_documents(text)
    except YamlSyntaxError as exc:
        assert exc.code in ("ERR_MANIFEST_YAML", "ERR_MANIFEST_LIMIT")
        assert exc.pos.line >= 1 and exc.pos.column >= 1
        return
    for doc in docs:
        for problem in doc.problems:
            assert problem.code.startswith("ERR_MANIFEST_")


@FUZZ
@given(st.one_of(yaml_texts.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=300)))
def test_check_gives_diagnostics_for_any_file(tmp_path_factory: object, data: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("m")) / "m.yaml"  # type: ignore[attr-defined]
    path.write_bytes(data)
    report = check_manifest(path, env={})
    for d in report.diagnostics:
        assert d.code.startswith("ERR_MANIFEST_") and d.line >= 1 and d.column >= 1
        assert "\n" not in d.message


def _alias_family(width: int, levels: int, nest: int) -> str:
    lines = ["a0: &a0 [" + ",".join(["x"] * width) + "]"]
    for i in range(1, levels + 1):
        item = f"*a{i - 1}"
        for _ in range(nest):
            item = f"[{item}]"
        lines.append(f"a{i}: &a{i} [" + ",".join([item] * width) + "]")
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=5000)
@given(st.integers(2, 12), st.integers(1, 12), st.integers(0, 3))
def test_alias_expansion_is_bounded_in_time_and_memory(width: int, levels: int, nest: int) -> None:
    text = _alias_family(width, levels, nest)
    tracemalloc.start()
    try:
        try:
            parse_documents(text)
        except YamlSyntaxError as exc:
            assert exc.code == "ERR_MANIFEST_LIMIT"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 150 * 1024 * 1024, f"{peak / 2**20:.0f} MiB for {len(text)} bytes"


@FUZZ
@given(json_texts)
def test_the_bounded_json_reader(text: str) -> None:
    try:
        loads_json(text)
    except InputLimitError as exc:
        assert exc.reason in ("too_deep", "non_finite", "number", "json")


@FUZZ
@given(json_bytes)
def test_task_tool_files(tmp_path_factory: object, data: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("t")) / "tools.json"  # type: ignore[attr-defined]
    path.write_bytes(data)
    try:
        TaskToolSet.from_file(path)
    except ConfigError as exc:
        assert exc.code.startswith("ERR_TASK_")


_LOCKISH = st.dictionaries(st.text(max_size=5), st.text(max_size=5)).map(str).map(str.encode)


@FUZZ
@given(st.one_of(json_bytes, _LOCKISH))
def test_lock_files(tmp_path_factory: object, data: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("l")) / "tools.lock"  # type: ignore[attr-defined]
    path.write_bytes(data)
    try:
        read_lock(path)
    except ConfigError as exc:
        assert exc.code == "ERR_LOCK_INVALID"


@FUZZ
@given(st.one_of(json_texts, st.text(alphabet=st.characters(codec="utf-8"), max_size=200)))
def test_calls_json_arguments(text: str) -> None:
    try:
        value = _parse_arguments(text)
    except ConfigError as exc:
        assert exc.code == "ERR_INVALID_INPUT"
        assert "\n" not in exc.message
        return
    assert isinstance(value, dict)


@FUZZ
@given(st.text(), st.booleans())
def test_visible_text_leaves_nothing_a_terminal_acts_on(text: str, multiline: bool) -> None:
    import unicodedata

    from toolbridge.sanitize import visible_text

    shown = visible_text(text, multiline=multiline)
    allowed = {"\n", "\t"} if multiline else set()
    for ch in shown:
        assert ch in allowed or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"), repr(ch)
    if text.isascii() and text.isprintable():
        assert shown == text
