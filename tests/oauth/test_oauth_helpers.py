"""The OAuth helpers of `toolbridge.clients._oauth` on their own (full flows: tests/conformance)."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from toolbridge.clients._oauth import (
    AUTH_ERROR_CODE,
    FileTokenStorage,
    MemoryTokenStorage,
    auth_error_to_toolbridge,
    client_credentials_auth,
    headless_authorizer,
    identity_assertion_auth,
    oauth_auth,
)
from toolbridge.errors import ConfigError, TransportError


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/authorize"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/callback?code=abc&state=s1&iss=http%3A%2F%2Fas")
        elif self.path.startswith("/denied"):
            self.send_response(302)
            self.send_header("Location", "/callback?error=access_denied&error_description=nope")
        elif self.path.startswith("/nocode"):
            self.send_response(302)
            self.send_header("Location", "/callback?state=s1")
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def auth_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_headless_authorizer_reads_the_code_from_the_redirect(auth_server: str) -> None:
    result = await headless_authorizer(timeout=5)(f"{auth_server}/authorize?client_id=x")
    assert (result.code, result.state, result.iss) == ("abc", "s1", "http://as")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/denied", "authorization refused: access_denied nope"),
        ("/nocode", "no code"),
        ("/page", "without a redirect"),
    ],
)
async def test_headless_authorizer_failures_are_auth_errors(
    auth_server: str, path: str, message: str
) -> None:
    with pytest.raises(TransportError, match=message) as info:
        await headless_authorizer(timeout=5)(auth_server + path)
    assert info.value.code == AUTH_ERROR_CODE == "ERR_MCP_AUTH"


async def test_headless_authorizer_unreachable_server() -> None:
    with pytest.raises(TransportError) as info:
        await headless_authorizer(timeout=2)("http://127.0.0.1:9/authorize")
    assert info.value.code == AUTH_ERROR_CODE


async def test_file_token_storage_round_trip_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tokens.json"
    storage = FileTokenStorage(path)
    assert await storage.get_tokens() is None and await storage.get_client_info() is None
    await storage.set_tokens(OAuthToken(access_token="at", refresh_token="rt", expires_in=60))
    await storage.set_client_info(OAuthClientInformationFull(client_id="cid", client_secret="sec"))
    again = FileTokenStorage(path)
    tokens = await again.get_tokens()
    info = await again.get_client_info()
    assert tokens is not None and tokens.access_token == "at" and tokens.refresh_token == "rt"
    assert info is not None and info.client_id == "cid"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary file left

    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        await again.get_tokens()


async def test_memory_token_storage() -> None:
    storage = MemoryTokenStorage()
    await storage.set_tokens(OAuthToken(access_token="a"))
    assert (await storage.get_tokens()) == OAuthToken(access_token="a")


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError) as info:
        oauth_auth("http://x/mcp", client_secret="s")
    assert info.value.code == "ERR_INVALID_INPUT"
    with pytest.raises(ConfigError):
        oauth_auth("http://x/mcp", client_metadata_url="http://not-https/doc.json")
    with pytest.raises(ConfigError, match="exactly one"):
        client_credentials_auth("http://x/mcp", client_id="c")
    with pytest.raises(ConfigError, match="exactly one"):
        client_credentials_auth("http://x/mcp", client_id="c", client_secret="s", private_key_pem="k")
    with pytest.raises(ConfigError):
        identity_assertion_auth(
            "http://x/mcp", client_id="c", client_secret="", issuer="http://as", assertion_provider=_never
        )


async def _never(audience: str, resource: str) -> str:
    raise AssertionError("not called")


def test_the_constructors_build_sdk_auth_objects() -> None:
    import httpx2

    for auth in (
        oauth_auth("http://x/mcp"),
        oauth_auth("http://x/mcp", client_id="c", client_secret="s", scope="read"),
        client_credentials_auth("http://x/mcp", client_id="c", client_secret="s"),
        identity_assertion_auth(
            "http://x/mcp", client_id="c", client_secret="s", issuer="http://as", assertion_provider=_never
        ),
    ):
        assert isinstance(auth, httpx2.Auth)


def test_sdk_auth_failures_translate_to_err_mcp_auth() -> None:
    for exc in (OAuthFlowError("x"), OAuthRegistrationError("y")):
        mapped = auth_error_to_toolbridge(exc)
        assert isinstance(mapped, TransportError) and mapped.code == "ERR_MCP_AUTH"
    assert auth_error_to_toolbridge(ValueError("z")) is None
