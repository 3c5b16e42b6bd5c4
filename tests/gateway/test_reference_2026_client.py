"""toolbridge's client against the conformance suite's reference server in the 2026-07-28 era.

The reference leaves `resultType` out of its finished tool results (sent as an event stream);
the SDK alone refuses every such result. toolbridge's client reads a result without it as
`"complete"` (`clients/_content_guard.py`). And a connection pinned to 2026-07-28
(`mode="2026-07-28"`, a manifest's `protocolVersion: "2026-07-28"`) asks `server/discover` once,
so it knows the server's capabilities (before, the SDK's empty defaults hid its resources and
prompts from the gateway).
"""

from __future__ import annotations

import pytest
from conformance_ref import reference_server
from mcp import Client

from toolbridge.clients import HttpClient


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
async def test_a_finished_2026_result_without_result_type_is_used(mode: str) -> None:
    with reference_server() as url:
        async with Client(url, mode="2026-07-28") as raw:  # the SDK alone refuses it
            with pytest.raises(Exception, match="resultType"):
                await raw.call_tool("test_simple_text", {})
        async with HttpClient(url, mode=mode) as client:
            result = await client.call_tool("test_simple_text", {})
            assert client.protocol_version == "2026-07-28"
    assert result["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert not result.get("isError")


async def test_a_connection_pinned_to_2026_knows_the_servers_capabilities() -> None:
    with reference_server() as url:
        async with HttpClient(url, mode="2026-07-28") as client:
            await client.connect()
            sdk = client._current_sdk()
            assert sdk is not None and client.protocol_version == "2026-07-28"
            caps = sdk.server_capabilities
            assert caps.resources is not None and caps.prompts is not None and caps.tools is not None
            resources = await sdk.list_resources()
            assert any(str(r.uri) == "test://static-text" for r in resources.resources)
