"""Fixtures of the fault suite: the hostile server (see hostile_server.py)."""

from __future__ import annotations

from types import ModuleType

import pytest
from _support import HOSTILE_CMD, load_hostile


@pytest.fixture(scope="session")
def hostile() -> ModuleType:
    """The hostile server's module, for `payload()` and `POISON_DESCRIPTION`."""
    return load_hostile()


@pytest.fixture(scope="session")
def hostile_cmd() -> list[str]:
    """Command line of the hostile server (append switches such as `--poison`)."""
    return list(HOSTILE_CMD)
