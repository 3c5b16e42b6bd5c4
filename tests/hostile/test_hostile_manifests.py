"""Hostile manifests: every bound on work holds; each breach is one `ERR_MANIFEST_*` line at file:line:col.

Each case goes through `toolbridge check` in a real subprocess (the installed console script)
with a wall-clock bound, so a hang, a traceback or a blow-up in memory fails the test.
"""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolbridge.manifest import check_manifest
from toolbridge.manifest._yaml import MAX_DEPTH, MAX_NODES

TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
# `toolbridge check` in a child that reports its own peak RSS (KiB) as the last line of stderr.
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec, so a child forked
# from a large pytest process would report the parent's size, not its own.
_MEASURED = (
    "import sys\n"
    "from toolbridge.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
    "sys.stderr.write(f'RSS {hwm}\\n')\n"
    "sys.exit(code)\n"
)


def _cap_memory() -> None:  # a blow-up fails fast instead of taking the machine down
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _billion_laughs(levels: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    for prev, name in itertools.pairwise(names[: levels + 1]):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _check(path: Path, *, limit_s: float = 30.0) -> tuple[int, list[str], float, int]:
    """Run `toolbridge check PATH`; (exit code, stdout lines, seconds, peak RSS in MiB of the child)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, "check", str(path)],
        capture_output=True,
        text=True,
        timeout=limit_s,
        check=False,
        preexec_fn=_cap_memory,
    )
    elapsed = time.monotonic() - started
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    *rest, last = proc.stderr.splitlines()
    assert rest == [], proc.stderr
    peak = int(last.removeprefix("RSS ")) // 1024
    return proc.returncode, proc.stdout.splitlines(), elapsed, peak


def _one_finding(path: Path, code: str, line: int, column: int, fragment: str) -> None:
    rc, out, _, peak = _check(path)
    assert rc == 1
    assert out == [f"{path}:{line}:{column}: error {code}: {out[0].split(f'{code}: ', 1)[1]}", out[1]], out
    assert fragment in out[0]
    assert out[1] == "1 error(s), 0 warning(s) in 1 file"
    assert peak < 400, f"{peak} MiB"


def test_the_344_byte_billion_laughs_fails_fast(tmp_path: Path) -> None:
    text = _billion_laughs(8)  # 9**9 nodes once expanded
    assert len(text.encode()) < 400
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    started = time.monotonic()
    report = check_manifest(path)
    assert time.monotonic() - started < 2.0
    [d] = report.diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT" and f"{MAX_NODES}" in d.message
    assert (d.line, d.column) > (1, 1)  # the node that expands too far, not the file
    _one_finding(path, "ERR_MANIFEST_LIMIT", d.line, d.column, "aliases are expanded")


@pytest.mark.parametrize("levels", [9, 12])
def test_deeper_bombs_fail_the_same_way(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_billion_laughs(levels))
    [d] = check_manifest(path).diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT"


def test_a_bomb_spread_over_many_documents_shares_one_budget(tmp_path: Path) -> None:
    doc = "x: &x [" + ",".join(["1"] * 100) + "]\ny: [" + ",".join(["*x"] * 100) + "]\n"  # ~10,200 nodes each
    path = tmp_path / "docs.yaml"
    path.write_text("---\n".join([doc] * 10))
    [d] = check_manifest(path).diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT"


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 500, 100_000])
def test_deep_nesting(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * levels + "]" * levels + "\n")
    # the root mapping is the first level: the 100th `[` opens level 101
    _one_finding(path, "ERR_MANIFEST_LIMIT", 1, 3 + MAX_DEPTH, f"deeper than {MAX_DEPTH}")


def test_deep_block_nesting(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("".join(f"{' ' * i}k{i}:\n" for i in range(300)) + " " * 300 + "v\n")
    [d] = check_manifest(path).diagnostics
    assert (d.code, d.line) == ("ERR_MANIFEST_LIMIT", MAX_DEPTH + 1)  # the value of k99 opens level 101


def test_nesting_at_the_limit_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n")
    codes = [d.code for d in check_manifest(path).diagnostics]
    assert "ERR_MANIFEST_LIMIT" not in codes


def test_a_merge_chain_deeper_than_the_limit(tmp_path: Path) -> None:
    lines = ["x0: &x0 {a: 1}"] + [f"x{i}: &x{i} {{<<: *x{i - 1}}}" for i in range(1, 1000)]
    path = tmp_path / "merge.yaml"
    path.write_text("\n".join(lines) + "\n")
    [d] = check_manifest(path).diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT" and "aliases are expanded" in d.message


@pytest.mark.parametrize(
    "text",
    ["a: &x [*x]\n", "a: &x {k: *x}\n", "a: &x {<<: *x}\n", "a: &x [1, [2, [3, *x]]]\n"],
)
def test_recursive_alias(tmp_path: Path, text: str) -> None:
    path = tmp_path / "rec.yaml"
    path.write_text(text)
    [d] = check_manifest(path).diagnostics
    assert d.code == "ERR_MANIFEST_YAML" and "recursive alias" in d.message
    assert d.line == 1


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x07", "\x9b", "\ufffe"])
def test_control_characters(tmp_path: Path, char: str) -> None:
    path = tmp_path / "ctl.yaml"
    path.write_text(f"kind: Ai.Agent\nmetadata:    {char}\n")
    _one_finding(path, "ERR_MANIFEST_YAML", 2, 14, f"U+{ord(char):04X}")


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("a: !!set {x: null}\n", "!!set"),
        ("a: !!omap [{x: 1}]\n", "!!omap"),
        ("a: !!python/tuple [1, 2]\n", "!!python/tuple"),
        ("a: !!python/object:os.system {}\n", "!!python/object:os.system"),
        ("a: !!python/name:os.system\n", "!!python/name:os.system"),
        ("a: !!pairs [{x: 1}]\n", "!!pairs"),
        ("a: !!binary aGk=\n", "!!binary"),
    ],
)
def test_tags_that_are_not_plain_data(tmp_path: Path, text: str, tag: str) -> None:
    path = tmp_path / "tags.yaml"
    path.write_text("kind: Ai.Agent\n" + text)
    found = [d for d in check_manifest(path).diagnostics if d.code == "ERR_MANIFEST_YAML"]
    assert [(d.line, d.column) for d in found] == [(2, 4)]
    assert repr(tag) in found[0].message


def test_a_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "m.yaml"
    os.mkfifo(fifo)
    rc, out, elapsed, _ = _check(fifo, limit_s=20)
    assert elapsed < 15
    assert rc == 1 and "ERR_MANIFEST_FILE" in out[0] and "not a regular file" in out[0]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_not_read(device: str) -> None:
    rc, out, _, peak = _check(Path(device), limit_s=20)
    assert (
        rc == 1
        and out[0]
        == f"{device}:1:1: error ERR_MANIFEST_FILE: the manifest is not a regular file "
        "(a FIFO, socket or device)"
    )
    assert peak < 400


def test_a_directory(tmp_path: Path) -> None:
    [d] = check_manifest(tmp_path).diagnostics
    assert d.code == "ERR_MANIFEST_FILE" and "directory" in d.message


def test_a_50_mb_manifest_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w") as f:
        f.write("kind: Ai.Agent\nnotes: |\n")
        line = "  " + "x" * 98 + "\n"
        for _ in range(500_000):
            f.write(line)
    rc, out, _, peak = _check(path)
    assert rc == 1 and "ERR_MANIFEST_LIMIT" in out[0] and "more than the limit of 1.0 MiB" in out[0]
    assert peak < 200


def test_the_size_limit_is_a_parameter(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("kind: Ai.Agent\n# " + "x" * 2000 + "\n")
    [d] = check_manifest(path, max_bytes=1000).diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT"
    assert all(d.code != "ERR_MANIFEST_LIMIT" for d in check_manifest(path).diagnostics)


def test_too_many_nodes(tmp_path: Path) -> None:
    path = tmp_path / "wide.yaml"
    path.write_text("a: [" + "1," * (MAX_NODES + 10) + "1]\n")
    started = time.monotonic()
    [d] = check_manifest(path).diagnostics
    assert d.code == "ERR_MANIFEST_LIMIT" and "more than" in d.message
    assert time.monotonic() - started < 30


def test_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("kind: Ai.Agent\nmetadata: { name: caf\xe9 }\n".encode("latin-1"))
    _one_finding(path, "ERR_MANIFEST_FILE", 2, 22, "not UTF-8")


def test_diagnostics_echoing_the_manifest_are_terminal_safe(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    # an unknown field is echoed as written (not as a repr)
    path.write_text(
        'kind: Ai.ScriptedModel\nmetadata: { name: A }\nturns: [text: hi]\n"x\\e]52;c;aGk=\\a\\u202e": 1\n'
    )
    rc, out, _, _ = _check(path)
    assert rc == 1 and "ERR_MANIFEST_UNKNOWN_FIELD" in out[0]
    text = "\n".join(out)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "x\\x1b]52;c;aGk=\\x07\\u202e" in text
    proc = subprocess.run(
        [TOOLBRIDGE, "check", "--json", str(path)], capture_output=True, text=True, check=False
    )
    assert "x\\u001b]52;c;aGk=\\u0007\u202e" in proc.stdout  # --json stays exact


def test_an_empty_manifest_says_there_is_nothing_to_run(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n---\n")
    rc, out, _, _ = _check(path)
    assert rc == 0
    assert (
        out[0] == f"{path}:1:1: warning ERR_MANIFEST_NO_AGENT: the manifest is empty: it declares no "
        "Ai.Agent, so `toolbridge run` has nothing to run"
    )
