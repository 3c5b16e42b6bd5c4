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
