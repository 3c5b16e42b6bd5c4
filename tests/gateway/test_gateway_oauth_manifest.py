"""The `Gateway` kind's `oauth` and the clients' `oauth` rules under `toolbridge check`, the rules'
matching, and the OAuth example manifest (docs/gateway.md) served with a loopback authorization
server and the official SDK client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from auth_server import CLIENT_SECRET, AuthServer
from gw_helpers import free_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from test_gateway_oauth_http import serve

from toolbridge.gateway import ClientRule, OAuthGate
from toolbridge.manifest import check_manifest, manifest_json_schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "manifests" / "gateway-oauth.yaml"
TAIL = """
---
kind: Tasks.ToolSet
metadata: { name: T }
tools:
  - name: greet
    description: Greet.
    inputSchema: { type: object, properties: {} }
    task: { instructions: [{ action: result, params: { value: hi } }] }
"""
GOOD_OAUTH = """oauth:
  resource: https://gw.example.com/mcp
  issuer: https://auth.example.com
  jwksUri: https://auth.example.com/jwks
"""


def codes(tmp_path: Path, body: str) -> list[tuple[str, str, int]]:
    path = tmp_path / "m.yaml"
    path.write_text("kind: Gateway\nmetadata: { name: G }\ntasks: [!ref T]\n" + body + TAIL, encoding="utf-8")
    report = check_manifest([path], env={"S": "secret-value-1"})
    return [(d.code, d.severity, d.line) for d in report.diagnostics]


def test_good_oauth_gateways_check(tmp_path: Path) -> None:
    body = (
        GOOD_OAUTH
        + """  introspection:
    url: http://127.0.0.1:9000/introspect
    clientId: gw
    clientSecret: "${{ secrets.s }}"
    clientAuth: client_secret_post
  scopes: [mcp, "tools:read"]
  algorithms: [ES256, EdDSA]
  leewaySeconds: 10
clients:
  - { name: a, oauth: { subject: alice, scopes: [x] } }
  - { name: b, oauth: { clientId: robot }, local: true }
  - { name: c, oauth: { claims: { groups: ops, admin: true, level: 3 } } }
  - { name: d, token: "${{ secrets.s }}" }
"""
    )
    assert codes(tmp_path, body) == []


OAUTH_BAD = [
    ("oauth: { resource: https://gw/mcp, issuer: https://a }\n", 4),  # no way to verify
    ("oauth: { resource: https://gw/mcp, jwksUri: https://a/jwks }\n", 4),  # no issuer
    ("oauth: { resource: https://gw/mcp, issuer: x, jwksUri: http://auth.example.com/jwks }\n", 4),
    ("oauth: { resource: https://gw/mcp, issuer: x, jwksUri: 'https://u:p@a/jwks' }\n", 4),
    ("oauth: { resource: 'mailto:x', issuer: x, jwksUri: https://a/jwks }\n", 4),
    (GOOD_OAUTH + "  algorithms: [HS256]\n", 8),
    (GOOD_OAUTH + "  algorithms: [none]\n", 8),
    (GOOD_OAUTH + "  leewaySeconds: 3600\n", 8),
    (GOOD_OAUTH + "  scopes: ['has space']\n", 8),
    (GOOD_OAUTH + "  timeoutMs: 0\n", 8),
    (GOOD_OAUTH + "  introspection: { url: https://a/i, clientId: gw, clientSecret: inline-secret }\n", 8),
    (
        GOOD_OAUTH
        + "  introspection: { url: http://10.0.0.1/i, clientId: gw, clientSecret: '${{ secrets.s }}' }\n",
        8,
    ),
    (
        GOOD_OAUTH + "  introspection: { url: https://a/i, clientId: gw, clientSecret: '${{ secrets.s }}', "
        "clientAuth: private_key_jwt }\n",
        8,
    ),
    (GOOD_OAUTH + "clients: [{ name: a, oauth: {} }]\n", 8),
    (GOOD_OAUTH + "clients: [{ name: a, oauth: { subject: a, claims: { g: [1] } } }]\n", 8),
    ("clients: [{ name: a, oauth: { subject: alice } }]\n", 1),  # rules without the gateway's oauth
]


@pytest.mark.parametrize(("body", "line"), OAUTH_BAD)
def test_bad_oauth_is_reported_at_its_line(tmp_path: Path, body: str, line: int) -> None:
    found = codes(tmp_path, body)
    assert found, body
    assert all(severity == "error" for _, severity, _ in found)
    assert {c for c, _, _ in found} <= {"ERR_MANIFEST_INVALID_VALUE", "ERR_MANIFEST_WRONG_TYPE"}, found
    assert any(at == line for _, _, at in found) or line == 1, found


def test_client_auth_is_camel_case_only(tmp_path: Path) -> None:
    intro = "  introspection: { url: https://a/i, clientId: gw, clientSecret: '${{ secrets.s }}', "
    assert codes(tmp_path, GOOD_OAUTH + intro + "clientAuth: client_secret_basic }\n") == []
    found = codes(tmp_path, GOOD_OAUTH + intro + "client_auth: client_secret_post }\n")
    assert found == [("ERR_MANIFEST_UNKNOWN_FIELD", "error", 8)]


def test_the_schema_has_the_oauth_fields() -> None:
    defs = manifest_json_schema()["$defs"]
    assert "oauth" in defs["GatewayDoc"]["properties"] and "oauth" in defs["GatewayClient"]["properties"]
    assert defs["GatewayOAuth"]["additionalProperties"] is False
    assert {"resource", "issuer", "jwksUri", "introspection"} <= set(defs["GatewayOAuth"]["properties"])
    auth = defs["GatewayIntrospection"]["properties"]["clientAuth"]
    assert auth["enum"] == ["client_secret_basic", "client_secret_post"]
    assert auth["default"] == "client_secret_basic"
    assert defs["GatewayIntrospection"]["additionalProperties"] is False


def _token(**kw: object) -> AccessToken:
    claims = {"sub": "alice", "client_id": "app", **kw}
    return AccessToken(token="t", client_id="app", scopes=[], subject=str(claims["sub"]), claims=claims)


def test_client_rules_match_exactly() -> None:
    assert ClientRule("a", subject="alice").matches(_token())
    assert not ClientRule("a", subject="Alice").matches(_token())
    assert ClientRule("a", client_id="app").matches(_token())
    assert ClientRule("a", client_id="web").matches(_token(azp="web"))
    assert ClientRule("a", claims={"groups": "ops"}).matches(_token(groups=["dev", "ops"]))
    assert not ClientRule("a", claims={"groups": "ops"}).matches(_token(groups="dev ops"))
    assert not ClientRule("a", claims={"admin": True}).matches(_token(admin="true"))
    assert not ClientRule("a", claims={"level": 1}).matches(_token(level=True))  # bool is not 1
    assert not ClientRule("a", subject="alice", claims={"g": "x"}).matches(_token())
    assert not ClientRule("a").matches(_token())  # a rule without conditions matches nothing


async def test_the_python_block_of_gateway_md_runs() -> None:
    """The ```python block of docs/gateway.md (the OAuth section) runs as written."""
    text = (ROOT / "docs" / "gateway.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    blocks = [b for b in blocks if "client.listen(" not in b]  # that one: test_gateway_docs.py
    assert len(blocks) == 1
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "docs/gateway.md", "exec"), namespace)
    await namespace["verifier"].aclose()
    assert isinstance(namespace["gate"], OAuthGate)


def test_the_example_checks() -> None:
    report = check_manifest([EXAMPLE], env={"INTROSPECTION_SECRET": "example-secret-123"})
    assert report.diagnostics == []


async def test_the_example_serves_oauth_clients(tmp_path: Path) -> None:
    """docs/gateway.md's OAuth example, its URLs pointed at a loopback authorization server."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with AuthServer() as srv:
        srv.introspection_clients["desk-gateway"] = CLIENT_SECRET
        text = EXAMPLE.read_text(encoding="utf-8")
        text = text.replace("../../tests/servers", str(ROOT / "tests" / "servers"))
        text = text.replace("https://gateway.example.com/mcp", url)
        text = text.replace("https://auth.example.com", srv.url)
        manifest = tmp_path / "gateway-oauth.yaml"
        manifest.write_text(text, encoding="utf-8")
        with serve(manifest, port, {"INTROSPECTION_SECRET": CLIENT_SECRET}):
            tokens = {
                "alice": srv.issue(sub="alice", aud=url, scope="mcp"),
                "nightly": srv.issue(sub="job", client_id="nightly-job", aud=url, scope="mcp tools:sum"),
                "staff": srv.opaque(sub="sam", aud=url, scope="mcp", groups=["staff"]),
            }
            seen = {}
            for who, token in tokens.items():
                async with (
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
                    Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
                ):
                    seen[who] = sorted(t.name for t in (await client.list_tools()).tools)
                    if who == "nightly":
                        summed = await client.call_tool("ev_get-sum", {"a": 2, "b": 3})
                        assert "5" in summed.content[0].text  # type: ignore[union-attr]
            assert seen == {
                "alice": ["ev_echo", "ev_get-sum"],
                "nightly": ["ev_get-sum"],
                "staff": ["ev_echo"],
            }
            narrow = srv.issue(sub="job", client_id="nightly-job", aud=url, scope="mcp")
            answer = httpx2.post(url, json={}, headers={"Authorization": f"Bearer {narrow}"}, timeout=10)
            assert answer.status_code == 403 and 'scope="mcp tools:sum"' in answer.headers["www-authenticate"]
