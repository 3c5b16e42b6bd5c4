"""The project's module rule: a module holds one concept.

A line count cannot say whether a module holds one concept, but a long module is where two
concepts hide, so every module over `REVIEW_AT` lines is named below with the one concept it
holds and why it is not split. A module that grows past the mark fails this test until someone
has looked and either split it where its concept splits (with a name that says what each part
holds) or added it here with its reason. Explanation is never deleted to get under the mark.
"""

from __future__ import annotations

from pathlib import Path

import toolbridge

REVIEW_AT = 800

REVIEWED: dict[str, str] = {
    "clients/_base.py": (
        "one MCP client connection's life: the owner task that alone enters the SDK client, "
        "connecting, retiring and the per-call path; its call support, requests, listings and "
        "transports are already modules of their own"
    ),
}
"""Modules over `REVIEW_AT` lines, each with the one concept it holds and why it stays whole."""


def _sizes() -> dict[str, int]:
    root = Path(toolbridge.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert len(modules) > 50, "the package's modules were not found"
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in modules
    }


def test_every_long_module_was_reviewed_for_one_concept() -> None:
    over = {name: n for name, n in _sizes().items() if n > REVIEW_AT and name not in REVIEWED}
    assert not over, (
        f"modules over {REVIEW_AT} lines not reviewed: {over}; split each where its concept "
        "splits, or name its one concept in REVIEWED"
    )


def test_the_reviewed_list_is_not_stale() -> None:
    sizes = _sizes()
    stale = [name for name in REVIEWED if sizes.get(name, 0) <= REVIEW_AT]
    assert not stale, f"no longer over {REVIEW_AT} lines (or gone): {stale}; remove them from REVIEWED"
