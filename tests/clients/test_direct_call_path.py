"""A call without per-call requests goes from `ConnectionClient.call_tool` to the SDK's session
directly, not through `mcp.Client.call_tool`'s three coroutine layers; what those layers did
still happens: a 2026-07-28 `InputRequiredResult` is answered by the client-wide handlers (and
a handshake-era request too), and no frame of `mcp.Client.call_tool` runs.

Real parts: toolbridge's `StdioClient` against the SDK's `MCPServer` that elicits during calls
(`tests/gateway/upstreams/asking_server.py`), in both eras.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import mcp_types as types
import pytest

from toolbridge.clients import StdioClient

ASKING = Path(__file__).resolve().parents[1] / "gateway" / "upstreams" / "asking_server.py"


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_the_client_wide_handler_answers_what_a_call_is_asked(mode: str) -> None:
    asked: list[str] = []

    async def accept(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with StdioClient(
        sys.executable, [str(ASKING)], mode=mode, timeout=60, elicitation_handler=accept
    ) as c:
        result = await c.call_tool("pay", {"who": "alice"})
        assert result["content"][0]["text"] == "alice: accept ok=True"
        assert asked == ["transfer 5000 EUR for alice?"]
        # a second call on the same connection is asked again (the rounds kept no state)
        result = await c.call_tool("pay", {"who": "bob"})
        assert result["content"][0]["text"] == "bob: accept ok=True"
        assert len(asked) == 2


async def test_a_call_never_enters_the_sdk_clients_call_tool() -> None:
    """The SDK client's `call_tool` (and its `retry` and `send` layers) is not on the path."""
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("mcp/client/client.py"):
            seen.add(frame.f_code.co_name)

    async with StdioClient(sys.executable, [str(ASKING)], mode="modern", timeout=60) as c:
        await c.list_tools()
        sys.setprofile(profile)
        try:
            result = await c.call_tool("hold", {"who": "carol"})
        finally:
            sys.setprofile(None)
    assert not result.get("isError"), result
    assert not {"call_tool", "retry", "send"} & seen, seen
