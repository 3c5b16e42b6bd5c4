"""Govern the tool calls of your own code (or of any agent framework) with a session.

Run from the repository root (after `npm ci` in tests/servers):

    python examples/governed_session.py [FOLDER]

A session gets exactly the rules of a governed agent run, without an agent: the read is
granted and reaches server-filesystem; the write is not, so it never reaches the server, and
the session is closed from then on (fail closed). Both are in the journal, with the principal.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from toolbridge import McpToolProvider, PolicyError, StdioClient, create_runtime

SERVER = os.environ.get(
    "TOOLBRIDGE_FILESYSTEM_SERVER",
    str(
        Path(__file__).resolve().parent.parent
        / "tests/servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    ),
)


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
        permissions={"allow": ["tool:fs_read_text_file", "effect:read"]},
        limits={"max_tool_calls": 8, "max_duration_ms": 30_000},
    )
    async with files, runtime.session(tool_providers=[binding], principal="alice") as session:
        print("tools:", [spec.name for spec in await session.list_tools()])
        result = await session.call_tool("fs_read_text_file", {"path": str(folder / "notes.txt")})
        print("read:", result.to_text())
        try:
            await session.call_tool("fs_write_file", {"path": str(folder / "x.txt"), "content": "no"})
        except PolicyError as exc:
            print("write refused:", exc.code, "-", exc.message)
        try:
            await session.call_tool("fs_read_text_file", {"path": str(folder / "notes.txt")})
        except PolicyError as exc:
            print("read again:", exc.code)
    outcome = session.result()
    print(f"session: {outcome.outcome} {outcome.error_code}; x.txt exists: {(folder / 'x.txt').exists()}")
    record = runtime.inspect(outcome.run_id)
    print(f"journal: principal={record.principal}", [(c.tool_id, c.outcome) for c in record.calls])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1]).resolve()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(Path(tmp).resolve()))
