"""Fixtures of the manifest tests: real MCP servers over Streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from subprocess_helpers import listening


@pytest.fixture(scope="session")
def listening_process() -> Callable[..., AbstractContextManager[str]]:
    """`listening` for tests: `with listening_process(argv, what) as url: ...`."""
    return listening


@pytest.fixture
def everything_http(everything_js: str, node: str) -> Iterator[str]:
    """server-everything over Streamable HTTP on a free port; yields its endpoint."""
    with listening([node, everything_js, "streamableHttp"], "server-everything", {"PORT": "{port}"}) as url:
        yield url
