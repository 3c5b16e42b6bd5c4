"""Fixtures of the adapter tests: a real server-filesystem, and runtimes closed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ig_helpers import Files

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.runtime import Runtime, create_runtime


@pytest.fixture
async def files(node: str, filesystem_js: str, tmp_path: Path) -> AsyncIterator[Files]:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "notes.txt").write_text("buy milk")
    client = StdioClient(node, [filesystem_js, str(folder)])
    async with client:
        yield Files(folder=folder, provider=McpToolProvider(client), client=client)


@pytest.fixture
def make_runtime() -> Iterator[Callable[..., Runtime]]:
    made: list[Runtime] = []

    def make(allow: list[str], **limits: Any) -> Runtime:
        runtime = create_runtime(permissions={"allow": allow}, limits={"max_duration_ms": 60_000, **limits})
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.close()
