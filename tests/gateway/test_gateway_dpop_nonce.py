"""Nonces the gateway issues for DPoP proofs (RFC 9449 section 9), against a real authorization server.

With `dpopNonce: true` a proof without the gateway's current nonce is answered 401
`use_dpop_nonce` with a fresh nonce in `DPoP-Nonce`; the same request with that nonce passes. A
nonce of another gateway process, an expired one, or a forged one is refused the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oauth"))
from test_dpop_client import Start, dpop_server  # noqa: F401  (a fixture)
from test_gateway_dpop import _bound_token, settings_of
from test_gateway_oauth_gate import App, call

from toolbridge.clients import DPoPKey
from toolbridge.gateway import ClientRule, OAuthGate, OAuthSettings
from toolbridge.gateway._dpop_proof import NONCE_LIFETIME_S, NonceIssuer


async def test_a_proof_needs_the_gateways_nonce(dpop_server: Start) -> None:  # noqa: F811
    base = dpop_server()
    resource = f"{base}/mcp"
    key = DPoPKey()
    token = await anyio.to_thread.run_sync(_bound_token, base, key)
    app = App()
    settings = OAuthSettings(
        resource=resource, issuer=base, jwks_url=f"{base}/jwks", jwt_cache_s=0, dpop_nonce=True
    )
    gate = OAuthGate(app, settings, [ClientRule("job", subject="c1")])
    try:

        def auth(nonce: str | None) -> list[tuple[bytes, bytes]]:
            proof = key.proof("POST", resource, access_token=token, nonce=nonce)
            return [(b"authorization", f"DPoP {token}".encode()), (b"dpop", proof.encode())]

        status, headers = await call(gate, auth(None))
        assert status == 401 and headers["www-authenticate"].startswith('DPoP error="use_dpop_nonce"')
        nonce = headers["dpop-nonce"]
        assert app.seen == []
        assert (await call(gate, auth(nonce)))[0] == 200
        assert (await call(gate, auth(nonce)))[0] == 200  # a nonce serves many proofs
        assert app.seen == ["job", "job"]
        elsewhere = NonceIssuer().current()  # another gateway process's nonce
        for bad in (elsewhere, nonce[:-2] + "AA", "x" * 32, "", "not-a-nonce"):
            status, headers = await call(gate, auth(bad))
            assert status == 401 and "use_dpop_nonce" in headers["www-authenticate"], bad
            assert headers["dpop-nonce"] == nonce
        assert app.seen == ["job", "job"]
    finally:
        await gate.verifier.aclose()


def test_nonces_expire_and_are_renewed() -> None:
    issuer = NonceIssuer(lifetime_s=NONCE_LIFETIME_S)
    now = 1_800_000_000.0
    first = issuer.current(now)
    assert issuer.valid(first, now) and issuer.valid(first, now + NONCE_LIFETIME_S)
    assert not issuer.valid(first, now + NONCE_LIFETIME_S + 1)
    assert issuer.current(now + NONCE_LIFETIME_S / 2 - 1) == first
    second = issuer.current(now + NONCE_LIFETIME_S / 2)
    assert second != first and issuer.valid(second, now + NONCE_LIFETIME_S)
    assert not NonceIssuer(key=b"k" * 32).valid(NonceIssuer(key=b"j" * 32).current(now), now)


@given(
    st.one_of(st.text(max_size=64), st.binary(max_size=40).map(lambda b: b.hex()), st.none(), st.integers())
)
def test_no_made_up_nonce_is_taken(candidate: object) -> None:
    assert NonceIssuer().valid(candidate) is False


def test_the_manifest_turns_nonces_and_the_introspection_rate_on() -> None:
    settings = settings_of()
    assert not settings.dpop_nonce and settings.introspections_per_minute == 60.0
    settings = settings_of(dpopNonce=True, introspectionsPerMinute=5)
    assert settings.dpop_nonce and settings.introspections_per_minute == 5.0
