"""The console served by a real HTTP gateway at `/console/`: nobody but an operator sees it, forms
need their CSRF token and the console's own origin, Host/Origin as `/mcp`, hostile values escaped,
and an approval decided in the page lets a waiting call (raw SDK client, no elicitation) go on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
from gw_helpers import calls_of, gateway_http, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from test_gateway_operator_approval import BINDING

OLGA = "olga-console-token-0123456789"
ALICE = "alice-token-0123456789"
ENV = {"OLGA_TOKEN": OLGA, "ALICE_TOKEN": ALICE}
CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, effect:read, tool:w_note, effect:write] }
"""
CONSOLE = """console:
  operators:
    - name: olga
      token: "${{ secrets.olgaToken }}"
approvalTimeoutMs: 60000
"""
HOSTILE = '</pre><script>alert("x")</script><img src=x onerror=alert(1)>'


def manifest_of(tmp_path: Path) -> Path:
    return upstream_manifest(tmp_path, clients=CLIENTS, binding=BINDING, gateway=CONSOLE)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, "the page has no CSRF token"
    return found.group(1)


async def signed_in(base: str) -> httpx.AsyncClient:
    http = httpx.AsyncClient(base_url=base, timeout=30)
    answer = await http.post("/console/login", data={"token": OLGA}, headers={"Origin": base})
    assert answer.status_code == 303 and "toolbridge_console" in answer.cookies
    return http


async def test_nobody_but_an_operator_sees_the_console(tmp_path: Path) -> None:
    with gateway_http(manifest_of(tmp_path), env=ENV) as url:
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for path in ("/console/approvals", "/console/journal", "/console/calls", "/console/calls/events"):
                answer = await http.get(path)
                assert answer.status_code == 401, path
                assert "Operator token" in answer.text and "w_note" not in answer.text
            # a client's token is not an operator's, over the header or the form
            assert (
                await http.get("/console/journal", headers={"Authorization": f"Bearer {ALICE}"})
            ).status_code == 401
            wrong = await http.post("/console/login", data={"token": ALICE}, headers={"Origin": base})
            assert wrong.status_code == 401 and ALICE not in wrong.text
            assert "toolbridge_console" not in wrong.cookies
            # the gateway's MCP endpoint still wants the client's token, not the operator's
            mcp = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": f"Bearer {OLGA}", "Accept": "application/json"},
            )
            assert mcp.status_code == 401
            # Host and Origin as /mcp: a DNS-rebinding page is turned away
            assert (await http.get("/console/login", headers={"Host": "evil.example:80"})).status_code == 421
            evil = await http.post(
                "/console/login", data={"token": OLGA}, headers={"Origin": "http://evil.example"}
            )
            assert evil.status_code == 403 and "toolbridge_console" not in evil.cookies
            page = await http.get("/console/approvals", headers={"Authorization": f"Bearer {OLGA}"})
            assert page.status_code == 200 and "signed in as <b>olga</b>" in page.text
            assert "Content-Security-Policy" in page.headers and page.headers["X-Frame-Options"] == "DENY"


async def test_an_operator_approves_in_the_console_and_the_waiting_call_completes(tmp_path: Path) -> None:
    with gateway_http(manifest_of(tmp_path), env=ENV) as url:
        base = url.removesuffix("/mcp")
        http = await signed_in(base)
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=90) as mcp_http,
            Client(streamable_http_client(url, http_client=mcp_http), mode="legacy") as client,  # type: ignore[arg-type]
            anyio.create_task_group() as tg,
        ):
            answers: list[types.CallToolResult] = []

            async def call(text: str) -> None:
                answers.append(await client.call_tool("w_note", {"text": text}))

            tg.start_soon(call, HOSTILE)
            with anyio.fail_after(30):
                while "approval-" not in (page := (await http.get("/console/approvals")).text):  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            assert "<script>alert" not in page and "<img" not in page
            assert "&lt;/pre&gt;&lt;script&gt;alert(\\&quot;x\\&quot;)&lt;/script&gt;&lt;img" in page
            assert "alice" in page and "w_note" in page
            approval_id = re.search(r'action="/console/approvals/([^"]+)"', page).group(1)  # type: ignore[union-attr]
            csrf = csrf_of(page)
            # a form without its token, or from another site, decides nothing
            forged = await http.post(
                f"/console/approvals/{approval_id}", data={"decision": "approve"}, headers={"Origin": base}
            )
            assert forged.status_code == 403
            cross = await http.post(
                f"/console/approvals/{approval_id}",
                data={"decision": "approve", "csrf": csrf},
                headers={"Origin": "http://127.0.0.1:1"},
            )
            assert cross.status_code == 403
            assert calls_of(tmp_path) == []
            done = await http.post(
                f"/console/approvals/{approval_id}",
                data={"decision": "approve", "csrf": csrf, "reason": ""},
                headers={"Origin": base},
            )
            assert done.status_code == 303 and done.headers["location"].endswith("done=approved")
            again = await http.post(
                f"/console/approvals/{approval_id}",
                data={"decision": "deny", "csrf": csrf},
                headers={"Origin": base},
            )
            assert again.headers["location"].endswith("done=late")  # decided once
        await http.aclose()
        assert not answers[0].is_error and answers[0].content[0].text == "noted"  # type: ignore[union-attr]
        assert calls_of(tmp_path) == ["note"]
        async with httpx.AsyncClient(base_url=base, timeout=30) as reader:
            journal = await reader.get(
                "/console/journal?tool=w_note&outcome=succeeded", headers={"Authorization": f"Bearer {OLGA}"}
            )
        assert journal.status_code == 200 and "w_note" in journal.text and "alice" in journal.text
        assert 'class="outcome-succeeded"' in journal.text


async def test_refused_calls_show_live_with_their_code(tmp_path: Path) -> None:
    """A call refused by its grant and one whose approval timed out reach the live stream as
    `not_started` with their codes (nothing sent upstream)."""
    manifest = upstream_manifest(
        tmp_path, clients=CLIENTS, binding=BINDING, gateway=CONSOLE.replace("60000", "1000")
    )
    with gateway_http(manifest, env=ENV) as url:
        base = url.removesuffix("/mcp")
        seen: dict[str, dict[str, object]] = {}
        async with (
            httpx.AsyncClient(base_url=base, timeout=60) as http,
            http.stream("GET", "/console/calls/events", headers={"Authorization": f"Bearer {OLGA}"}) as live,
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60) as mcp_http,
            Client(streamable_http_client(url, http_client=mcp_http), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            assert live.status_code == 200
            refused = await client.call_tool("up_weather", {"city": "Oslo"})  # not granted
            timed_out = await client.call_tool("w_note", {"text": "nobody decides"})
            assert refused.meta and refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
            assert timed_out.meta and timed_out.meta["toolbridge/code"] == "APPROVAL_TIMEOUT"
            with anyio.fail_after(30):
                async for line in live.aiter_lines():
                    if line.startswith("data: "):
                        row = json.loads(line[6:])
                        seen[row["tool"]] = row
                    if {"up_weather", "w_note"} <= seen.keys():
                        break
        assert (seen["up_weather"]["outcome"], seen["up_weather"]["code"]) == (
            "not_started",
            "PERMISSION_DENIED",
        )
        assert (seen["w_note"]["outcome"], seen["w_note"]["code"]) == ("not_started", "APPROVAL_TIMEOUT")
        assert seen["w_note"]["principal"] == "alice" and "nobody decides" not in json.dumps(seen)
    assert calls_of(tmp_path) == []
