"""What the gateway passes through, field by field, against real servers: `tools/list` as the
upstream sent it (apart from the documented changes), call results whole, an upstream's
`isError` result and JSON-RPC error with their content, code and reason (secrets redacted), over
stdio and over HTTP; and what the journal says of each (an honest outcome, a row for every
refused call)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gw_helpers import (
    HERE,
    TOOLBRIDGE,
    gateway_http,
    gateway_stdio,
    journal_calls,
    policy_doc,
    stdio_upstream,
)
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolbridge.runtime._journal_sqlite import Journal
from toolbridge.sanitize import clean_schema, clean_text

FAITH = HERE / "upstreams" / "faith_server.py"
FAITH_KEY = "sk-faith-0123456789abcdef"
TOKEN = "faith-token-0123456789"
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
FAITH_TOOLS = ("rich", "untitled", "oops", "flood_error", "refuse", "internal", "custom", "write")


def faith_manifest(
    tmp_path: Path,
    everything: list[str] | None = None,
    *,
    tools: tuple[str, ...] = (),
    lock: bool = False,
    bindings: str = "",
    limits: str = "",
) -> Path:
    """A gateway in front of `faith_server.py` (prefix `f_`) and, given its command line,
    server-everything (prefix `ev_`, effects `none`); the local client and a bearer client are
    granted `tools` (model-facing names) and every effect."""
    allow = ", ".join([*(f"tool:{t}" for t in tools), "effect:read", "effect:write"])
    ev = ""
    ev_binding = ""
    if everything is not None:
        ev_binding = "  - provider: !ref Ev\n    prefix: ev_\n    effects: none\n"
        ev = stdio_upstream("Ev", everything)
    faith = stdio_upstream("Faith", [sys.executable, str(FAITH)], env={"FAITH_KEY": "faithKey"})
    text = f"""
kind: Gateway
metadata: {{ name: FaithGate }}
runtime: !ref Policy
{"lock: tools.lock" if lock else ""}
toolProviders:
  - provider: !ref Faith
    prefix: f_
{ev_binding}{bindings}clients:
  - name: me
    local: true
    permissions: {{ allow: [{allow}] }}
    {limits}
  - name: web
    token: "${{{{ secrets.webToken }}}}"
    permissions: {{ allow: [{allow}] }}
{policy_doc(durable=True)}{faith}{ev}"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


ENV = {"WEB_TOKEN": TOKEN, "FAITH_KEY": FAITH_KEY}
if os.environ.get("PYTHONPATH"):  # a checkout run from its sources: the gateway runs the same code
    ENV["PYTHONPATH"] = os.environ["PYTHONPATH"]


@asynccontextmanager
async def over(transport: str, manifest: Path) -> AsyncIterator[Client]:
    """The official SDK client connected to the gateway over `transport` (stdio or http)."""
    if transport == "stdio":
        async with gateway_stdio(manifest, env=ENV) as client:
            yield client
        return
    with gateway_http(manifest, env=ENV) as url:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            yield client


def dump(tool: Any) -> dict[str, Any]:
    data: dict[str, Any] = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


def expected(direct: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The documented changes: the name's prefix, cleaned text, no `toolbridge/` `_meta` keys."""
    out = dict(direct, name=prefix + direct["name"])
    for key in ("title", "description"):
        if isinstance(out.get(key), str):
            out[key] = clean_text(out[key])
    for key in ("inputSchema", "outputSchema", "annotations"):
        if key in out:
            out[key] = clean_schema(out[key])
    if "_meta" in out:
        out["_meta"] = {k: v for k, v in out["_meta"].items() if not k.startswith("toolbridge/")}
    return out


async def _direct_everything(everything: list[str]) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=everything[0], args=everything[1:])
    async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
        return [dump(t) for t in (await client.list_tools()).tools]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_tools_list_keeps_every_field_of_real_servers(
    tmp_path: Path, everything_cmd: list[str], transport: str
) -> None:
    direct = await _direct_everything(everything_cmd)
    assert any("title" in t for t in direct) and any("execution" in t for t in direct)
    names = tuple(f"f_{n}" for n in FAITH_TOOLS) + tuple(f"ev_{t['name']}" for t in direct)
    manifest = faith_manifest(tmp_path, everything_cmd, tools=names)
    async with over(transport, manifest) as client:
        listed = {t.name: dump(t) for t in (await client.list_tools()).tools}
    assert sorted(listed) == sorted(names)
    for tool in direct:  # server-everything: field by field, as a direct client sees it
        assert listed[f"ev_{tool['name']}"] == expected(tool, "ev_")
    rich = listed["f_rich"]
    assert rich == {
        "name": "f_rich",
        "title": "Rich tool",
        "description": "Uses every field.",
        "inputSchema": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "the query"}},
            "required": ["q"],
        },
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "annotations": {"title": "Rich annotated", "readOnlyHint": True, "openWorldHint": False},
        "execution": {"taskSupport": "optional"},
        "icons": [
            {"src": "https://example.com/rich.png", "mimeType": "image/png", "sizes": ["48x48"]},
            {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "theme": "dark"},
        ],
        "_meta": {"com.example/ui": {"template": "card", "n": 1}},
    }
    assert listed["f_untitled"] == {
        "name": "f_untitled",
        "title": "Only a title",
        "inputSchema": {"type": "object"},
    }


async def test_a_pinned_server_keeps_every_field(tmp_path: Path) -> None:
    """Through the lock (`PinnedToolProvider`) the listing is the same as without it."""
    manifest = faith_manifest(tmp_path, tools=("f_rich", "f_untitled"), lock=True)
    await anyio.run_process(
        [TOOLBRIDGE, "lock", "--out", str(tmp_path / "tools.lock"), str(manifest)],
        env={**os.environ, **ENV},
    )
    async with over("stdio", manifest) as client:
        listed = {t.name: dump(t) for t in (await client.list_tools()).tools}
    assert sorted(listed) == ["f_rich", "f_untitled"]
    assert listed["f_rich"]["title"] == "Rich tool"
    assert listed["f_rich"]["icons"][1]["theme"] == "dark"
    assert listed["f_rich"]["execution"] == {"taskSupport": "optional"}
    assert listed["f_rich"]["_meta"] == {"com.example/ui": {"template": "card", "n": 1}}
    assert listed["f_rich"]["inputSchema"]["properties"]["q"]["description"] == "the query"


CALLED = tuple(f"f_{n}" for n in FAITH_TOOLS)


def _rpc_error(exc: BaseException) -> tuple[int, str, Any]:
    assert isinstance(exc, MCPError), repr(exc)
    return exc.error.code, exc.error.message, exc.error.data


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_results_and_errors_pass_through(tmp_path: Path, transport: str) -> None:
    manifest = faith_manifest(tmp_path, tools=CALLED)
    rpc: dict[str, tuple[int, str, Any]] = {}
    async with over(transport, manifest) as client:
        rich = await client.call_tool("f_rich", {"q": "x"})
        oops = await client.call_tool("f_oops", {})
        flood = await client.call_tool("f_flood_error", {})
        for name in ("f_refuse", "f_internal", "f_custom"):
            with pytest.raises(MCPError) as caught:
                await client.call_tool(name, {})
            rpc[name] = _rpc_error(caught.value)
        written = await client.call_tool("f_write", {})  # one failed call never closes anything
    assert dump(rich) == {
        "_meta": {"com.example/trace": "t-1"},  # the upstream's `toolbridge/` key is dropped
        "content": [{"type": "text", "text": '{"n": 3}'}],
        "structuredContent": {"n": 3},
        "isError": False,
        "resultType": "complete",
    }
    assert dump(oops) == {
        "_meta": {"com.example/trace": "t-2"},
        "content": [
            {"type": "text", "text": "first reason"},
            {"type": "text", "text": "the key *** was refused"},
            {"type": "image", "data": PIXEL, "mimeType": "image/png"},
        ],
        "structuredContent": {"reason": "quota", "retry": False},
        "isError": True,
        "resultType": "complete",
    }
    assert flood.is_error and len(flood.content) == 40
    assert all(len(b.text) < 2100 and "more characters" in b.text for b in flood.content)  # type: ignore[union-attr]
    assert rpc["f_refuse"] == (-32602, "q is required (key ***)", None)
    assert rpc["f_internal"] == (-32603, "the database went away", None)
    assert rpc["f_custom"] == (-32099, "quota exceeded for ***", {"retryAfter": 30, "key": "***"})
    assert not written.is_error
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        runs = [journal.get_run(r.run_id) for r in journal.list_runs(20)]
    finally:
        journal.close()
    rows = {}
    for run in runs:
        assert run is not None and len(run.calls) == 1
        call = run.calls[0]
        rows[call.tool_id] = (
            run.outcome,
            call.outcome,
            call.error_code,
            call.request_sent,
            call.response_received,
        )
    assert rows == {
        "f_rich": ("succeeded", "succeeded", None, True, True),
        "f_oops": ("failed", "failed", "TOOL_ERROR", True, True),  # was `succeeded`
        "f_flood_error": ("failed", "failed", "TOOL_ERROR", True, True),
        "f_refuse": ("failed", "failed", "TOOL_REFUSED", True, True),  # was `outcome_unknown`
        "f_internal": ("outcome_unknown", "outcome_unknown", "OUTCOME_UNKNOWN", True, False),
        "f_custom": ("outcome_unknown", "outcome_unknown", "OUTCOME_UNKNOWN", True, False),
        "f_write": ("succeeded", "succeeded", None, True, True),
    }
    assert FAITH_KEY.encode() not in (tmp_path / "journal.db").read_bytes()


REFUSING = """  - provider: !ref Faith
    prefix: a_
    include: [write]
    approval: write
  - provider: !ref Faith
    prefix: b_
    include: [write]
    costMicros: 1000
  - provider: !ref Faith
    prefix: g_
    include: [write]
"""


async def test_every_refused_call_has_a_row_with_its_code_and_tool(tmp_path: Path) -> None:
    """Approval declined, approval impossible (no elicitation), grant and budget: each refused
    call is journaled with the tool's name and the refusal's code, and nothing was sent."""
    manifest = faith_manifest(
        tmp_path, tools=("a_write", "b_write"), bindings=REFUSING, limits="limits: { maxCostMicros: 10 }"
    )

    async def decline(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with gateway_stdio(manifest, env=ENV, elicitation_callback=decline) as client:
        declined = await client.call_tool("a_write", {"path": "/home/user/.ssh/authorized_keys"})
        assert declined.is_error and declined.meta is not None
        assert declined.meta["toolbridge/code"] == "PERMISSION_DENIED"
        budget = await client.call_tool("b_write", {})
        assert budget.meta is not None and budget.meta["toolbridge/code"] == "BUDGET_EXCEEDED"
        grant = await client.call_tool("g_write", {})  # not listed for it, and not granted
        assert grant.meta is not None and grant.meta["toolbridge/code"] == "PERMISSION_DENIED"
    async with gateway_stdio(manifest, env=ENV) as client:  # no elicitation: cannot be asked
        impossible = await client.call_tool("a_write", {})
        assert impossible.meta is not None and impossible.meta["toolbridge/code"] == "PERMISSION_DENIED"
    with gateway_http(manifest, env=ENV) as url:  # a 2026-07-28 client without elicitation
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), mode="auto") as modern,  # type: ignore[arg-type]
        ):
            assert modern.protocol_version == "2026-07-28"
            refused = await modern.call_tool("a_write", {})
            assert refused.meta is not None and refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
            assert refused.content[0].text.endswith("cannot be asked (no elicitation)")  # type: ignore[union-attr]
    assert journal_calls(tmp_path) == [
        ("me", "a_write", "not_started", "PERMISSION_DENIED", False),
        ("me", "b_write", "not_started", "BUDGET_EXCEEDED", False),
        ("me", "g_write", "not_started", "PERMISSION_DENIED", False),
        ("me", "a_write", "not_started", "PERMISSION_DENIED", False),
        ("web", "a_write", "not_started", "PERMISSION_DENIED", False),
    ]


def test_the_inspector_sees_every_field_and_the_upstream_s_error(tmp_path: Path) -> None:
    """The MCP Inspector's CLI as the outside client: the listing's fields, and a JSON-RPC error
    with the upstream's redacted reason."""
    from test_gateway_inspector import _json, inspector

    manifest = faith_manifest(tmp_path, tools=("f_rich", "f_refuse"))
    env = [arg for key, value in ENV.items() for arg in ("-e", f"{key}={value}")]
    target = [*env, TOOLBRIDGE, "gateway", str(manifest)]
    listed = _json(inspector(tmp_path, *target, "--method", "tools/list"))
    rich = next(t for t in listed["tools"] if t["name"] == "f_rich")  # type: ignore[attr-defined]
    assert rich["title"] == "Rich tool" and rich["execution"] == {"taskSupport": "optional"}
    assert rich["icons"][0]["src"] == "https://example.com/rich.png"
    assert rich["_meta"] == {"com.example/ui": {"template": "card", "n": 1}}
    refused = inspector(tmp_path, *target, "--method", "tools/call", "--tool-name", "f_refuse")
    assert refused.returncode != 0
    shown = refused.stderr + refused.stdout  # (the Inspector prints the message, not the code)
    assert "q is required (key ***)" in shown and FAITH_KEY not in shown


def test_a_tool_whose_schema_is_too_deep_to_clean_is_not_served() -> None:
    """`served_tool` leaves out a tool whose schema nests past the cleaner's bound (one line in
    the log), instead of failing the whole listing."""
    from toolbridge.gateway._answers import served_tool
    from toolbridge.tools import ToolSpec

    deep: dict[str, Any] = {"type": "string", "description": "leaf"}
    for _ in range(400):
        deep = {"type": "object", "properties": {"x": deep}}
    assert served_tool("deep", ToolSpec(name="deep", description="d", parameters=deep)) is None
    shallow = ToolSpec(name="ok", description="d\x1b[2J", parameters={"type": "object"})
    served = served_tool("ok", shallow)
    assert served is not None and served.description == clean_text("d\x1b[2J")
