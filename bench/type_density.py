"""`Any` and `getattr` per 1,000 lines of src/toolbridge (issue 23's targets: Any <= 15, getattr <= 2).

Counts the name `Any` (annotations, casts, imports; `typing.Any` too) and calls of `getattr(` in
the AST of every module, over all lines (blank and comment lines included, as `wc -l` counts).

    python bench/type_density.py [path/to/src/toolbridge]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "src" / "toolbridge"


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def measure(root: Path) -> tuple[int, int, int]:
    """(lines, `Any` names, `getattr` calls) of every module under `root`."""
    lines = anys = getattrs = 0
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines += text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if _is_any(node):
                anys += 1
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                getattrs += 1
    return lines, anys, getattrs


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_ROOT
    lines, anys, getattrs = measure(root)
    per_any, per_getattr = anys * 1000 / lines, getattrs * 1000 / lines
    print(f"{lines} lines: Any {anys} ({per_any:.1f} per 1,000),", end=" ")
    print(f"getattr {getattrs} ({per_getattr:.1f} per 1,000)")


if __name__ == "__main__":
    main()
