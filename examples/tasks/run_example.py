"""Task tools example: fill in a web form with the `add_user` tool of `tools.json`.

Serves `page.html` on a free loopback port, loads `tools.json`, calls `add_user` and then
`list_users`, and prints the task results. By default the tools run in process
(`TaskToolSet`); with `--stdio` they are served by `toolbridge serve-tasks` and called with the
official MCP client, as any MCP client would.

    python examples/tasks/run_example.py [--stdio]

Needs Chromium (Debian's `chromium`, or set TOOLBRIDGE_CHROMIUM).
"""

from __future__ import annotations

import functools
import http.server
import json
import sys
import threading
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
USER = {"name": "Ada Lovelace", "email": "ada@example.org", "joined": "1843-07-10"}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


async def in_process(page: str) -> list[dict[str, Any]]:
    from toolbridge.tasks import TaskToolSet

    origin = page.split("/page.html")[0]  # the browser may open only the pages of this origin
    async with TaskToolSet.from_file(HERE / "tools.json", browser_allow=[origin]) as tools:
        added = await tools.run("add_user", {"page": page, **USER})
        listed = await tools.run("list_users", {})
    return [added.envelope, listed.envelope]


async def over_stdio(page: str) -> list[dict[str, Any]]:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "import sys; from toolbridge.cli import main; sys.exit(main())",
            "serve-tasks",
            str(HERE / "tools.json"),
            "--allow-origin",
            page.split("/page.html")[0],
        ],
    )
    async with Client(server) as client:
        added = await client.call_tool("add_user", {"page": page, **USER})
        listed = await client.call_tool("list_users", {})
    return [added.structured_content or {}, listed.structured_content or {}]


def main() -> int:
    handler = functools.partial(QuietHandler, directory=str(HERE))
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        page = f"http://127.0.0.1:{site.server_address[1]}/page.html"
        run = over_stdio if "--stdio" in sys.argv[1:] else in_process
        added, listed = anyio.run(run, page)
    finally:
        site.shutdown()
        site.server_close()
    print("add_user:", json.dumps(added))
    print("list_users:", json.dumps(listed))
    ok = added.get("status") == "success" and USER["name"] in listed.get("result", {}).get("text", "")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
