"""The project's size rule: no module of the package is over 800 lines (split into `_*.py` parts)."""

from __future__ import annotations

from pathlib import Path

import toolbridge

LIMIT = 800


def test_no_module_is_over_the_limit() -> None:
    root = Path(toolbridge.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert len(modules) > 50, "the package's modules were not found"
    over = {
        str(path.relative_to(root)): n
        for path in modules
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert not over, f"modules over {LIMIT} lines: {over}"
