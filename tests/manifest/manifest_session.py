"""A session provider for `Mcp.SessionProvider` tests: it opens one real MCP session itself.

`provide()` is what a registry or vault would do: the first call runs the `initialize`
handshake against `$TB_TEST_MCP_URL` and keeps the session id the server assigned; every call
returns that id and is counted, so a test can see that the client asked before each request and
never opened a session of its own.
"""

from __future__ import annotations

import os

import httpx2

CALLS: list[str] = []
_SESSION: dict[str, str] = {}
_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def provide() -> dict[str, str]:
    url = os.environ["TB_TEST_MCP_URL"]
    if url not in _SESSION:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(
                url,
                headers=_HEADERS,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "vault", "version": "1.0.0"},
                    },
                },
            )
            session = response.headers["mcp-session-id"]
            await http.post(
                url,
                headers={**_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"},
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            )
        _SESSION[url] = session
    CALLS.append(_SESSION[url])
    return {"sessionId": _SESSION[url]}


def stale() -> str:
    """A session id no server knows."""
    return "no-such-session"
