"""HttpClient over Streamable HTTP: server-everything, and a small server that rejects sessions.

server-everything runs as a real `node` process (see conftest.py). The session-rejecting server
is a few lines of `http.server` speaking just enough of the 2025-11-25 HTTP transport to hand out a
session id and then answer 404 for it, as a server that lost its state would.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from subprocess_helpers import listening
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import HttpClient
from toolbridge.content import ImagePart
from toolbridge.errors import ConfigError, McpTimeoutError, SessionInvalidError, ToolError, TransportError


def _text(result: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in result["content"] if b.get("type") == "text")


async def test_lists_and_calls_over_http(everything_http: Any) -> None:
    async with HttpClient(everything_http.url, timeout=20) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"echo", "get-sum", "get-tiny-image", "get-structured-content", "get-resource-links"} <= names
        assert client.protocol_version == "2025-11-25"
        results = await asyncio.gather(*(client.call_tool("echo", {"message": str(i)}) for i in range(20)))
        assert [_text(r) for r in results] == [f"Echo: {i}" for i in range(20)]


async def test_content_kinds_over_http(everything_http: Any) -> None:
    async with McpToolProvider(HttpClient(everything_http.url, timeout=20)) as provider:
        image = await provider.call_tool("get-tiny-image", {})
        assert image.kind == "parts"
        images = [p for p in image.parts if isinstance(p, ImagePart)]
        assert len(images) == 1 and images[0].media_type == "image/png"
        structured = await provider.call_tool("get-structured-content", {"location": "Chicago"})
        assert structured.kind == "structured"
        assert set(structured.structured) == {"temperature", "conditions", "humidity"}
        links = await provider.call_tool("get-resource-links", {"count": 2})
        assert links.kind == "raw"
        assert [b["type"] for b in links.raw] == ["text", "resource_link", "resource_link"]
        with pytest.raises(ToolError) as info:
            await provider.call_tool("get-sum", {"a": "one", "b": 2})
        assert info.value.code == "ERR_MCP_TOOL_ERROR"
        assert info.value.server_text is not None and "expected number" in info.value.server_text


async def test_timeout_over_http_then_next_call_works(everything_http: Any) -> None:
    async with HttpClient(everything_http.url) as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("trigger-long-running-operation", {"duration": 3, "steps": 3}, timeout=0.3)
        assert _text(await client.call_tool("echo", {"message": "after"})) == "Echo: after"


async def test_a_restarted_server_gets_a_new_session(
    start_everything_http: Callable[[int | None], Any],
) -> None:
    server = start_everything_http(None)
    async with HttpClient(server.url, timeout=20) as client:
        assert _text(await client.call_tool("echo", {"message": "one"})) == "Echo: one"
        generation = client.generation
        server.kill()
        start_everything_http(server.port)  # same URL, no memory of the old session
        assert _text(await client.call_tool("echo", {"message": "two"})) == "Echo: two"
        assert client.generation > generation


async def test_a_dead_server_is_a_transport_error(
    start_everything_http: Callable[[int | None], Any],
) -> None:
    server = start_everything_http(None)
    async with HttpClient(server.url) as client:
        await client.call_tool("echo", {"message": "one"})
        server.kill()
        with pytest.raises(TransportError):
            await client.call_tool("echo", {"message": "two"})


async def test_unreachable_url_is_a_transport_error() -> None:
    async with HttpClient("http://127.0.0.1:9/mcp") as client:
        with pytest.raises(TransportError, match=r"127\.0\.0\.1:9"):
            await client.list_tools()


@pytest.mark.parametrize("url", ["", "ftp://host/mcp", "not a url", "http:///mcp"])
def test_bad_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        HttpClient(url)


class _SessionLosingHandler(BaseHTTPRequestHandler):
    """Hands out a session at `initialize`, then answers 404 to every request that carries it."""

    seen_headers: list[dict[str, str]] = []
    sessions = 0

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass

    def _reply(
        self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        type(self).seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        if "id" not in message:
            self._reply(202)
        elif message["method"] == "initialize":
            type(self).sessions += 1
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            }
            self._reply(
                200,
                {"jsonrpc": "2.0", "id": message["id"], "result": result},
                {"Mcp-Session-Id": f"session-{type(self).sessions}"},
            )
        elif message["method"] == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            self._reply(200, {"jsonrpc": "2.0", "id": message["id"], "error": error})
        else:
            self._reply(404)

    def do_GET(self) -> None:
        self._reply(405)

    def do_DELETE(self) -> None:
        self._reply(200)


@pytest.fixture
def forgetful_url() -> Iterator[str]:
    _SessionLosingHandler.seen_headers = []
    _SessionLosingHandler.sessions = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SessionLosingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


async def test_a_rejected_session_is_renewed_once_then_session_invalid(forgetful_url: str) -> None:
    async with HttpClient(forgetful_url, headers={"X-Team": "blue"}, timeout=10) as client:
        with pytest.raises(SessionInvalidError) as info:
            await client.call_tool("anything", {})
    assert info.value.code == "ERR_MCP_SESSION_INVALID"
    assert _SessionLosingHandler.sessions == 2  # the first session, and one renewal
    assert all(h.get("x-team") == "blue" for h in _SessionLosingHandler.seen_headers)


async def test_a_rejected_session_is_renewed_once_on_a_call_without_deadline(forgetful_url: str) -> None:
    async with HttpClient(forgetful_url, timeout=None) as client:
        with pytest.raises(SessionInvalidError) as info:
            await client.call_tool("anything", {})
        assert client._conn is None  # the rejected connection was retired, not kept for the next call
    assert info.value.code == "ERR_MCP_SESSION_INVALID"
    assert _SessionLosingHandler.sessions == 2  # the first session, and one renewal


NOTES_SERVER_DIR = Path(__file__).resolve().parents[2] / "examples" / "servers"


@pytest.fixture
def notes_http_url() -> Iterator[str]:
    """The example notes server (a Python MCPServer, 2026-07-28) over Streamable HTTP via uvicorn."""
    code = (
        f"import sys, uvicorn; sys.path.insert(0, {str(NOTES_SERVER_DIR)!r}); import notes_server; "
        "uvicorn.run(notes_server.server.streamable_http_app(), "
        f"host='127.0.0.1', port={{port}}, log_level='warning')"
    )
    argv = [sys.executable, "-c", code]
    with listening(argv, "the notes server", seconds=30, keep_stderr=False) as url:
        yield url


async def test_python_server_over_http_on_both_eras(notes_http_url: str) -> None:
    async with McpToolProvider(HttpClient(notes_http_url, timeout=20)) as provider:
        names = {s.name for s in await provider.list_tools()}
        assert names == {"add_note", "get_note", "search_notes", "word_count"}
        assert provider.client.protocol_version == "2026-07-28"
        note = await provider.call_tool("get_note", {"title": "tea"})
        assert note.structured == {"title": "tea", "text": "Green tea: 80 degrees, two minutes."}
        with pytest.raises(ToolError, match="no note titled"):
            await provider.call_tool("get_note", {"title": "missing"})
        with pytest.raises(McpTimeoutError):
            await provider.client.call_tool("get_note", {"title": "tea"}, timeout=1e-6)
        assert (await provider.call_tool("word_count", {"title": "tea"})).structured["words"] == 6
    async with HttpClient(notes_http_url, mode="legacy") as client:
        assert len(await client.list_tools()) == 4
        assert client.protocol_version == "2025-11-25"
