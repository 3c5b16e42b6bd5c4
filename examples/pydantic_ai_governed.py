"""A pydantic-ai agent whose tools come from server-filesystem, governed by a toolbridge session.

Run from the repository root (after `npm ci` in tests/servers, with the `pydantic-ai` extra):

    python examples/pydantic_ai_governed.py [FOLDER]

The model is pydantic-ai's `FunctionModel`, scripted so the example runs offline: it reads
notes.txt (granted), then tries to write a file (not granted). The write never reaches the
server and the run stops `blocked`; the session's journal holds both calls.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolbridge import McpToolProvider, PolicyError, StdioClient, create_runtime
from toolbridge.integrations.pydantic_ai import governed

SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(
        Path(__file__).resolve().parent.parent
        / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    ),
)


def scripted_model(folder: Path) -> FunctionModel:
    """Stands in for a real model (`Agent("openai:gpt-4o", ...)` works the same way)."""

    def decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart("fs_read_text_file", {"path": str(folder / "notes.txt")})]
            )
        if len(returns) == 1:
            print("the model read:", returns[0].content)  # server-filesystem's structured result
            write = {"path": str(folder / "todo.txt"), "content": returns[0].content["content"]}
            return ModelResponse(parts=[ToolCallPart("fs_write_file", write)])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(decide, model_name="scripted")


async def main(folder: Path) -> None:
    (folder / "notes.txt").write_text("buy milk")
    files = McpToolProvider(StdioClient("node", [SERVER, str(folder)]))
    binding = {
        "provider": files,
        "prefix": "fs_",
        "include": ["read_text_file", "write_file"],
        "effects": "read",
    }
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:fs_read_text_file", "effect:read"]},
        limits={"max_tool_calls": 8, "max_model_calls": 8, "max_duration_ms": 30_000},
    )
    async with files, runtime.session(tool_providers=[binding], principal="alice") as session:
        # `governed(session)` gives the agent the session's tools and governs its model calls;
        # `toolset(session)` in `toolsets=[...]` gives the tools alone.
        agent = Agent(scripted_model(folder), capabilities=[governed(session, model_id="scripted")])
        try:
            await agent.run("Copy my notes into todo.txt.")
        except PolicyError as exc:
            print("run stopped:", exc.code, "-", exc.message)
    outcome = session.result()
    print(f"session: {outcome.outcome} {outcome.error_code}; model calls: {outcome.usage['model_calls']}")
    print("todo.txt exists:", (folder / "todo.txt").exists())
    print("journal:", [(c.tool_id, c.outcome) for c in runtime.inspect(outcome.run_id).calls])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp).resolve()))
