"""What is shipped speaks for itself: no build machine's paths, no paths outside the project, no
internal issue numbers, in docs/, examples/, scripts/, src/ and README.md.

A reader of the docs or a user of an example has neither the machine the project was built on nor
its issue tracker: an absolute path of that machine (`/work/...`, a home folder), a path that leads
out of the repository (`../shared/...`, a Markdown link above the root) or "issue 18" means nothing
to them. Every relative Markdown link must also lead to a file of the project.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("docs", "examples", "scripts", "src")
_TEXT = {".md", ".py", ".yaml", ".yml", ".json", ".txt", ".html", ".toml", ".sh", ".cfg", ".ini"}
_SKIP = {"__pycache__", "node_modules", ".pytest_cache", ".mypy_cache"}

_MACHINE_PATH = re.compile(
    r"(?<![\w.])/(?:work|Users|root|srv|mnt|opt/build)/[\w.-]+|/home/(?!user/)[\w.-]+/|[A-Z]:\\Users\\"
)
_OUTSIDE = re.compile(r"(?:\.\./)+shared\b|\.\./\.\./\.\./")
_ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|\b(?:PR|pull request) #?\d+|(?<![\w/&#])#\d{1,4}(?![\w-])")
_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def shipped_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in _TEXT and not _SKIP & set(path.parts):
                files.append(path)
    return files


FILES = shipped_files()


def findings(text: str, *, css: bool = False) -> list[str]:
    """What a text says that it should not: machine paths, paths outside, issue numbers (`#12`
    too, but in HTML and CSS, where `#999` is a colour)."""
    out = []
    for name, pattern in (("machine path", _MACHINE_PATH), ("path outside", _OUTSIDE), ("issue", _ISSUE)):
        hits = [m.group(0) for m in pattern.finditer(text)]
        out += [f"{name} {hit!r}" for hit in hits if not (css and hit.startswith("#"))]
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_no_machine_paths_paths_outside_or_issue_numbers(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = []
    for n, line in enumerate(text.splitlines(), 1):
        problems += [f"{path.relative_to(ROOT)}:{n}: {w}" for w in findings(line, css=path.suffix == ".html")]
    if path.suffix == ".md":
        for m in _LINK.finditer(text):
            target = (path.parent / m.group(1).split("#")[0]).resolve()
            if not target.is_relative_to(ROOT) or not target.exists():
                line = text.count("\n", 0, m.start()) + 1
                where = f"{path.relative_to(ROOT)}:{line}"
                problems.append(f"{where}: link {m.group(1)!r} leads to no file of the project")
    assert not problems, "\n".join(problems)


def test_the_scan_sees_what_it_must() -> None:
    assert findings('args: ["/work/wt/input/tests/servers/x.js"]') == ["machine path '/work/wt'"]
    assert findings("copies in ../shared/reference/upstream") == ["path outside '../shared'"]
    assert findings("the 40 blocks of issue 18") == ["issue 'issue 18'"]
    assert findings("Issue 13's benchmark") == ["issue 'Issue 13'"]
    assert findings("see #42") == ["issue '#42'"]
    clean = "a hostile path …/home/user/.ssh/authorized_keys; ../bench/README.md; color #fff; v2.1 #"
    assert findings(clean) == [] and findings("color: #999;", css=True) == []
