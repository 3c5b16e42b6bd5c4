"""Arrows point down: no name from the package face, no private module of another package, no layer above.

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


# The packages and floors from the bottom up. A module may import from its own layer or one below,
# never one above; the top-level modules not named here (content, errors, redact, tools,
# sanitize, calls, catalog and the private `_x` helpers) are the floor, below everything.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"telemetry", "functions"}),
    frozenset({"clients"}),
    frozenset({"bridge", "pinning"}),
    frozenset({"agent"}),
    frozenset({"runtime", "tasks"}),
    frozenset({"manifest", "integrations"}),
    frozenset({"batch", "console"}),
    frozenset({"gateway"}),
    frozenset({"cli"}),
)


def _layer(unit: str) -> int:
    for number, units in enumerate(LAYERS, start=1):
        if unit in units:
            return number
    assert not (ROOT / unit).is_dir(), f"package {unit} has no layer: add it to LAYERS"
    return 0  # the floor


def _imports() -> list[tuple[str, int, str, list[str], str]]:
    """Every relative import below the face: (importing module, line, its unit, the target
    module's path parts, the name imported from it; "" when that name is the module itself)."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "__init__.py":
            continue
        rel = path.relative_to(ROOT).with_suffix("").parts
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = list(rel[:-1])
            for _ in range(node.level - 1):
                base = base[:-1]
            target = base + (node.module.split(".") if node.module else [])
            for alias in node.names:
                full = [*target, alias.name]
                where = ROOT.joinpath(*full)
                is_module = where.with_suffix(".py").exists() or where.is_dir()
                name = "" if is_module else alias.name
                found.append(("/".join(rel), node.lineno, rel[0], full if is_module else target, name))
    return found


def _unit(parts: list[str]) -> str:
    return parts[0] if parts else ""


def test_no_package_imports_another_packages_private_module() -> None:
    """A package uses what another package exports (its `__init__` or a public submodule such as
    `runtime.journal`, `manifest.documents`, `tasks.server`), never its private modules or names:
    the owner can then change its insides without breaking a neighbour."""
    found = []
    for module, line, unit, target, name in _imports():
        if not target or not (ROOT / target[0]).is_dir() or target[0] == unit:
            continue
        if any(part.startswith("_") for part in [*target[1:], name]):
            found.append(f"{module}:{line}: {'.'.join(target)} {name}".rstrip())
    assert not found, f"imports of another package's private module: {found}"


def test_no_import_runs_up_the_layers() -> None:
    """Arrows point down (or across one layer): no module imports from a package above its own,
    not even inside a function, so no two packages import each other."""
    found = []
    for module, line, unit, target, _ in _imports():
        if target and _layer(_unit(target)) > _layer(unit):
            found.append(f"{module}:{line}: {'.'.join(target)}")
    assert not found, f"imports that run up the layers: {found}"


def test_no_two_packages_import_each_other() -> None:
    edges = {(unit, _unit(target)) for _, _, unit, target, _ in _imports() if target}
    loops = sorted(f"{a} <-> {b}" for a, b in edges if a < b and (b, a) in edges and _layer(a) > 0)
    assert not loops, f"packages importing each other: {loops}"


def test_runtime_files_import_no_loop() -> None:
    """The runtime's modules import each other in one direction (the session and operations see
    the runtime through `_host.RuntimeHost`, never `_runtime`), type-checking imports included."""
    graph: dict[str, set[str]] = {}
    for module, _, unit, target, _ in _imports():
        edge = (module, "/".join(target[:2]))
        inside = unit == "runtime" and len(target) > 1 and target[0] == "runtime"
        if inside:
            graph.setdefault(module, set()).add(edge[1])
    loops: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                loops.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in seen:
                seen.add(nxt)
                visit(nxt, [*path, nxt])

    seen: set[str] = set()
    for start in sorted(graph):
        if start not in seen:
            seen.add(start)
            visit(start, [start])
    assert not loops, f"import loops among the runtime's files: {loops}"


def _private_reaches(path: Path) -> list[str]:
    """`obj._name` where `obj` is not `self` or `cls`: one object reading another's private state."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_runtime_objects_meet_through_public_interfaces() -> None:
    """The runtime is composed, not inherited: the session, its run (`_run.GovernedRun`), the
    rule objects (`CallRules`, `RefusedCalls`, `RunRules` over one `RunCore`), the governor and
    `Runtime` call each other's public methods only. No `other._private` in the runtime's files
    (a class's own `self._x` is its business), and no class there inherits rules from another."""
    found = []
    for path in sorted((ROOT / "runtime").glob("*.py")):
        found.extend(_private_reaches(path))
    assert not found, f"reaches into another object's private state: {found}"


def test_runtime_rules_are_not_mixins() -> None:
    """The session and the rule objects subclass nothing of the runtime's (no mixins)."""
    ruled = ("GovernedSession", "GovernedRun", "RunCore", "CallRules", "RefusedCalls", "RunRules", "Governor")
    found = []
    for path in sorted((ROOT / "runtime").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in ruled:
                bases = [ast.unparse(b) for b in node.bases if ast.unparse(b) not in ("AgentHooks",)]
                if bases:
                    found.append(f"{node.name}({', '.join(bases)})")
    assert not found, f"rule classes built by inheritance: {found}"
