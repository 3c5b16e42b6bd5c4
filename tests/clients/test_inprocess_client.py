"""InProcessClient against servers built with the SDK's server API (tests/fixtures/inproc_servers.py).

Each behaviour is checked in both protocol eras: `"auto"` (the SDK's direct 2026-07-28 dispatch)
and `"legacy"` (JSON-RPC over in-memory streams after an `initialize` handshake).
"""

from __future__ import annotations

import asyncio

import pytest

from fixtures.inproc_servers import (
    changing_server,
    endless_cursor_server,
    output_schema_server,
    paged_server,
    repeating_cursor_server,
)
from toolbridge.clients import TOOLS_LIST_PAGE_CAP, InProcessClient
from toolbridge.errors import ConfigError, McpTimeoutError, ProtocolError, TransportError

MODES = ["auto", "legacy"]


@pytest.mark.parametrize("mode", MODES)
async def test_pagination_follows_every_page(mode: str) -> None:
    async with InProcessClient(paged_server(n_tools=25, page_size=10), mode=mode) as client:
        tools = await client.list_tools()
    assert [t.name for t in tools] == [f"tool_{i}" for i in range(25)]  # 3 pages, in order


@pytest.mark.parametrize("mode", MODES)
async def test_repeating_cursor_is_a_protocol_error(mode: str) -> None:
    async with InProcessClient(repeating_cursor_server(), mode=mode) as client:
        with pytest.raises(ProtocolError, match="repeated the cursor") as info:
            await client.list_tools()
    assert info.value.code == "ERR_MCP_PROTOCOL"


async def test_endless_pagination_stops_at_the_page_cap() -> None:
    async with InProcessClient(endless_cursor_server()) as client:
        with pytest.raises(ProtocolError, match=f"more than {TOOLS_LIST_PAGE_CAP} pages"):
            await client.list_tools()


@pytest.mark.parametrize("mode", MODES)
async def test_list_changed_drops_the_cache_and_bumps_the_generation(mode: str) -> None:
    async with InProcessClient(changing_server(), mode=mode) as client:
        before = {t.name for t in await client.list_tools()}
        assert "newcomer" not in before
        generation = client.generation
        assert client.instructions == "Tools appear when you ask for them."
        await client.call_tool("add_tool", {"name": "newcomer"})
        for _ in range(100):  # the notification travels on its own; give it a moment
            if client.generation > generation:
                break
            await asyncio.sleep(0.01)
        assert client.generation == generation + 1
        after = {t.name for t in await client.list_tools()}
        assert after == before | {"newcomer"}
        assert (await client.call_tool("newcomer", {}))["content"][0]["text"] == "I am newcomer"


@pytest.mark.parametrize("mode", MODES)
async def test_fifty_concurrent_calls_on_one_connection(mode: str) -> None:
    async with InProcessClient(paged_server(), mode=mode) as client:
        results = await asyncio.gather(
            *(client.call_tool(f"tool_{i % 25}", {"x": f"v{i}", "delay": 0.05}) for i in range(50))
        )
    assert [r["content"][0]["text"] for r in results] == [f"{i % 25}:v{i}" for i in range(50)]


@pytest.mark.parametrize("mode", MODES)
async def test_structured_output_is_validated_against_the_output_schema(mode: str) -> None:
    async with InProcessClient(output_schema_server(), mode=mode) as client:
        good = await client.call_tool("good", {})
        assert good["structuredContent"] == {"city": "Oslo", "temperature": 4.5}
        with pytest.raises(ProtocolError, match="temperature") as info:
            await client.call_tool("bad", {})
        assert info.value.code == "ERR_MCP_PROTOCOL"
        # The connection survives a protocol error.
        assert (await client.call_tool("good", {}))["structuredContent"]["city"] == "Oslo"


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_and_other_blocks_come_back_as_wire_json(mode: str) -> None:
    async with InProcessClient(output_schema_server(), mode=mode) as client:
        failed = await client.call_tool("failing", {})
        assert failed["isError"] is True
        assert failed["content"] == [{"type": "text", "text": "the disk is on fire"}]
        mixed = await client.call_tool("mixed", {})
        assert mixed["content"][1] == {
            "type": "resource_link",
            "uri": "demo://x/1",
            "name": "x1",
            "mimeType": "text/plain",
        }
        assert "isError" not in mixed


async def test_timeout_on_an_in_process_call() -> None:
    async with InProcessClient(paged_server(), timeout=5) as client:
        with pytest.raises(McpTimeoutError):
            await client.call_tool("tool_1", {"x": "slow", "delay": 5}, timeout=0.1)
        assert (await client.call_tool("tool_1", {"x": "fast"}))["content"][0]["text"] == "1:fast"


async def test_lazy_connect_and_explicit_connect() -> None:
    client = InProcessClient(changing_server())
    assert client.server_info is None and client.instructions is None and client.protocol_version is None
    await client.connect()
    assert client.server_info is not None and client.server_info.name == "changing"
    await client.aclose()
    assert client.server_info is None
    with pytest.raises(TransportError):
        await client.connect()


def test_rejects_what_is_not_a_server() -> None:
    with pytest.raises(ConfigError, match="MCPServer"):
        InProcessClient("not a server")  # type: ignore[arg-type]


def test_a_client_survives_a_second_event_loop() -> None:
    client = InProcessClient(paged_server())
    first = asyncio.run(client.list_tools())
    # The first loop ended; its connection ended with it. The next loop gets a fresh one.
    second = asyncio.run(client.list_tools())
    assert [t.name for t in first] == [t.name for t in second]
    asyncio.run(client.aclose())
    assert client.closed
