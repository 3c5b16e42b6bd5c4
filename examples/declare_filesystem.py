"""Declare one tool of server-filesystem and run it under a governed runtime.

Run from the repository root (after `npm ci` in tests/servers):

    python examples/declare_filesystem.py [FOLDER]

The same scripted agent runs twice: first under a runtime without the grants for the tool (the
run ends `blocked` and the server never hears of the call), then with them (the file is written
and the evidence of the call is printed).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from toolbridge import Agent, ScriptedModel, StdioClient, create_runtime, define_mcp_tool

SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(
        Path(__file__).resolve().parent.parent
        / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    ),
)


class WriteFile(BaseModel):
    """What the model may send: both fields, nothing else."""

    path: str
    content: str = Field(max_length=10_000)


class Written(BaseModel):
    """What the server must answer in `structuredContent`."""

    content: str


def scripted_agent(tool: object, target: Path) -> Agent:
    """An offline agent whose model writes `target`, then answers."""
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "fs_write_file", "arguments": {"path": str(target), "content": "hello"}}
                ]
            },
            {"text": f"Wrote {target.name}."},
        ]
    )
    return Agent(model, tools=[tool])


async def main(folder: Path) -> None:
    async with StdioClient("node", [SERVER, str(folder)]) as client:
        write_file = define_mcp_tool(
            id="fs.write_file",
            version="1",
            description="Write a UTF-8 text file inside the allowed folder.",
            remote_name="write_file",  # the tool's name on the server
            input=WriteFile,
            output=Written,
            effects="write",
            capabilities=["fs:write"],
            timeout_ms=10_000,
            client=client,
        )
        target = folder / "note.txt"

        # 1. Without the grants, the call is refused before anything is sent.
        strict = create_runtime(permissions={"allow": ["model:scripted"]})
        refused = await strict.run(scripted_agent(write_file, target), "Write a note.")
        print(f"without grants: {refused.outcome} {refused.error_code}; file exists: {target.exists()}")

        # 2. With them, it runs; the evidence says what was sent and what came back.
        runtime = create_runtime(
            permissions={"allow": ["model:scripted", "tool:fs.write_file", "fs:write", "effect:write"]},
            limits={"max_tool_calls": 4, "max_duration_ms": 30_000},
        )
        result = await runtime.run(scripted_agent(write_file, target), "Write a note.")
        print(f"with grants: {result.outcome}; answer: {result.output!r}; file: {target.read_text()!r}")
        for call in runtime.inspect(result.run_id).calls:
            print(
                f"  {call.tool_id} v{call.tool_version}: sent={call.request_sent} "
                f"response={call.response_received} outcome={call.outcome} "
                f"args_sha256={call.args_sha256[:12]}"
            )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp).resolve()))
