"""Fixtures for the runtime tests: how to start the real MCP servers.

Clients are opened inside each test (`async with Client(params)`), not in async fixtures: an
SDK client owns a task group, which must be entered and left by the same task.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import StdioServerParameters


@pytest.fixture
def fs_params(tmp_path: Path, node: str, filesystem_js: str) -> StdioServerParameters:
    """server-filesystem, allowed only `tmp_path`."""
    return StdioServerParameters(command=node, args=[filesystem_js, str(tmp_path)])


@pytest.fixture
def everything_params(node: str, everything_js: str) -> StdioServerParameters:
    """server-everything over stdio."""
    return StdioServerParameters(command=node, args=[everything_js, "stdio"])
