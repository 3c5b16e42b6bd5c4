"""docs/limits.md: its example runs, and what it claims about defaults is true."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from _support import HOSTILE

from toolbridge.clients import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT, MAX_ARGUMENT_DEPTH

DOC = Path(__file__).resolve().parents[2] / "docs" / "limits.md"


async def test_the_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)
    seen = await namespace["main"](str(HOSTILE))
    assert seen == ["ERR_MCP_PROTOCOL", "ERR_MCP_PROTOCOL", "ERR_INVALID_INPUT", "still here"]


def test_the_documented_default_cap_is_the_real_one() -> None:
    assert "is 128 MiB" in DOC.read_text()
    assert DEFAULT_MAX_MESSAGE_BYTES == 128 * 1024 * 1024


def test_the_documented_deadline_and_depth_are_the_real_ones() -> None:
    text = DOC.read_text()
    assert "`DEFAULT_TIMEOUT` = 300 s" in text and DEFAULT_TIMEOUT == 300.0
    assert "`MAX_ARGUMENT_DEPTH` (64)" in text and MAX_ARGUMENT_DEPTH == 64
