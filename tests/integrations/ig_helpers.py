"""Shared parts of the adapter tests (imported as `ig_helpers`: a unique module name)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.content import ImagePart, TextPart
from toolbridge.functions import FunctionTools
from toolbridge.runtime import DeclaredTool, GovernedSession, Runtime, define_tool
from toolbridge.tools import ToolResult

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
"""A 1x1 PNG, base64."""
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


@asynccontextmanager
async def opened(runtime: Runtime, files: Files, **extra: Any) -> AsyncIterator[GovernedSession]:
    async with runtime.session(tool_providers=[files.binding(**extra)], principal="tester") as session:
        yield session


def calls(runtime: Runtime, session: GovernedSession) -> list[tuple[str, bool, str]]:
    """(tool id, request sent, outcome) of every call the journal holds for the session."""
    return [(c.tool_id, c.request_sent, c.outcome) for c in runtime.inspect(session.run_id).calls]


class Scripted(Model):
    """A `Model` answering with scripted turns; records every input it is given."""

    def __init__(self, *turns: Any):
        self.turns = list(turns)
        self.seen: list[str] = []
        self.tool_names: list[list[str]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.seen.append(json.dumps(input, default=str))
        self.tool_names.append([t.name for t in tools])
        turn = self.turns.pop(0)
        n = len(self.seen)
        if isinstance(turn, str):
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"m{n}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=turn, annotations=[])],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"c{n}_{i}",
                    id=f"fc{n}_{i}",
                    name=name,
                    arguments=json.dumps(args),
                    status="completed",
                )
                for i, (name, args) in enumerate(turn)
            ]
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def add_and_picture() -> tuple[DeclaredTool, FunctionTools]:
    """A declared `math.add` with a structured result ({"sum": ...}), and a function tool `picture`
    whose result is a text and a PNG: the two result shapes each adapter must carry."""

    def picture() -> ToolResult:
        """A picture."""
        return ToolResult.of_parts([TextPart("a dot"), ImagePart(PIXEL, "image/png")])

    add = define_tool(
        id="math.add",
        version="1",
        description="Add.",
        input={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output={"type": "object", "properties": {"sum": {"type": "integer"}}},
        effects="none",
        capabilities=[],
        execute=lambda args, ctx: {"sum": args["a"] + args["b"]},
    )
    return add, FunctionTools([picture])
