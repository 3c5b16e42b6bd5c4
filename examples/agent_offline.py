"""An offline agent run: list a folder, read a file, write a summary, through a real MCP server.

Run from the repository root (after `npm ci` in tests/servers; no API key, no network):

    python examples/agent_offline.py [FOLDER]

Without FOLDER, `examples/data/` is copied to a temporary folder first, so the repository stays
clean. The model is a `ScriptedModel` (deterministic turns); the tools are those of
`@modelcontextprotocol/server-filesystem`, started over stdio and offered under the prefix `fs_`,
plus one native Python tool. Swap in `OpenAIModel("gpt-4o-mini")` for a real model
(see `examples/agent_openai.py`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

from toolbridge.agent import Agent, ScriptedModel, ToolResultRecord
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.functions import FunctionTools

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(ROOT / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
)


def count_words(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text to count.
    """
    return len(text.split())


def shown(outcome: ToolResultRecord) -> str:
    """The first line of what a tool returned (server-filesystem answers in structured content)."""
    result = outcome.result
    if result is None:
        text = str(outcome.content)
    elif result.kind == "structured" and isinstance(result.structured, dict):
        text = str(result.structured.get("content", result.to_text()))
    else:
        text = result.to_text()
    lines = text.strip().splitlines()
    return lines[0][:70] if lines else ""


def script(folder: Path) -> ScriptedModel:
    """The model's turns, with model-facing tool names (prefix `fs_` for the server's tools)."""
    notes = folder / "meeting-notes.txt"
    summary = folder / "summary.md"
    return ScriptedModel(
        [
            {"tool_calls": [{"name": "fs_list_directory", "arguments": {"path": str(folder)}}]},
            {"tool_calls": [{"name": "fs_read_text_file", "arguments": {"path": str(notes)}}]},
            {"tool_calls": [{"name": "count_words", "arguments": {"text": notes.read_text()}}]},
            {
                "tool_calls": [
                    {
                        "name": "fs_write_file",
                        "arguments": {
                            "path": str(summary),
                            "content": "# Summary of meeting-notes.txt\n\n"
                            "- One server process per client; per-call timeouts (60 s default).\n"
                            "- Next: governed tools. Release notes: Dana.\n",
                        },
                    }
                ]
            },
            {"text": "I read meeting-notes.txt and wrote summary.md next to it."},
        ]
    )


async def main(folder: Path) -> None:
    files = McpToolProvider(StdioClient("node", [SERVER, str(folder)]))
    agent = Agent(
        script(folder),
        tool_providers=[
            {
                "provider": files,
                "prefix": "fs_",
                "include": ["list_directory", "read_text_file", "write_file"],
            },
            FunctionTools([count_words]),
        ],
        system="You keep short summaries of the notes in a folder.",
    )
    async with files:
        result = await agent.run("Summarize the meeting notes into summary.md.")

    for number, step in enumerate(result.steps, 1):
        for call, outcome in zip(step.tool_calls, step.tool_results, strict=True):
            print(f"step {number}: {call.name} -> {'ERROR ' if outcome.error else ''}{shown(outcome)}")
    print(f"answer: {result.text}")
    print(f"finish: {result.finish_reason}, model calls: {result.usage.requests}")
    print(f"--- {folder / 'summary.md'}")
    print((folder / "summary.md").read_text(), end="")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory(prefix="toolbridge-example-") as tmp:
            work = Path(tmp, "data")
            shutil.copytree(ROOT / "examples" / "data", work)
            asyncio.run(main(work.resolve()))
