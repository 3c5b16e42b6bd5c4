"""Fixtures for the agent tests: real MCP servers (server-filesystem, server-everything) and data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolbridge.clients import StdioClient


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "todo.md").write_text("- write tests\n")
    return root


@pytest.fixture
async def fs_client(node: str, filesystem_js: str, data_dir: Path) -> AsyncIterator[StdioClient]:
    async with StdioClient(node, [filesystem_js, str(data_dir)]) as client:
        yield client


@pytest.fixture
async def everything_client(everything_cmd: list[str]) -> AsyncIterator[StdioClient]:
    # server-everything keeps a long-running operation going after a cancel: a short grace
    # period lets the fixture stop it promptly (SIGTERM) once the test is done.
    async with StdioClient(everything_cmd[0], everything_cmd[1:], shutdown_grace_ms=500) as client:
        yield client
