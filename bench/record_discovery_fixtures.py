"""Record the `tools/list` of real MCP servers as JSON fixtures for bench/bench_discovery.py.

Usage: `python bench/record_discovery_fixtures.py NODE_MODULES_DIR... [--only=a,b]` after
installing the servers named in `SERVERS` from the npm registry, for example:

    mkdir -p /tmp/servers && cd /tmp/servers && npm install --ignore-scripts \\
        @modelcontextprotocol/server-github @notionhq/notion-mcp-server ...   # the SERVERS keys

Each server is started over stdio with dummy credentials (listing needs none of them to be
real), listed through the official SDK client (every page), and written to
bench/fixtures/discovery/<name>.json as `{"server", "package", "version", "tools": [...]}`
(the wire definitions as the server sent them). A server that does not start or list within
`TIMEOUT_S` is skipped with its reason.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

OUT = Path(__file__).resolve().parent / "fixtures" / "discovery"
TIMEOUT_S = 60

DUMMY = {
    "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_dummy",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-dummy",
    "SLACK_BOT_TOKEN": "xoxb-dummy",
    "SLACK_TEAM_ID": "T000",
    "GOOGLE_MAPS_API_KEY": "dummy",
    "BRAVE_API_KEY": "dummy",
    "OPENAPI_MCP_HEADERS": "{}",
    "NOTION_TOKEN": "ntn_dummy",
    "PRIVATE_APP_ACCESS_TOKEN": "dummy",
    "HEROKU_API_KEY": "dummy",
    "STRIPE_SECRET_KEY": "sk_test_dummy",
    "SUPABASE_ACCESS_TOKEN": "sbp_dummy",
    "TWILIO_ACCOUNT_SID": "AC00000000000000000000000000000000",
    "TWILIO_API_KEY": "SK00000000000000000000000000000000",
    "TWILIO_API_SECRET": "dummy",
}

# name -> (package, entry script inside it relative to node_modules/<package>, extra args)
SERVERS: dict[str, tuple[str, list[str]]] = {
    "github": ("@modelcontextprotocol/server-github", []),
    "gitlab": ("@modelcontextprotocol/server-gitlab", []),
    "slack": ("@modelcontextprotocol/server-slack", []),
    "google-maps": ("@modelcontextprotocol/server-google-maps", []),
    "memory": ("@modelcontextprotocol/server-memory", []),
    "puppeteer": ("@modelcontextprotocol/server-puppeteer", []),
    "sequential-thinking": ("@modelcontextprotocol/server-sequential-thinking", []),
    "redis": ("@modelcontextprotocol/server-redis", ["redis://127.0.0.1:1"]),
    "brave-search": ("@modelcontextprotocol/server-brave-search", []),
    "filesystem": ("@modelcontextprotocol/server-filesystem", ["/tmp"]),
    "everything": ("@modelcontextprotocol/server-everything", []),
    "notion": ("@notionhq/notion-mcp-server", []),
    "azure-devops": ("@azure-devops/mcp", ["dummyorg"]),
    "hubspot": ("@hubspot/mcp-server", []),
    "heroku": ("@heroku/mcp-server", []),
    "mongodb": ("mongodb-mcp-server", []),
    "playwright": ("@playwright/mcp", []),
    "twilio": ("@twilio-alpha/mcp", [f"{'AC' + '0' * 32}/{'SK' + '0' * 32}:dummy"]),
    "stripe": ("@stripe/mcp", ["--tools=all", "--api-key=sk_test_dummy"]),
    "supabase": ("@supabase/mcp-server-supabase", ["--access-token=sbp_dummy"]),
    "kubernetes": ("mcp-server-kubernetes", []),
    "desktop-commander": ("@wonderwhy-er/desktop-commander", []),
}
TWILIO_SERVICES = (
    "taskrouter_v1",
    "conversations_v1",
    "verify_v2",
    "serverless_v1",
    "messaging_v1",
    "studio_v2",
    "sync_v1",
    "video_v1",
    "voice_v1",
    "trusthub_v1",
    "numbers_v2",
    "flex_v1",
)
"""Twilio's server loads one API per `--services`: each is recorded as a server of its own."""
for _service in TWILIO_SERVICES:
    SERVERS[f"twilio-{_service.split('_')[0]}"] = (
        "@twilio-alpha/mcp",
        [*SERVERS["twilio"][1], "--services", f"twilio_{_service}"],
    )


def _entry(modules: list[Path], package: str) -> tuple[Path, str] | None:
    """The package's bin script and version (from its package.json), in the first folder that has it."""
    found = [m / package for m in modules if (m / package / "package.json").exists()]
    if not found:
        return None
    folder = found[0]
    meta_path = folder / "package.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
    binary = meta.get("bin")
    script = next(iter(binary.values())) if isinstance(binary, dict) else binary
    if not isinstance(script, str):
        return None
    return folder / script, str(meta.get("version", "?"))


async def _record(name: str, modules: list[Path]) -> str:
    package, args = SERVERS[name]
    found = _entry(modules, package)
    if found is None:
        return f"{name}: not installed"
    script, version = found
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", **DUMMY}
    params = StdioServerParameters(command="node", args=[str(script), *args], env=env)
    tools: list[dict[str, Any]] = []
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
    except Exception as exc:  # a server that cannot start here: skipped, said why
        return f"{name}: skipped ({type(exc).__name__}: {str(exc)[:120]})"
    OUT.mkdir(parents=True, exist_ok=True)
    data = {"server": name, "package": package, "version": version, "tools": tools}
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return f"{name}: {len(tools)} tools ({package}@{version})"


async def main(modules: list[Path], only: set[str]) -> None:
    for name in SERVERS:
        if not only or name in only:
            print(await _record(name, modules), flush=True)


if __name__ == "__main__":
    folders = [Path(a) for a in sys.argv[1:] if not a.startswith("--only=")]
    picked = {n for a in sys.argv[1:] if a.startswith("--only=") for n in a[7:].split(",")}
    anyio.run(main, folders, picked)
