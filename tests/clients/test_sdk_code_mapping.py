"""The mapping of the SDK's `MCPError` codes documented in docs/errors.md ("Coming from the `mcp` SDK")
is what the error boundary does, and a timeout is `McpTimeoutError` against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from fixtures.inproc_servers import paged_server
from toolbridge.clients import InProcessClient
from toolbridge.clients._errors import map_exception
from toolbridge.clients._stdio_transport import REASON_MALFORMED, protocol_error_data
from toolbridge.errors import (
    JsonRpcError,
    McpTimeoutError,
    ProtocolError,
    SessionInvalidError,
    TransportError,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"

SERVER_CODES = [
    -32001,
    -32000,
    -32600,
    -32601,
    -32602,
    -32603,
    -32700,
    -32002,
    -32042,
    -32020,
    -32021,
    -32022,
]


def _section() -> str:
    text = DOC.read_text()
    start = text.index("### Coming from the `mcp` SDK")
    return text[start : text.index("\n## ", start)]


def test_every_code_is_in_the_documented_table() -> None:
    documented = {int(code) for code in re.findall(r"`(-32\d{3})`", _section())}
    assert set(SERVER_CODES) <= documented


@pytest.mark.parametrize("code", SERVER_CODES)
def test_a_servers_own_error_answer_is_a_json_rpc_error(code: int) -> None:
    mapped = map_exception(
        MCPError(code, "from the server", {"k": 1}), what="tools/call 'x'", connection_closed=lambda: False
    )
    assert isinstance(mapped, JsonRpcError)
    assert (mapped.code, mapped.rpc_code, mapped.rpc_message, mapped.data) == (
        "ERR_MCP_JSON_RPC_ERROR",
        code,
        "from the server",
        {"k": 1},
    )


def test_the_sdk_specific_cases() -> None:
    closed = map_exception(MCPError(types.CONNECTION_CLOSED, "Connection closed"), what="op")
    assert isinstance(closed, TransportError) and closed.code == "ERR_MCP_TRANSPORT"
    session = map_exception(MCPError(types.INVALID_REQUEST, "Session terminated"), what="op")
    assert isinstance(session, SessionInvalidError) and session.code == "ERR_MCP_SESSION_INVALID"
    rejected = map_exception(
        MCPError(types.INTERNAL_ERROR, "Server returned an error response"),
        what="op",
        session_rejected=lambda: True,
    )
    assert isinstance(rejected, SessionInvalidError)
    marker = protocol_error_data(REASON_MALFORMED, detail="not JSON")
    malformed = map_exception(MCPError(types.PARSE_ERROR, "bad", marker), what="op")
    assert isinstance(malformed, ProtocolError) and malformed.code == "ERR_MCP_PROTOCOL"


async def test_a_timeout_is_mcp_timeout_error_not_the_sdks_code() -> None:
    async with InProcessClient(paged_server(), mode="legacy") as client:
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("tool_1", {"x": "a", "delay": 5}, timeout=0.2)
        assert info.value.code == "ERR_MCP_TIMEOUT" and isinstance(info.value, TimeoutError)
        assert not isinstance(info.value.__cause__, MCPError)
        assert (await client.call_tool("tool_1", {"x": "b"}))["content"][0]["text"] == "1:b"
