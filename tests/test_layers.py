"""Arrows point down: no module of the package imports a name from the package face.

`toolbridge/__init__.py` re-exports the public names lazily; a module below it that imported one
of them (`from .. import __version__`) would tie its layer to the top of the package. Submodules
(`from .. import telemetry`) are fine: that names a module, not the face.
"""

from __future__ import annotations

import ast
from pathlib import Path

import toolbridge

ROOT = Path(toolbridge.__file__).parent


def _package_of(path: Path, level: int) -> Path:
    here = path.parent
    for _ in range(level - 1):
        here = here.parent
    return here


def test_no_module_imports_a_name_from_the_package_face() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0 or node.module is not None:
                continue
            package = _package_of(path, node.level)
            if package != ROOT:
                continue
            for alias in node.names:
                is_module = (ROOT / f"{alias.name}.py").exists() or (ROOT / alias.name).is_dir()
                if not is_module:
                    found.append(f"{path.relative_to(ROOT)}: {alias.name}")
    assert not found, f"names imported from the package face: {found}"
