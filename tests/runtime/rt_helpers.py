"""Helpers shared by the runtime tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

from typing import Any

import pydantic


class CraftedClient:
    """A client object that returns a fixed result (wire-form dict) and counts the calls."""

    def __init__(self, result: Any = None, *, error: BaseException | None = None) -> None:
        self.result = result
        self.error = error
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        if self.error is not None:
            raise self.error
        return self.result


class WriteIn(pydantic.BaseModel):
    path: str
    content: str


class Message(pydantic.BaseModel):
    content: str


class Empty(pydantic.BaseModel):
    pass


def scripted(*turns: Any) -> Any:
    """A ScriptedModel with these turns."""
    from toolbridge.agent.models import ScriptedModel

    return ScriptedModel(list(turns))


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted turn that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def exists(path: Any) -> bool:
    """`path.exists()`, as a sync helper for async tests."""
    return bool(path.exists())


def read_bytes_of(folder: Any, prefix: str) -> bytes:
    """All bytes of the files in `folder` whose names start with `prefix`."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.name.startswith(prefix))


def read_text(path: Any) -> str:
    """`path.read_text()`, as a sync helper for async tests."""
    return str(path.read_text())
