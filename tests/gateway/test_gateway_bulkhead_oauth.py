"""Sessions bound to their identity in OAuth mode too: verified OAuth tokens and secret tokens
on one gateway (a real process, a real loopback authorization server)."""

from __future__ import annotations

from pathlib import Path

import httpx2
from auth_server import CLIENT_SECRET, AuthServer
from gw_helpers import free_port, upstream_manifest
from test_gateway_bulkhead_sessions import _headers, _open, _ping
from test_gateway_oauth_http import CI_TOKEN, CLIENTS, oauth_block, serve, srv  # noqa: F401 (srv: fixture)


async def test_oauth_sessions_are_bound_and_shared_out(tmp_path: Path, srv: AuthServer) -> None:  # noqa: F811
    port = free_port()
    gateway = oauth_block(srv, port) + "maxSessionsPerIdentity: 2\n"
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n", gateway=gateway)
    env = {"INTROSPECTION_SECRET": CLIENT_SECRET, "CI_TOKEN": CI_TOKEN}
    with serve(manifest, port, env) as (url, _):
        alice = srv.issue(sub="alice", aud=url, scope="mcp")
        async with httpx2.AsyncClient(timeout=30) as http:
            mine = [(await _open(http, url, alice)).headers["mcp-session-id"] for _ in range(3)]
            ci = (await _open(http, url, CI_TOKEN)).headers["mcp-session-id"]
            # alice's third session closed her oldest idle one (through the SDK, as her principal)
            assert [await _ping(http, url, alice, sid) for sid in mine] == [404, 200, 200]
            # a secret token and an OAuth token cannot use each other's sessions
            for method in ("POST", "GET", "DELETE"):
                body = {"jsonrpc": "2.0", "id": 3, "method": "ping"} if method == "POST" else None
                response = await http.request(method, url, json=body, headers=_headers(CI_TOKEN, mine[2]))
                assert response.status_code == 404
                response = await http.request(method, url, json=body, headers=_headers(alice, ci))
                assert response.status_code == 404
            assert await _ping(http, url, alice, mine[2]) == 200
            assert await _ping(http, url, CI_TOKEN, ci) == 200
