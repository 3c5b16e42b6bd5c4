"""DPoP (RFC 9449) and workload identity (RFC 7523 JWT bearer) in `HttpClient`, against `dpop_server.py`.

The server is a real authorization server and MCP server on loopback (its own process) that binds
tokens to the proof key (`cnf.jkt`), checks every proof (signature, htm, htu, iat, ath, unique
jti, nonce) and logs what it saw; the tests assert on that log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from toolbridge import HttpClient, TransportError
from toolbridge.clients import (
    DPoPKey,
    MemoryDPoPKeyStore,
    assertion_from_env,
    assertion_from_file,
    client_credentials_auth,
    workload_identity_auth,
)
from toolbridge.clients._dpop import _usable_nonce, access_token_hash

SERVER = Path(__file__).resolve().parent / "dpop_server.py"
PLATFORM_KEY = ec.generate_private_key(ec.SECP256R1())
PLATFORM_PUB = (
    PLATFORM_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)

Start = Callable[..., str]


@pytest.fixture
def dpop_server() -> Iterator[Start]:
    """Start `dpop_server.py` with the given flags; every process started is stopped at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*flags: str) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "DPOP_TEST_PLATFORM_PUB": PLATFORM_PUB}
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(port), *flags],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the DPoP test server did not start")
                time.sleep(0.1)

    try:
        yield start
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _log(base: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = httpx2.get(f"{base}/log", timeout=10).json()
    return entries


def _platform_jwt(base: str, sub: str = "ci-job-42") -> str:
    now = int(time.time())
    claims = {"iss": "https://platform.test", "sub": sub, "aud": base, "iat": now, "exp": now + 300}
    return jwt.encode(claims, PLATFORM_KEY, algorithm="ES256")


def _machine(url: str, **kwargs: Any) -> Any:
    return client_credentials_auth(
        url, client_id="c1", client_secret="s3cret", token_endpoint_auth_method="client_secret_post", **kwargs
    )


async def _calls(url: str, auth: Any, n: int = 3) -> None:
    async with HttpClient(url, auth=auth, timeout=30) as client:
        for _ in range(n):
            result = await client.call_tool("whoami", {})
            assert result["content"][0]["text"] == "ok"


async def test_a_dpop_bound_token_with_a_fresh_proof_on_every_request(dpop_server: Start) -> None:
    base = dpop_server()
    url = f"{base}/mcp"
    store = MemoryDPoPKeyStore()
    await _calls(url, _machine(url, dpop_key_store=store))
    log = await asyncio.to_thread(_log, base)
    tokens = [e for e in log if e["at"] == "token"]
    assert tokens == [
        {"at": "token", "grant": "client_credentials", "proof": True, "ok": True, "why": "", "bound": True}
    ]
    mcp = [e for e in log if e["at"] == "mcp"]
    assert len(mcp) >= 4 and all(e["ok"] and e["scheme"] == "DPoP" and e["proof"] for e in mcp), mcp
    key = await store.get_key()
    assert key is not None and len(key.bound_tokens) == 1  # one key, kept for the token's life


async def test_the_nonce_is_retried_once_at_both_servers(dpop_server: Start) -> None:
    base = dpop_server("--nonce")
    url = f"{base}/mcp"
    await _calls(url, _machine(url))
    log = await asyncio.to_thread(_log, base)
    token_whys = [e["why"] for e in log if e["at"] == "token"]
    assert token_whys == ["use_dpop_nonce", ""]
    mcp_whys = [e["why"] for e in log if e["at"] == "mcp"]
    assert mcp_whys[0] == "use_dpop_nonce" and mcp_whys[1:] and set(mcp_whys[1:]) == {""}, mcp_whys


async def test_a_nonce_that_is_always_stale_fails_in_bounded_tries(dpop_server: Start) -> None:
    base = dpop_server("--stale-nonce")
    url = f"{base}/mcp"
    with pytest.raises(TransportError) as info:
        await _calls(url, _machine(url), n=1)
    assert info.value.code == "ERR_MCP_AUTH", info.value
    log = await asyncio.to_thread(_log, base)
    assert 1 <= len(log) <= 12, log  # one retry per request, never a loop
    assert not any(e["ok"] for e in log if e["at"] == "mcp")


async def test_auto_uses_no_dpop_when_the_server_does_not_offer_it(dpop_server: Start) -> None:
    base = dpop_server("--no-dpop")
    url = f"{base}/mcp"
    await _calls(url, _machine(url), n=1)
    log = await asyncio.to_thread(_log, base)
    assert not any(e["proof"] for e in log), log
    assert {e["scheme"] for e in log if e["at"] == "mcp"} == {"Bearer"}


async def test_dpop_off_sends_no_proof(dpop_server: Start) -> None:
    base = dpop_server()
    url = f"{base}/mcp"
    await _calls(url, _machine(url, dpop="off"), n=1)
    log = await asyncio.to_thread(_log, base)
    assert not any(e["proof"] for e in log) and all(e["ok"] for e in log), log


def test_a_proof_says_method_url_time_and_token_and_is_never_reused() -> None:
    key = DPoPKey()
    first = key.proof("post", "https://rs.test/mcp", access_token="tok", nonce="n1")
    second = key.proof("post", "https://rs.test/mcp", access_token="tok")
    header = jwt.get_unverified_header(first)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256" and "d" not in header["jwk"]
    claims = jwt.decode(first, jwt.PyJWK(header["jwk"]).key, algorithms=["ES256"])
    assert claims["htm"] == "POST" and claims["htu"] == "https://rs.test/mcp"
    assert claims["ath"] == access_token_hash("tok") and claims["nonce"] == "n1"
    assert abs(claims["iat"] - time.time()) < 60
    assert claims["jti"] != jwt.decode(second, options={"verify_signature": False})["jti"]
    assert DPoPKey.from_pem(key.private_pem()).thumbprint == key.thumbprint


@pytest.mark.parametrize("nonce", ["x" * 2000, "bad nonce", "é", "", "a\r\nb"])
def test_a_hostile_nonce_is_ignored(nonce: str) -> None:
    assert _usable_nonce(nonce) is None


# Workload identity (RFC 7523 JWT bearer, SEP-1933)


async def test_workload_identity_from_a_file_with_dpop_and_no_registration(
    dpop_server: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    base = dpop_server()
    url = f"{base}/mcp"
    token_file = tmp_path / "token"
    assertion = _platform_jwt(base)
    token_file.write_text(assertion + "\n")
    await _calls(url, workload_identity_auth(url, assertion=assertion_from_file(token_file)), n=2)
    log = await asyncio.to_thread(_log, base)
    tokens = [e for e in log if e["at"] == "token"]
    assert [(e["grant"], e["ok"], e["bound"]) for e in tokens] == [
        ("urn:ietf:params:oauth:grant-type:jwt-bearer", True, True)
    ]
    assert httpx2.get(f"{base}/registrations", timeout=10).json() == 0
    assert assertion not in caplog.text
    assert all(assertion not in str(r.args) for r in caplog.records)


async def test_a_refused_assertion_is_one_error_and_never_sent_again(dpop_server: Start) -> None:
    base = dpop_server()
    url = f"{base}/mcp"
    assertion = _platform_jwt(base, sub="refuse")

    async def source(audience: str) -> str:
        assert audience == base
        return assertion

    auth = workload_identity_auth(url, assertion=source)
    for _ in range(2):
        with pytest.raises(TransportError) as info:
            await _calls(url, auth, n=1)
        assert info.value.code == "ERR_MCP_AUTH" and "invalid_grant" in info.value.message, info.value
        assert assertion not in str(info.value)
    log = await asyncio.to_thread(_log, base)
    assert [e["grant"] for e in log if e["at"] == "token"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    assert httpx2.get(f"{base}/registrations", timeout=10).json() == 0


async def test_a_vanished_or_endless_assertion_file_is_one_clear_error(tmp_path: Path) -> None:
    missing = assertion_from_file(tmp_path / "gone")
    with pytest.raises(TransportError) as info:
        await missing("https://as.test")
    assert info.value.code == "ERR_MCP_AUTH" and "does not exist" in info.value.message
    huge = tmp_path / "huge"
    huge.write_bytes(b"a" * 70_000)
    with pytest.raises(TransportError) as info:
        await assertion_from_file(huge)("https://as.test")
    assert "larger than 65536 bytes" in info.value.message
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            try:
                while True:
                    f.write(b"b" * 65536)
            except BrokenPipeError:
                pass

    writer = asyncio.create_task(asyncio.to_thread(feed))
    with pytest.raises(TransportError) as info:
        await asyncio.wait_for(assertion_from_file(fifo, max_bytes=1000)("https://as.test"), 30)
    assert "larger than 1000 bytes" in info.value.message
    await asyncio.wait_for(writer, 30)


async def test_an_assertion_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    source = assertion_from_env("TB_TEST_WIF")
    with pytest.raises(TransportError, match="TB_TEST_WIF is not set"):
        await source("aud")
    monkeypatch.setenv("TB_TEST_WIF", " a.b.c \n")
    assert await source("aud") == "a.b.c"
    monkeypatch.setenv("TB_TEST_WIF", "two tokens")
    with pytest.raises(TransportError, match="not hold one JWT"):
        await source("aud")


def test_an_assertion_given_as_a_string_is_refused_without_showing_it() -> None:
    from toolbridge import ConfigError

    with pytest.raises(ConfigError) as info:
        workload_identity_auth("http://127.0.0.1:1/mcp", assertion="eyJsecret.value.sig")  # type: ignore[arg-type]
    assert "eyJsecret" not in str(info.value)
    assert json.dumps(info.value.details or {}).find("eyJsecret") == -1
