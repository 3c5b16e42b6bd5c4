"""OAuth 2.1 end to end through toolbridge's `HttpClient(auth=...)`, against `oauth_server.py`.

The server (started as its own process on a free port) protects its MCP endpoint with bearer
tokens that live 2 seconds, and approves authorization requests at once. The client must
discover the authorization server from the 401, register, run the authorization-code grant with
PKCE through the headless authorizer, store the tokens, refresh them when they expire, and reuse
stored tokens from a new client without a new authorization.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx2
import pytest

from toolbridge import FileTokenStorage, HttpClient, TransportError, oauth_auth
from toolbridge.clients._oauth import AuthorizationCodeResult

SERVER = Path(__file__).resolve().parent / "oauth_server.py"


@pytest.fixture
def oauth_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the OAuth test server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _grants(base: str) -> list[str]:
    grants: list[str] = httpx2.get(f"{base}/grants", timeout=10).json()
    return grants


async def _whoami(client: HttpClient) -> str:
    result = await client.call_tool("whoami", {})
    text: str = result["content"][0]["text"]
    return text


async def test_authorization_code_with_pkce_then_refresh_then_reuse(
    oauth_server: str, tmp_path: Path
) -> None:
    url = f"{oauth_server}/mcp"
    path = tmp_path / "tokens.json"
    async with HttpClient(url, auth=oauth_auth(url, storage=FileTokenStorage(path)), timeout=30) as client:
        first = await _whoami(client)
        assert first.startswith("at-")
        assert await asyncio.to_thread(_grants, oauth_server) == ["authorization_code"]
        stored = json.loads(path.read_text())
        assert stored["tokens"]["access_token"] == first and stored["client_info"]["client_id"]

        await asyncio.sleep(2.3)  # the access token expires
        second = await _whoami(client)
        assert second.startswith("at-") and second != first
        assert await asyncio.to_thread(_grants, oauth_server) == ["authorization_code", "refresh_token"]

    # A new client with the same storage uses the stored token: no new grant.
    async with HttpClient(url, auth=oauth_auth(url, storage=FileTokenStorage(path)), timeout=30) as client:
        assert await _whoami(client) == second
    assert await asyncio.to_thread(_grants, oauth_server) == ["authorization_code", "refresh_token"]


async def test_the_flow_logs_no_body_and_no_token(
    oauth_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Metadata, registration and token responses pass the response checker untouched: no WARNING
    quoting them, and the tokens the flow stores are scrubbed from every record (DEBUG included)."""
    caplog.set_level(logging.DEBUG)
    url = f"{oauth_server}/mcp"
    async with HttpClient(url, auth=oauth_auth(url), timeout=30) as client:
        token = await _whoami(client)
    assert token.startswith("at-")
    texts = [logging.Formatter("%(name)s %(message)s").format(r) for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("toolbridge")]
    assert all(token not in t and "client_secret" not in t for t in texts)
    requests = [t for t in texts if "HTTP Request" in t]
    assert len(requests) >= 5  # metadata, registration, token, MCP: all logged, host and port only
    assert all("/.well-known" not in t and "/token" not in t for t in requests)


async def test_a_failed_token_request_is_err_mcp_auth(oauth_server: str) -> None:
    async def bogus_code(authorization_url: str) -> AuthorizationCodeResult:
        state = parse_qs(urlparse(authorization_url).query)["state"][0]
        return AuthorizationCodeResult(code="not-a-code", state=state)

    url = f"{oauth_server}/mcp"
    async with HttpClient(url, auth=oauth_auth(url, authorize=bogus_code), timeout=30) as client:
        with pytest.raises(TransportError) as info:
            await _whoami(client)
    assert info.value.code == "ERR_MCP_AUTH", info.value


async def test_a_repeated_insufficient_scope_is_err_mcp_auth(oauth_server: str) -> None:
    url = f"{oauth_server}/narrow/mcp"
    async with HttpClient(url, auth=oauth_auth(url), timeout=30) as client:
        with pytest.raises(TransportError) as info:
            await client.list_tools()
    assert info.value.code == "ERR_MCP_AUTH", info.value
    assert "insufficient_scope" in info.value.message and "-32603" not in info.value.message


async def test_no_credentials_at_all_is_err_mcp_auth(oauth_server: str) -> None:
    async with HttpClient(f"{oauth_server}/mcp", timeout=30) as client:
        with pytest.raises(TransportError) as info:
            await client.list_tools()
    assert info.value.code == "ERR_MCP_AUTH" and "401" in info.value.message, info.value
