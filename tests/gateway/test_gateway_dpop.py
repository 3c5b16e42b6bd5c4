"""The gateway's OAuth door with DPoP-bound tokens (RFC 9449), against a real authorization server.

`tests/oauth/dpop_server.py` (its own process on loopback) issues JWT access tokens bound to the
proof key (`cnf.jkt`); `OAuthGate` verifies them with that server's published keys and checks
each request's proof. Driven with ASGI messages: every hostile proof is a 401, never an exception.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oauth"))
from test_dpop_client import Start, dpop_server  # noqa: F401  (a fixture)
from test_gateway_oauth_gate import App, call

from toolbridge.clients import DPoPKey
from toolbridge.gateway import ClientRule, OAuthGate, OAuthSettings


async def _call(gate: OAuthGate, headers: list[tuple[bytes, bytes]]) -> tuple[int, str]:
    """One POST through `gate`: its status and `WWW-Authenticate`."""
    status, found = await call(gate, headers)
    return status, found.get("www-authenticate", "")


def _bound_token(base: str, key: DPoPKey) -> str:
    proof = key.proof("POST", f"{base}/token")
    answer = httpx2.post(
        f"{base}/token", data={"grant_type": "client_credentials"}, headers={"DPoP": proof}, timeout=10
    ).json()
    assert answer["token_type"] == "DPoP"
    token: str = answer["access_token"]
    return token


async def test_a_dpop_bound_token_and_every_hostile_proof(dpop_server: Start) -> None:  # noqa: F811
    base = dpop_server()
    resource = f"{base}/mcp"
    key = DPoPKey()
    token = await anyio.to_thread.run_sync(_bound_token, base, key)
    app = App()
    settings = OAuthSettings(resource=resource, issuer=base, jwks_url=f"{base}/jwks", jwt_cache_s=0)
    gate = OAuthGate(app, settings, [ClientRule("job", subject="c1")])
    try:

        def auth(scheme: str = "DPoP", proof: str | None = None) -> list[tuple[bytes, bytes]]:
            headers = [(b"authorization", f"{scheme} {token}".encode())]
            if proof is not None:
                headers.append((b"dpop", proof.encode()))
            return headers

        good = key.proof("POST", resource, access_token=token)
        assert await _call(gate, auth(proof=good)) == (200, "")
        assert app.seen == ["job"]
        refused = {
            "replayed": auth(proof=good),
            "bearer": auth("Bearer", key.proof("POST", resource, access_token=token)),
            "no proof": auth(),
            "another URL": auth(proof=key.proof("POST", f"{base}/other", access_token=token)),
            "another method": auth(proof=key.proof("GET", resource, access_token=token)),
            "another key": auth(proof=DPoPKey().proof("POST", resource, access_token=token)),
            "another token": auth(proof=key.proof("POST", resource, access_token="x" + token)),
            "two proofs": [*auth(proof=key.proof("POST", resource, access_token=token)), (b"dpop", b"x.y.z")],
            "garbage": auth(proof="not a jwt"),
        }
        for what, headers in refused.items():
            status, challenge = await _call(gate, headers)
            assert status == 401, what
            assert "error=" in challenge, (what, challenge)
        assert app.seen == ["job"]
        status, challenge = await _call(gate, auth("Bearer", None))
        assert status == 401 and "presented as Bearer" in challenge
        status, challenge = await _call(
            gate, auth(proof=key.proof("POST", resource + "?a=1", access_token=token))
        )
        assert status == 401 and challenge.startswith("DPoP ")
    finally:
        await gate.verifier.aclose()


async def test_a_bearer_token_with_the_dpop_scheme_is_refused(dpop_server: Start) -> None:  # noqa: F811
    base = dpop_server()
    resource = f"{base}/mcp"
    answer = httpx2.post(f"{base}/token", data={"grant_type": "client_credentials"}, timeout=10).json()
    assert answer["token_type"] == "Bearer"
    token = answer["access_token"]
    app = App()
    gate = OAuthGate(
        app,
        OAuthSettings(resource=resource, issuer=base, jwks_url=f"{base}/jwks"),
        [ClientRule("job", subject="c1")],
    )
    try:
        assert (await _call(gate, [(b"authorization", f"Bearer {token}".encode())]))[0] == 200
        proof = DPoPKey().proof("POST", resource, access_token=token)
        status, challenge = await _call(
            gate, [(b"authorization", f"DPoP {token}".encode()), (b"dpop", proof.encode())]
        )
        assert status == 401 and "not DPoP-bound" in challenge
    finally:
        await gate.verifier.aclose()


def test_a_stale_proof_and_the_replay_window() -> None:
    import time

    import pytest

    from toolbridge.gateway import TokenRejected
    from toolbridge.gateway._dpop_proof import ReplayCache, check_proof

    key = DPoPKey()
    proof = key.proof("POST", "https://gw.test/mcp", access_token="tok")
    replay = ReplayCache(size=2)
    args: dict[str, Any] = {
        "method": "POST",
        "url": "https://gw.test/mcp/",
        "token": "tok",
        "jkt": key.thumbprint,
    }
    with pytest.raises(TokenRejected, match="iat outside"):
        check_proof(proof, replay=replay, now=time.time() + 1000, **args)
    check_proof(proof, replay=replay, **args)
    with pytest.raises(TokenRejected, match="replayed"):
        check_proof(proof, replay=replay, **args)
    for _ in range(5):  # the cache stays bounded; the oldest entries go first
        check_proof(key.proof("POST", "https://gw.test/mcp", access_token="tok"), replay=replay, **args)
    assert len(replay) <= 2


def settings_of(**oauth: object) -> OAuthSettings:
    """The OAuth settings a Gateway document with `oauth:` (these fields on top of a resource, an
    issuer and a key set) builds."""
    from toolbridge.gateway._build import _oauth_of
    from toolbridge.manifest._kinds_gateway import GatewayDoc
    from toolbridge.manifest._yaml import Ref

    fields = {
        "resource": "https://gw.test/mcp",
        "issuer": "https://as.test",
        "jwksUri": "https://as.test/jwks",
    }
    base = {"kind": "Gateway", "metadata": {"name": "G"}, "tasks": [Ref("T")]}
    settings, _ = _oauth_of(GatewayDoc.model_validate({**base, "oauth": {**fields, **oauth}}))
    assert settings is not None
    return settings


def test_the_stale_key_grace_is_set_from_the_manifest() -> None:
    assert settings_of().jwks_stale_s == 3600.0
    assert settings_of(jwksStaleSeconds=0).jwks_stale_s == 0.0


async def test_unknown_opaque_tokens_are_introspected_at_a_bounded_rate_per_client() -> None:
    """A client address sending ever new opaque tokens gets 429 past its budget; the authorization
    server is not asked for them, and another address (or a known token) is not held back."""
    from auth_server import CLIENT_ID, CLIENT_SECRET, AuthServer

    with AuthServer() as srv:
        resource = "http://127.0.0.1:8765/mcp"
        settings = OAuthSettings(
            resource=resource,
            issuer=srv.issuer,
            introspection_url=f"{srv.url}/introspect",
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            introspections_per_minute=0.001,  # no refill while the test runs: counts, not time
        )
        app = App()
        gate = OAuthGate(app, settings, [ClientRule("alice", subject="alice")])
        good = srv.opaque(sub="alice", aud=resource, scope="mcp")
        try:
            assert (await _call(gate, [(b"authorization", f"Bearer {good}".encode())]))[0] == 200
            statuses = [
                (await _call(gate, [(b"authorization", f"Bearer unknown-{i}".encode())]))[0]
                for i in range(20)
            ]
            assert statuses.count(401) == 9 and statuses.count(429) == 11, statuses  # burst 10 - the good one
            asked = srv.introspections
            assert (await _call(gate, [(b"authorization", f"Bearer {good}".encode())]))[0] == 200  # cached
            assert srv.introspections == asked
            assert gate.introspection_limit is not None
            assert gate.introspection_limit.take("10.0.0.9", 0.0)  # another address has its own budget
        finally:
            await gate.verifier.aclose()
