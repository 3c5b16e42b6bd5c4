"""StdioClient and McpToolProvider against the project's hostile server (tests/faults/hostile_server.py).

The transport underneath turns a malformed or oversized response into an error for its call; these
tests check that the client maps it to `ERR_MCP_PROTOCOL` at once, and that the other faults give
the documented codes and leave the client usable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest

from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.errors import McpTimeoutError, ProtocolError, TransportError

HOSTILE = str(Path(__file__).resolve().parents[1] / "faults" / "hostile_server.py")


def _client(*switches: str, **kwargs: object) -> StdioClient:
    return StdioClient(sys.executable, [HOSTILE, *switches], shutdown_grace_ms=500, **kwargs)  # type: ignore[arg-type]


async def test_malformed_response_fails_its_call_at_once() -> None:
    async with _client(timeout=20) as client:
        for kind in ("truncated", "invalid"):
            started = time.monotonic()
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("malformed", {"kind": kind})
            assert time.monotonic() - started < 5
            assert info.value.code == "ERR_MCP_PROTOCOL"
        assert (await client.call_tool("echo", {"text": "fine"}))["content"][0]["text"] == "fine"


async def test_oversized_result_fails_its_call_and_the_session_goes_on() -> None:
    async with _client(timeout=20, max_message_bytes=64 * 1024) as client:
        with pytest.raises(ProtocolError, match=r"(?i)large|limit|size"):
            await client.call_tool("big", {"size": 512 * 1024})
        assert (await client.call_tool("echo", {"text": "small"}))["content"][0]["text"] == "small"
        pid = client.pid
        assert (await client.call_tool("big", {"size": 1000}))["content"][0]["text"]
        assert client.pid == pid


async def test_crash_mid_call_then_recovery() -> None:
    async with _client(timeout=20) as client:
        await client.call_tool("echo", {"text": "one"})
        with pytest.raises(TransportError) as info:
            await client.call_tool("crash", {})
        assert info.value.code == "ERR_MCP_TRANSPORT"
        assert (await client.call_tool("echo", {"text": "two"}))["content"][0]["text"] == "two"


async def test_exit_at_start_quotes_stderr() -> None:
    client = _client("--exit-at-start")
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        await client.list_tools()
    assert time.monotonic() - started < 3
    assert "stderr" in info.value.message
    await client.aclose()


async def test_never_answering_call_times_out_and_others_go_on() -> None:
    async with _client() as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("hang", {}, timeout=0.3)
        assert (await client.call_tool("echo", {"text": "alive"}))["content"][0]["text"] == "alive"


async def test_poisoned_description_is_cleaned_for_the_model() -> None:
    async with McpToolProvider(_client("--poison")) as provider:
        specs = await provider.list_tools()
        raw = {t.name: t.description for t in await provider.client.list_tools()}
    poisoned = [s for s in specs if raw[s.name] and "\x1b" in (raw[s.name] or "")]
    assert poisoned
    for spec in poisoned:
        assert "\x1b" not in spec.description
        assert "\u200b" not in spec.description and "\u202e" not in spec.description
        assert not any(0xE0000 <= ord(c) <= 0xE007F for c in spec.description)
        assert "IGNORE PREVIOUS INSTRUCTIONS" in spec.description  # visible text stays visible


async def test_rug_pull_bumps_the_generation() -> None:
    async with _client("--rug-pull") as client:
        first = {t.name: t.description for t in await client.list_tools()}
        generation = client.generation
        for _ in range(100):
            if client.generation > generation:
                break
            await anyio.sleep(0.01)
        assert client.generation > generation
        second = {t.name: t.description for t in await client.list_tools()}
        assert first["echo"] != second["echo"]
