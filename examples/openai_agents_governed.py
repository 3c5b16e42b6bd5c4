"""An OpenAI Agents SDK agent whose tools come from server-filesystem, governed by a session.

Run from the repository root (after `npm ci` in tests/servers, with the `openai-agents` extra):

    python examples/openai_agents_governed.py [FOLDER]

The model is a small `Model` of our own that returns scripted tool calls, so the example runs
offline: it lists the folder and reads notes.txt (granted), then tries to write a file (not
granted). The write never reaches the server; `Runner.run` raises `GovernedRunError` (a
`PolicyError`) with the runtime's code and generic message.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from toolbridge import McpToolProvider, PolicyError, StdioClient, create_runtime
from toolbridge.integrations.openai_agents import as_tools, run_hooks

SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(
        Path(__file__).resolve().parent.parent
        / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    ),
)


class ScriptedModel(Model):
    """Stands in for a real model (`Agent(model="gpt-4o", ...)` works the same way)."""

    def __init__(self, turns: list[Any]):
        self.turns = turns

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            text = ResponseOutputText(type="output_text", text=turn, annotations=[])
            output: list[Any] = [
                ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"call_{len(self.turns)}_{i}",
                    name=name,
                    arguments=json.dumps(args),
                )
                for i, (name, args) in enumerate(turn)
            ]
        return ModelResponse(
            output=output, usage=Usage(requests=1, input_tokens=50, output_tokens=10), response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(folder: Path) -> None:
    (folder / "notes.txt").write_text("buy milk")
    files = McpToolProvider(StdioClient("node", [SERVER, str(folder)]))
    binding = {
        "provider": files,
        "prefix": "fs_",
        "exclude": ["move_file", "create_directory"],
        "effects": "read",
    }
    runtime = create_runtime(
        permissions={
            "allow": ["model:scripted", "tool:fs_list_directory", "tool:fs_read_text_file", "effect:read"]
        },
        limits={"max_tool_calls": 8, "max_model_calls": 8, "max_duration_ms": 30_000},
    )
    model = ScriptedModel(
        [
            [
                ("fs_list_directory", {"path": str(folder)}),
                ("fs_read_text_file", {"path": str(folder / "notes.txt")}),
            ],
            [("fs_write_file", {"path": str(folder / "todo.txt"), "content": "buy milk"})],
            "done",
        ]
    )
    async with files, runtime.session(tool_providers=[binding], principal="alice") as session:
        tools = await as_tools(session, strict=True)  # strict schemas, converted on a copy
        agent = Agent(name="assistant", instructions="Manage my notes.", model=model, tools=tools)
        try:
            await Runner.run(
                agent,
                "Copy my notes into todo.txt.",
                hooks=run_hooks(session, model_id="scripted"),
                run_config=RunConfig(tracing_disabled=True),
            )
        except PolicyError as exc:
            print("run stopped:", type(exc).__name__, exc.code, "-", exc.message)
    outcome = session.result()
    print(f"session: {outcome.outcome} {outcome.error_code}; usage: {outcome.usage}")
    print("todo.txt exists:", (folder / "todo.txt").exists())
    print("journal:", sorted((c.tool_id, c.outcome) for c in runtime.inspect(outcome.run_id).calls))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp).resolve()))
