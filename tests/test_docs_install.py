"""Every doc page states its install line, and its examples need nothing beyond the extras it names.

A page has a line `Install: ` + `pip install toolbridge` (or `pip install 'toolbridge[a,b]'`), in
backticks, before its first example; a section may add its own `Install:` line for what only it
needs (its examples may use those extras too, until the next heading of its level or above). The
examples are the page's fenced blocks (but synopses and sample output, ``` or ```text) and the
example files it runs (`python examples/...`); what they need is read from them: Python imports
(mapped to extras by `toolbridge._extras.EXTRA_OF`, itself checked against pyproject.toml), model
strings and model classes, manifest kinds and `!cel` tags, browser actions, and command-line flags
(`--ray`, `--trace`, a `postgresql://` journal). An extra that installs another covers it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

import pytest

from toolbridge._extras import EXTRA_OF, extra_of

ROOT = Path(__file__).resolve().parent.parent
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]

DOCS = ROOT / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))

INSTALL = re.compile(r"^Install: `pip install (?:toolbridge|'toolbridge\[([a-z0-9,-]+)\]')`", re.M)
_HEADING = re.compile(r"^(#{1,6}) ", re.M)
_FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.S | re.M)
_EXAMPLE_FILE = re.compile(r"\bpython (examples/[\w/.-]+\.py)\b")
_NOT_EXAMPLES = {"", "text"}  # synopses and sample output

# What a block of another language than Python needs: (pattern, extra)
_TEXT_NEEDS = [
    (re.compile(r"[\"']openai:|AiOpenai\.|kind: OpenAI\b"), "openai"),
    (re.compile(r"[\"']anthropic:|kind: Anthropic\b"), "anthropic"),
    (re.compile(r"[\"'](?:google|gemini):|kind: Gemini\b"), "google"),
    (re.compile(r"!cel\s+[\"']"), "cel"),
    (re.compile(r"--ray\b"), "ray"),
    (re.compile(r"(?<!\w)--trace\b"), "otel-sdk"),
    (re.compile(r"postgresql://"), "postgres"),
    (re.compile(r'"action": "(?:goto|click|input|getText|screenshot|select)"'), "browser"),
]
# In Python: a model string, a model class called, a PostgreSQL URL
_MODEL_STRING = re.compile(r"(openai|anthropic|google|gemini):[\w.-]+")
_PROVIDER = {"openai": "openai", "anthropic": "anthropic", "google": "google", "gemini": "google"}
_CLASSES = {"OpenAIModel": "openai", "AnthropicModel": "anthropic", "GeminiModel": "google"}


def needs_of(text: str, lang: str) -> set[str]:
    """The extras a block (or an example file) of language `lang` needs."""
    if lang != "python":
        return {extra for pattern, extra in _TEXT_NEEDS if pattern.search(text)}
    needs: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _MODEL_STRING.fullmatch(node.value)
            if match:
                needs.add(_PROVIDER[match.group(1)])
            if node.value.startswith("postgresql://"):
                needs.add("postgres")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CLASSES:
            needs.add(_CLASSES[node.func.id])
        for name in names:
            extra = extra_of(name)
            if extra is not None:
                needs.add(extra)
            if name.startswith("toolbridge.integrations."):
                needs.add(name.split(".")[2].replace("_", "-"))
    return needs & set(EXTRAS)


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@cache
def _closure(dist: str) -> frozenset[str]:
    """`dist` and every distribution it installs (as installed here; extras' own deps left out)."""
    seen, todo = {dist}, [dist]
    while todo:
        try:
            reqs = requires(todo.pop()) or []
        except PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" in req:
                continue
            name = _name(req)
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return frozenset(seen)


def covered(extras: set[str]) -> set[str]:
    """`extras` and every extra they install whole (`openai-agents` installs `openai`)."""
    dists = set().union(*(_closure(_name(r)) for e in extras for r in EXTRAS[e]))
    return {e for e, reqs in EXTRAS.items() if all(_name(r) in dists for r in reqs)} | extras


def sections(text: str) -> list[tuple[int, int, str]]:
    """(level, start, body) of every heading's section (the page itself is level 0)."""
    marks = [(len(m.group(1)), m.start()) for m in _HEADING.finditer(text)]
    out = [(0, 0, text)]
    for i, (level, start) in enumerate(marks):
        end = next((s for lv, s in marks[i + 1 :] if lv <= level), len(text))
        out.append((level, start, text[start:end]))
    return out


def allowed_at(text: str, offset: int) -> set[str] | None:
    """The extras the install lines in force at `offset` name; None when the page has none."""
    page = INSTALL.search(text)
    if page is None:
        return None
    allowed: set[str] = set()
    for level, start, body in sections(text):
        if start <= offset < start + len(body):
            own = body[: m.start()] if level and (m := _HEADING.search(body, 1)) else body
            line = INSTALL.search(own) if level else page
            if line is not None and (level == 0 or line.start() + start > page.start()):
                allowed |= set(filter(None, (line.group(1) or "").split(",")))
    return allowed


def examples_of(text: str) -> list[tuple[int, str, str]]:
    """(offset, language, text) of every example block and every example file the page runs."""
    out = [(m.start(), m.group(1), m.group(2)) for m in _FENCE.finditer(text)]
    out = [block for block in out if block[1] not in _NOT_EXAMPLES]
    for m in _EXAMPLE_FILE.finditer(text):
        path = ROOT / m.group(1)
        assert path.is_file(), f"{m.group(1)} does not exist"
        out.append((m.start(), "python", path.read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("page", PAGES)
def test_the_page_states_its_install_line_and_its_examples_need_no_more(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    first = INSTALL.search(text)
    blocks = examples_of(text)
    assert first is not None, f"docs/{page} has no `Install: \\`pip install ...\\`` line"
    late = blocks and first.start() > min(b[0] for b in blocks)
    assert not late, f"docs/{page}: the install line comes after the first example"
    problems = []
    for offset, lang, body in blocks:
        allowed = allowed_at(text, offset) or set()
        extra = sorted(needs_of(body, lang) - covered(allowed))
        if extra:
            line = text.count("\n", 0, offset) + 1
            problems.append(f"docs/{page}:{line}: needs {extra}, the install line names {sorted(allowed)}")
    assert not problems, "\n".join(problems)


def test_the_scanner_sees_what_an_example_needs() -> None:
    assert "openai" in covered({"openai-agents"}) and "langchain" not in covered({"openai-agents"})
    graph = "from langgraph.prebuilt import create_react_agent\nimport json\n"
    assert needs_of(graph, "python") == {"langchain"}
    assert needs_of('agent = Agent("openai:gpt-4o-mini")', "python") == {"openai"}
    assert needs_of('x: !cel "a.b"', "yaml") == {"cel"}
    assert needs_of("toolbridge batch m.yaml --inputs in.jsonl --ray", "console") == {"ray"}
    page = (
        "Install: `pip install toolbridge`\n\n# A\n\n## Ray\n\n"
        "Install: `pip install 'toolbridge[ray]'`\n\nX1\n\n## B\n\nX2\n"
    )
    assert allowed_at(page, page.index("X1")) == {"ray"} and allowed_at(page, page.index("X2")) == set()


def _dists_of(extras: set[str]) -> set[str]:
    base = {_name(r) for r in requires("toolbridge") or [] if "extra ==" not in r}
    reqs = base | {_name(r) for e in extras for r in EXTRAS[e]}
    return set().union(*(_closure(d) for d in reqs))


def not_installed_by(extras: set[str]) -> list[str]:
    """The optional top-level modules that `pip install 'toolbridge[extras]'` does not install."""
    dists = _dists_of(extras)
    owners = packages_distributions()
    out = []
    for module in sorted({m.partition(".")[0] for m in EXTRA_OF}):
        if not any(_name(d) in dists for d in owners.get(module, [])):
            out.append(module)
    return out


RUNS = sorted(
    {
        (page, m.group(1))
        for page in PAGES
        for m in _EXAMPLE_FILE.finditer((DOCS / page).read_text(encoding="utf-8"))
    }
)


@pytest.mark.parametrize(("page", "example"), RUNS, ids=[f"{p}:{e}" for p, e in RUNS])
def test_the_example_runs_with_only_what_the_install_line_installs(page: str, example: str) -> None:
    """The example file, run as the page says, in an interpreter where every optional module the
    page's install line does not install is missing."""
    match = INSTALL.search((DOCS / page).read_text(encoding="utf-8"))
    assert match is not None
    blocked = not_installed_by(set(filter(None, (match.group(1) or "").split(","))))
    code = "import runpy, sys\n"
    code += "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
    code += f"sys.argv = [{example!r}]\nrunpy.run_path({example!r}, run_name='__main__')\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"blocked {blocked}:\n{out.stderr[-3000:]}"
    assert "ERR_MISSING_EXTRA" not in out.stdout + out.stderr, out.stdout[-2000:]
