"""Shared parts of the adapter tests: a real server-filesystem behind a governed session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.runtime import GovernedSession, Runtime, create_runtime

READ = ["tool:fs_read_text_file", "tool:fs_list_directory", "effect:read"]
SECRET_SERVER_TEXT = "Access denied"
"""What server-filesystem answers (`isError`) for a path outside its folder: never shown to a model."""


@dataclass
class Files:
    """A folder served by a real server-filesystem, and the binding that offers its tools."""

    folder: Path
    provider: McpToolProvider
    client: StdioClient

    def binding(self, **extra: Any) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "prefix": "fs_",
            "include": ["read_text_file", "write_file", "list_directory"],
            "effects": "read",
            **extra,
        }


@pytest.fixture
async def files(node: str, filesystem_js: str, tmp_path: Path) -> AsyncIterator[Files]:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "notes.txt").write_text("buy milk")
    client = StdioClient(node, [filesystem_js, str(folder)])
    async with client:
        yield Files(folder=folder, provider=McpToolProvider(client), client=client)


@pytest.fixture
def make_runtime() -> Callable[..., Runtime]:
    made: list[Runtime] = []

    def make(allow: list[str], **limits: Any) -> Runtime:
        runtime = create_runtime(permissions={"allow": allow}, limits={"max_duration_ms": 60_000, **limits})
        made.append(runtime)
        return runtime

    yield make  # type: ignore[misc]
    for runtime in made:
        runtime.close()


@asynccontextmanager
async def opened(runtime: Runtime, files: Files, **extra: Any) -> AsyncIterator[GovernedSession]:
    async with runtime.session(tool_providers=[files.binding(**extra)], principal="tester") as session:
        yield session


def calls(runtime: Runtime, session: GovernedSession) -> list[tuple[str, bool, str]]:
    """(tool id, request sent, outcome) of every call the journal holds for the session."""
    return [(c.tool_id, c.request_sent, c.outcome) for c in runtime.inspect(session.run_id).calls]
