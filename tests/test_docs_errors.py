"""docs/errors.md cannot rot: its example runs, and every code the package raises is documented."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "errors.md"
CODE = re.compile(
    r'"((?:ERR_[A-Z_]+)|PERMISSION_DENIED|BUDGET_EXCEEDED|GUARD_BLOCKED|GUARD_UNAVAILABLE|'
    r'LIMIT_EXCEEDED|OUTCOME_UNKNOWN|INVALID_INPUT|INVALID_OUTPUT|MODEL_FAILED|TOOL_FAILED)"'
)
# Class defaults that are never raised as such.
_ROOT_DEFAULTS = {"ERR_TOOLBRIDGE", "ERR_AGENT", "ERR_MODEL"}


def test_the_example_runs() -> None:
    text = DOC.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    exec(compile(block.group(1), str(DOC), "exec"), {})


def test_every_code_in_the_package_is_documented() -> None:
    documented = DOC.read_text() + (ROOT / "docs" / "manifests.md").read_text()
    used: set[str] = set()
    for path in (ROOT / "src" / "toolbridge").rglob("*.py"):
        used.update(CODE.findall(path.read_text()))
    missing = sorted(code for code in used - _ROOT_DEFAULTS if f"`{code}`" not in documented)
    assert not missing, f"codes raised but not documented in docs/errors.md: {missing}"


def test_every_runtime_outcome_code_is_documented() -> None:
    from toolbridge.runtime import CODES

    for page in ("errors.md", "declare.md"):
        text = (ROOT / "docs" / page).read_text()
        missing = sorted(code for code in CODES if f"`{code}`" not in text)
        assert not missing, f"runtime codes not documented in docs/{page}: {missing}"
