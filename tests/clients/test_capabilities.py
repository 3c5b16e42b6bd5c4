"""Capabilities only when handled: server-everything registers some tools only for clients that offer
sampling, elicitation (form and URL mode) or roots, so its tool list shows what a client advertised.

Without handlers, toolbridge must look to the server exactly like a plain SDK client; with a handler
(or a roots list), the matching capability is offered and the gated tools appear and work.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from toolbridge.clients import StdioClient, decline_elicitation

GATED = {
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
    "get-roots-list",
}


def _text(result: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in result["content"] if b.get("type") == "text")


async def _sdk_names(everything_cmd: list[str]) -> set[str]:
    params = StdioServerParameters(command=everything_cmd[0], args=everything_cmd[1:])
    async with Client(stdio_client(params)) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


async def _names(client: StdioClient) -> set[str]:
    async with client:
        return {tool.name for tool in await client.list_tools()}


async def test_without_handlers_the_server_sees_a_plain_sdk_client(everything_cmd: list[str]) -> None:
    plain = await _sdk_names(everything_cmd)
    ours = await _names(StdioClient(everything_cmd[0], everything_cmd[1:], timeout=20))
    assert ours == plain
    assert not ours & GATED  # nothing is offered that nobody would answer
    assert "echo" in ours


async def test_each_handler_offers_its_own_capability_only(everything_cmd: list[str], tmp_path: Any) -> None:
    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi"), model="m"
        )

    cmd, args = everything_cmd[0], everything_cmd[1:]
    elicit = await _names(StdioClient(cmd, args, timeout=20, elicitation_handler=decline_elicitation))
    assert elicit & GATED == {"trigger-elicitation-request", "trigger-url-elicitation"}
    sampling = await _names(StdioClient(cmd, args, timeout=20, sampling_handler=sample))
    assert sampling & GATED == {"trigger-sampling-request"}
    roots = await _names(StdioClient(cmd, args, timeout=20, roots=[tmp_path]))
    assert roots & GATED == {"get-roots-list"}


async def test_an_offered_elicitation_is_answered_by_its_handler(everything_cmd: list[str]) -> None:
    async with StdioClient(
        everything_cmd[0], everything_cmd[1:], timeout=20, elicitation_handler=decline_elicitation
    ) as client:
        text = _text(await client.call_tool("trigger-elicitation-request", {}))
    assert "decline" in text.lower()
