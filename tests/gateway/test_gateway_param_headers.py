"""`Mcp-Param-*` headers (SEP-2243) of 2026-07-28 clients, checked by the gateway against the
tool's served `inputSchema` (`GatewayCore.input_schema`, looked up by name instead of running
the whole `tools/list` handler on every call): a header that matches its argument is served, one
that does not is refused before anything reaches the upstream."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gw_helpers import HERE, clients_block, gateway_http, policy_doc, stdio_upstream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HEADERS = HERE / "upstreams" / "header_server.py"
TOKEN = "alice-token-0123456789"
MODERN = "2026-07-28"


def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"""kind: Gateway
metadata: {{ name: HeaderGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Hd
    prefix: hd_
    effects: read
{clients_block(("alice", "tool:hd_route, tool:hd_routed, effect:read"))}
{policy_doc()}{stdio_upstream("Hd", [sys.executable, str(HEADERS)], mode="modern")}""",
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def client(url: str, region_header: str | None, sent: list[str]) -> AsyncIterator[Client]:
    """A 2026 SDK client; `region_header` replaces what it mirrors into `Mcp-Param-Region`."""

    async def hook(request: Any) -> None:
        if request.method == "POST" and b'"tools/call"' in request.content:
            if region_header is not None:
                request.headers["Mcp-Param-Region"] = region_header
            sent.append(request.headers.get("Mcp-Param-Region", ""))

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30, event_hooks={"request": [hook]}
        ) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN) as c,  # type: ignore[arg-type]
    ):
        yield c


async def test_param_headers_are_checked_against_the_served_schema(tmp_path: Path) -> None:
    with gateway_http(manifest(tmp_path), env={"ALICE_TOKEN": TOKEN}) as url, anyio.fail_after(90):
        sent: list[str] = []
        async with client(url, None, sent) as honest:
            listed = {t.name: t for t in (await honest.list_tools()).tools}
            region = listed["hd_route"].input_schema["properties"]["region"]
            assert region["x-mcp-header"] == "Region"  # passed through as the upstream sent it
            result = await honest.call_tool("hd_route", {"region": "eu", "text": "hi"})
            assert not result.is_error and result.content[0].text == "routed hi to eu"  # type: ignore[union-attr]
        assert sent == ["eu"]  # the SDK mirrored the argument; the gateway accepted it
        forged: list[str] = []
        async with client(url, "us", forged) as liar:
            with pytest.raises(Exception) as refused:
                await liar.call_tool("hd_route", {"region": "eu", "text": "hi"})
            assert "400" in str(refused.value) or "header" in str(refused.value).lower(), refused.value
        assert forged and set(forged) == {"us"}  # (the SDK client may retry once after a 400)
        async with client(url, None, []) as honest:
            count = await honest.call_tool("hd_routed", {})
            assert count.structured_content == {"result": 1}  # the forged call never reached it
