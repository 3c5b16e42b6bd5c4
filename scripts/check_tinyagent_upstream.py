"""Cross-check task tools against TinyAgent's own tool files (a local check, not part of CI).

    python scripts/check_tinyagent_upstream.py DIR

DIR holds copies of
TinyAgent's `mcp-tool.json` files, never committed here. Every file must load (the demo files:
TinyAgent's current format; the early mock-server files: rewritten, with one `ERR_TASK_LEGACY`
deprecation warning naming the retired features) or fail because a tool has no task (an app-side
function, `ERR_TASK_INVALID`). Then the newest demo file (tool `addUserByUI`) is served by
`toolbridge serve-tasks`, unchanged, against `tests/tasks/site/users.html` (a form of our own made
like TinyAgent's demo, date picker included), called with the official MCP client, and the
page's submission is checked. Exit status 0 when everything holds.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "tests" / "tasks" / "site"
POSTED: list[Any] = []


class _Site(http.server.SimpleHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        POSTED.append(json.loads(body or b"null"))
        answer = json.dumps({"received": POSTED[-1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def check_loading(folder: Path) -> tuple[bool, list[Path]]:
    from toolbridge.errors import ConfigError
    from toolbridge.tasks import TaskToolSet

    ok = True
    loaded: list[Path] = []
    for path in sorted(folder.glob("*.json")):
        try:
            tools = TaskToolSet.from_file(path)
        except ConfigError as exc:
            good = (
                exc.code == "ERR_TASK_INVALID"
                and "app-side function" in exc.message
                and "\n" not in exc.message
            )
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {path.name}: refused: {exc.code}: {exc.message[:300]}")
            continue
        loaded.append(path)
        notes = "; ".join(str(w) for w in tools.warnings) or "no warnings"
        print(f"ok   {path.name}: loads: {', '.join(tools.names)} ({notes})")
    if not any("demo" in p.name for p in loaded):
        print("FAIL no demo file loaded")
        ok = False
    return ok, loaded


async def run_demo(path: Path, site: str) -> bool:
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "import sys; from toolbridge.cli import main; sys.exit(main())",
            "serve-tasks",
            str(path),
            "--start-url",
            f"{site}/users.html",
        ],
    )
    args = {"name": "岑子轩", "sex": "女", "date": "2001-09-23"}
    with anyio.fail_after(120):
        async with Client(server) as client:
            result = await client.call_tool("addUserByUI", args)
    print(f"addUserByUI over serve-tasks: isError={result.is_error} {result.structured_content}")
    await anyio.sleep(0.5)
    good = not result.is_error and POSTED[-1:] == [args]
    print(f"{'ok  ' if good else 'FAIL'} the page submitted {POSTED[-1:]}")
    return good


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: scripts/check_tinyagent_upstream.py DIR (copies of TinyAgent's mcp-tool.json files)")
        return 2
    folder = Path(sys.argv[1])
    if not folder.is_dir():
        print(f"no folder {folder}: nothing to check")
        return 1
    ok, loaded = check_loading(folder)
    demos = [p for p in loaded if "demo" in p.name]
    if demos:
        handler = lambda *a: _Site(*a, directory=str(SITE))  # noqa: E731
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            ok &= anyio.run(run_demo, demos[-1], f"http://127.0.0.1:{httpd.server_address[1]}")
        finally:
            httpd.shutdown()
            httpd.server_close()
    print("all good" if ok else "PROBLEMS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
