"""The size cap and malformed-answer rules over Streamable HTTP, against a hostile HTTP server.

First through the SDK's `streamable_http_client` with an `httpx2` client limited by
`limit_http_client` (the marker in the error's data), then through `toolbridge.HttpClient`
(the toolbridge error codes).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from _support import load_hostile, rss_bytes
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from toolbridge.clients import HttpClient
from toolbridge.clients._http_limits import LimitedTransport, limit_http_client
from toolbridge.errors import ProtocolError

MiB = 1024 * 1024
CAP = 4 * MiB


@asynccontextmanager
async def limited_client(url: str, cap: int = CAP) -> AsyncIterator[Client]:
    http = limit_http_client(create_mcp_http_client(), cap)
    async with http, Client(streamable_http_client(url, http_client=http, max_sse_event_size=cap)) as client:
        yield client


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def marker(exc: MCPError) -> dict[str, Any]:
    data = exc.error.data
    assert isinstance(data, dict) and data.get("toolbridge") == "protocol", exc.error
    return data


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_results_within_the_cap_pass_unchanged(hostile_http_url: str, sse: bool) -> None:
    async with limited_client(hostile_http_url) as client:
        size = 3 * MiB
        result = await client.call_tool("big", {"size": size, "sse": sse}, read_timeout_seconds=20)
        assert text_of(result) == load_hostile().payload(size)
        notified = await client.call_tool("notify", {"sse": True}, read_timeout_seconds=5)
        assert text_of(notified) == "after notification"


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_an_answer_above_the_cap_fails_the_call_at_once(hostile_http_url: str, sse: bool) -> None:
    async with limited_client(hostile_http_url) as client:
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("big", {"size": 12 * MiB, "sse": sse}, read_timeout_seconds=20)
        assert time.perf_counter() - started < 5
        data = marker(info.value)
        assert data["reason"] == "message_too_large" and data["limit"] == CAP
        assert text_of(await client.call_tool("echo", {"text": "next", "sse": sse})) == "next"


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_a_malformed_answer_fails_the_call_at_once(hostile_http_url: str, sse: bool) -> None:
    async with limited_client(hostile_http_url) as client:
        started = time.perf_counter()
        with pytest.raises(MCPError) as info:
            await client.call_tool("malformed", {"sse": sse}, read_timeout_seconds=10)
        assert time.perf_counter() - started < 2
        assert marker(info.value)["reason"] == "malformed"
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_an_endless_event_keeps_memory_bounded(hostile_http_url: str) -> None:
    async with limited_client(hostile_http_url) as client:
        await client.call_tool("echo", {"text": "warm up"})
        start = rss_bytes()
        peak = start

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_bytes())
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            with pytest.raises(MCPError) as info:
                await client.call_tool("endless", {"size": 60 * MiB}, read_timeout_seconds=10)
            tg.cancel_scope.cancel()
        assert marker(info.value)["reason"] == "message_too_large"
        assert peak - start < 32 * MiB, f"RSS grew by {(peak - start) / MiB:.0f} MiB"
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_toolbridge_http_client_reports_protocol_errors(hostile_http_url: str) -> None:
    async with HttpClient(hostile_http_url, max_message_bytes=2 * MiB) as client:
        with pytest.raises(ProtocolError) as info:
            await client.call_tool("big", {"size": 5 * MiB, "sse": True}, timeout=20)
        assert info.value.code == "ERR_MCP_PROTOCOL"
        assert "limit" in info.value.message
        with pytest.raises(ProtocolError):
            await client.call_tool("malformed", {}, timeout=10)
        result = await client.call_tool("echo", {"text": "fine"}, timeout=10)
        assert result["content"][0]["text"] == "fine"


def test_limits_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="positive"):
        LimitedTransport(httpx2.AsyncHTTPTransport(), 0)
    with pytest.raises(ValueError, match="positive"):
        limit_http_client(httpx2.AsyncClient(), -1)
    with pytest.raises(TypeError):
        limit_http_client(object(), 10)  # type: ignore[arg-type]
    client = httpx2.AsyncClient()
    assert limit_http_client(limit_http_client(client, 10), 10) is client
    assert isinstance(client._transport, LimitedTransport)
    assert not isinstance(client._transport.inner, LimitedTransport)


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("depth", [1_000, 100_000])
async def test_a_deeply_nested_http_response_fails_only_its_call(
    hostile_http_url: str, depth: int, sse: bool
) -> None:
    async with HttpClient(hostile_http_url, timeout=20) as client:
        async with anyio.create_task_group() as tg:
            results: list[str] = []

            async def good() -> None:
                results.append((await client.call_tool("echo", {"text": "beside"}))["content"][0]["text"])

            tg.start_soon(good)
            with pytest.raises(ProtocolError) as info:
                await client.call_tool("deep", {"depth": depth, "sse": sse})
        assert info.value.code == "ERR_MCP_PROTOCOL"
        assert results == ["beside"]
        assert (await client.call_tool("echo", {"text": "after"}))["content"][0]["text"] == "after"
