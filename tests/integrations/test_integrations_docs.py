"""docs/integrations/: each page holds its example verbatim, and the example prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "pydantic-ai.md": "pydantic_ai_governed.py",
    "langchain.md": "langgraph_governed.py",
    "openai-agents.md": "openai_agents_governed.py",
}


@pytest.mark.parametrize(("page", "example"), PAGES.items())
def test_the_page_shows_its_example_and_what_it_prints(
    page: str, example: str, tmp_path: Path, filesystem_js: str
) -> None:
    doc = (ROOT / "docs" / "integrations" / page).read_text()
    source = (ROOT / "examples" / example).read_text()
    assert "```python\n" + source + "```" in doc
    assert [b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.S)] == [source]  # the rest: text
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = doc.split("What it prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert done.stdout == shown
    assert (tmp_path / "notes.txt").read_text() == "buy milk" and not (tmp_path / "todo.txt").exists()
    assert f"(integrations/{page})" in (ROOT / "docs" / "README.md").read_text()
