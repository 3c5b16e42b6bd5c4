"""Console operators signed in by OAuth: a real gateway process with `oauth:` and `console.scopes`,
real tokens from the loopback authorization server (`auth_server.py`). A token carrying the console
scope signs its subject in (as a bearer header, or pasted once into the sign-in form) and decides
an approval that a client without elicitation waits on; a client's token without the scope, an
expired token, a token for another resource, a DPoP-bound one and junk stay out, and the console
scope opens nothing at `/mcp`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from auth_server import CLIENT_SECRET, AuthServer
from gw_helpers import calls_of, free_port, upstream_manifest
from test_gateway_console import BINDING, csrf_of
from test_gateway_oauth_http import connect, oauth_block, serve

from toolbridge.console._auth import Operators

CLIENTS = """clients:
  - name: alice
    oauth: { subject: alice }
    permissions: { allow: [tool:up_echo, effect:read, tool:w_note, effect:write] }
"""
CONSOLE = """console:
  scopes: [console]
approvalTimeoutMs: 60000
"""


@pytest.fixture(scope="module")
def srv() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


async def test_an_oauth_operator_signs_in_and_decides_and_others_stay_out(
    tmp_path: Path, srv: AuthServer
) -> None:
    port = free_port()
    gateway = oauth_block(srv, port) + CONSOLE
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding=BINDING, gateway=gateway)
    with serve(manifest, port, {"INTROSPECTION_SECRET": CLIENT_SECRET}) as (url, err):
        base = url.removesuffix("/mcp")
        olga = srv.issue(sub="olga", aud=url, scope="console")
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:

            async def status(token: str | None, path: str = "/console/journal") -> tuple[int, str]:
                headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                answer = await http.get(path, headers=headers)
                return answer.status_code, answer.text

            code, text = await status(None)
            assert code == 401 and "the scope <code>console</code>" in text
            code, text = await status(olga)
            assert code == 200 and "signed in as <b>olga</b>" in text
            opaque = srv.opaque(sub="oscar", aud=url, scope="console", exp=int(time.time()) + 300)
            code, text = await status(opaque)  # introspected, as the gateway's clients are
            assert code == 200 and "signed in as <b>oscar</b>" in text
            hostile = {
                alice: (403, "lacks the console&#x27;s scope"),  # a client's token: no console scope
                srv.issue(sub="olga", aud=url, scope="console", lifetime=-600): (401, "token expired"),
                srv.issue(sub="olga", aud="http://127.0.0.1:1/mcp", scope="console"): (
                    401,
                    "not issued for this resource",
                ),
                srv.issue(sub="olga", aud=url, scope="console", iss="http://evil.example"): (
                    401,
                    "issuer not accepted",
                ),
                srv.issue(sub="olga", aud=url, scope="console", cnf={"jkt": "A" * 43}): (401, "DPoP-bound"),
                "junk.not.a-token": (401, "token refused"),
            }
            for token, (want, why) in hostile.items():
                code, text = await status(token)
                assert (code, why in text) == (want, True), (token[:20], code, text[-400:])
                assert "signed in as" not in text and token not in text
            # the console's scope opens nothing at /mcp (the gateway requires `mcp` there)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            mcp = await http.post(url, json=ping, headers={"Authorization": f"Bearer {olga}"})
            assert mcp.status_code == 403
            # a token without the scope signs nobody in through the form either
            refused = await http.post("/console/login", data={"token": alice}, headers={"Origin": base})
            assert refused.status_code == 403 and "toolbridge_console" not in refused.cookies
            signed = await http.post("/console/login", data={"token": olga}, headers={"Origin": base})
            assert signed.status_code == 303 and "toolbridge_console" in signed.cookies
            http.cookies = signed.cookies

            async with connect(url, alice) as client, anyio.create_task_group() as tg:
                answers: list[types.CallToolResult] = []

                async def call() -> None:
                    answers.append(await client.call_tool("w_note", {"text": "from alice"}))

                tg.start_soon(call)
                with anyio.fail_after(30):
                    while "approval-" not in (page := (await http.get("/console/approvals")).text):  # noqa: ASYNC110
                        await anyio.sleep(0.1)
                found = re.search(r'action="/console/approvals/([^"]+)"', page)
                assert found is not None and "from alice" in page
                done = await http.post(
                    f"/console/approvals/{found.group(1)}",
                    data={"decision": "approve", "csrf": csrf_of(page)},
                    headers={"Origin": base},
                )
                assert done.headers["location"].endswith("done=approved")
            assert not answers[0].is_error
            decided = (await http.get("/console/approvals")).text
            assert re.search(r"approved</td><td>olga</td>", decided), decided[-1500:]
    assert calls_of(tmp_path) == ["note"]
    log = err.read_text()
    assert olga not in log and alice not in log and "Traceback" not in log


def test_a_session_ends_when_its_token_expires() -> None:
    operators = Operators({})
    assert operators.session(operators.sign_in("olga", until=time.time() + 600)) is not None
    assert operators.session(operators.sign_in("olga", until=time.time() - 1)) is None
