"""Every ```python block in docs/ either runs in a test or is marked as a fragment, and all compile.

A fragment is a block right after a `<!-- fragment: why -->` line: it shows a shape (a signature,
a continuation of an earlier example) and does not pretend to run; it must still be valid Python
(no `await` outside a function, no `...` in place of an argument that the code would run). Every
other block runs in the test named for its page below; this test checks that the test exists and
reads that page, so a new page with a Python block cannot go untested.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# page -> the test module that runs its non-fragment Python blocks
RUN_BY = {
    "agent.md": "tests/agent/test_examples.py",
    "batch.md": "tests/batch/test_batch_docs.py",
    "declare.md": "tests/runtime/test_runtime_docs.py",
    "describe.md": "tests/tasks/test_tasks_docs.py",
    "discover.md": "tests/test_bridge.py",
    "discovery.md": "tests/test_discovery_index.py",
    "errors.md": "tests/test_docs_errors.py",
    "gateway.md": "tests/gateway/test_gateway_oauth_manifest.py",
    "limits.md": "tests/faults/test_faults_docs.py",
    "manifests.md": "tests/manifest/test_docs.py",
    "observability.md": "tests/telemetry/test_telemetry_docs.py",
    "pinning.md": "tests/pinning/test_pinning_docs.py",
    "security.md": "tests/oauth/test_security_docs.py",
    "integrations/langchain.md": "tests/integrations/test_integrations_docs.py",
    "integrations/openai-agents.md": "tests/integrations/test_integrations_docs.py",
    "integrations/pydantic-ai.md": "tests/integrations/test_integrations_docs.py",
}


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line, code, is_fragment) for each ```python block of a Markdown text."""
    out = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        out.append((line, match.group(1), before.startswith("<!-- fragment")))
    return out


PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", PAGES)
def test_every_block_compiles(page: str) -> None:
    for line, code, _ in python_blocks((DOCS / page).read_text(encoding="utf-8")):
        try:
            compile(code, f"docs/{page}:{line}", "exec", dont_inherit=True)
        except SyntaxError as exc:
            pytest.fail(f"docs/{page}:{line}: a ```python block is not valid Python: {exc}")


@pytest.mark.parametrize("page", PAGES)
def test_every_runnable_block_has_a_test(page: str) -> None:
    runnable = [line for line, _, fragment in python_blocks((DOCS / page).read_text()) if not fragment]
    if not runnable:
        return
    assert page in RUN_BY, f"docs/{page} has ```python blocks (lines {runnable}) that no test runs"
    test = ROOT / RUN_BY[page]
    assert test.exists(), test
    assert Path(page).name in test.read_text(), f"{RUN_BY[page]} does not read docs/{page}"


def test_the_fragment_marker_is_recognised() -> None:
    text = "a\n<!-- fragment: shape -->\n```python\nf(x)\n```\n\n```python\nprint(1)\n```\n"
    assert python_blocks(text) == [(3, "f(x)\n", True), (7, "print(1)\n", False)]


def test_a_top_level_await_does_not_compile() -> None:
    with pytest.raises(SyntaxError):
        compile("result = await runtime.run(agent, 'x')\n", "<doc>", "exec", dont_inherit=True)
