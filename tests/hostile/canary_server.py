"""A careless MCP server for the secret canary: it repeats whatever it was given, everywhere.

Run: `python canary_server.py stdio [ARGS...]`, `python canary_server.py crash [ARGS...]`, or
`python canary_server.py http PORT SECRET`.

* `stdio`: an `MCPServer` over stdio that first prints its whole command line and environment to
  stderr (as badly written servers do). Tools: `echo {text}`, `whoami` (its command line),
  `env {name}` (the value of a variable, or `<unset>`), `fail` (a tool error quoting its command
  line and environment).
* `crash`: prints its command line and environment to stderr and exits 3 before any handshake.
* `http PORT SECRET`: the same tools over Streamable HTTP at `/SECRET/mcp`, answering only
  requests that carry `X-Api-Key: SECRET` and `?key=SECRET` (401 otherwise, with a body that
  quotes what it got).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("canary")


def _dump() -> str:
    return f"argv={sys.argv!r} env={dict(os.environ)!r}"


@mcp.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@mcp.tool()
def whoami() -> str:
    """Say how the server was started (its command line)."""
    return " ".join(sys.argv)


@mcp.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server, or <unset>."""
    return os.environ.get(name, "<unset>")


@mcp.tool()
def fail() -> str:
    """Fail, quoting the command line and environment."""
    raise RuntimeError(f"cannot work like this: {_dump()}")


def _http(port: int, secret: str) -> None:
    import uvicorn
    from starlette.responses import JSONResponse

    app = mcp.streamable_http_app(streamable_http_path=f"/{secret}/mcp")

    async def gate(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            query = scope.get("query_string", b"").decode()
            if headers.get("x-api-key") != secret or f"key={secret}" not in query:
                response = JSONResponse(
                    {"error": "unauthorized", "got": {"path": scope["path"], "query": query}}, status_code=401
                )
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(gate, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        _http(int(sys.argv[2]), sys.argv[3])
    else:
        print(f"canary server starting: {_dump()}", file=sys.stderr, flush=True)
        if mode == "crash":
            sys.exit(3)
        mcp.run("stdio")
