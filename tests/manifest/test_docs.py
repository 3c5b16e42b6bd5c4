"""docs/manifests.md: its YAML example is the shipped file, and its Python example runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "manifests.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_yaml_example_is_the_shipped_file() -> None:
    shipped = (ROOT / "examples" / "manifests" / "offline-assistant.yaml").read_text()
    assert _blocks("yaml")[0] == shipped


def test_python_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    [code] = _blocks("python")
    monkeypatch.chdir(ROOT)
    exec(compile(code, str(DOC), "exec"), {"__name__": "__doc_example__"})
    expected = [line[3:] for line in code.splitlines() if line.startswith("#> ")]
    assert capsys.readouterr().out.splitlines() == expected


def test_every_documented_code_is_a_code_the_analyzer_knows() -> None:
    import toolbridge.manifest._analyzer as analyzer

    documented = set(re.findall(r"\| `(ERR_MANIFEST_[A-Z_]+)` \|", DOC.read_text()))
    in_module_doc = set(re.findall(r"ERR_MANIFEST_[A-Z_]+", analyzer.__doc__ or ""))
    assert in_module_doc <= documented
