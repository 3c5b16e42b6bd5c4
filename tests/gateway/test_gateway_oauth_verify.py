"""The gateway's OAuth token verification against a real loopback authorization server
(`auth_server.py`): JWT/JWKS and introspection, and every hostile token or server we could think of.
Each refusal is a `TokenRejected` with a short fixed reason, in bounded time; a server that cannot
be asked (down, hanging, failing, answering junk) is an `AuthUnavailable`, never a refusal."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import jwt
import pytest
from auth_server import CLIENT_ID, CLIENT_SECRET, AuthServer
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbridge.errors import ConfigError
from toolbridge.gateway import (
    AuthUnavailable,
    IntrospectionVerifier,
    JwtVerifier,
    OAuthSettings,
    OAuthVerifier,
    TokenRejected,
)

RES = "http://127.0.0.1:8765/mcp"


@pytest.fixture(scope="module")
def srv() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(srv: AuthServer) -> None:
    srv.jwks_mode = srv.introspect_mode = "ok"
    srv.published = ["r1", "e1"]


def jwt_settings(srv: AuthServer, **kw: Any) -> OAuthSettings:
    return OAuthSettings(resource=RES, issuer=srv.issuer, jwks_url=f"{srv.url}/jwks", **kw)


def intro_settings(srv: AuthServer, **kw: Any) -> OAuthSettings:
    base: dict[str, Any] = {
        "resource": RES,
        "issuer": srv.issuer,
        "introspection_url": f"{srv.url}/introspect",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
    }
    base.update(kw)
    return OAuthSettings(**base)


@pytest.fixture
async def verifier(srv: AuthServer) -> AsyncIterator[JwtVerifier]:
    v = JwtVerifier(jwt_settings(srv))
    yield v
    await v.aclose()


async def reason(v: Any, token: str) -> str:
    with anyio.fail_after(10), pytest.raises(TokenRejected) as info:
        await v.check(token)
    assert info.value.code == "ERR_GATEWAY_AUTH" and info.value.status == 401
    assert len(token) < 8 or token not in str(info.value)
    return info.value.reason


async def unavailable(v: Any, token: str, limit_s: float = 10) -> AuthUnavailable:
    """`v.check(token)` cannot decide (and says so within `limit_s`), quoting no token."""
    with anyio.fail_after(limit_s), pytest.raises(AuthUnavailable) as info:
        await v.check(token)
    assert info.value.code == "ERR_GATEWAY_AUTH_UNAVAILABLE"
    assert token not in str(info.value) and CLIENT_SECRET not in str(info.value)
    assert 1 <= info.value.retry_after_s <= 300
    return info.value


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], payload: dict[str, Any], sign: Any = None) -> str:
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    signature = sign(head.encode()) if sign is not None else b""
    return head + "." + b64(signature)


def claims(srv: AuthServer, **kw: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": srv.issuer, "aud": RES, "sub": "alice", "exp": now + 300, "iat": now}
    base.update(kw)
    return base


async def test_good_tokens_rs256_and_es256(srv: AuthServer, verifier: JwtVerifier) -> None:
    for kid in ("r1", "e1"):
        token = await verifier.check(srv.issue(aud=RES, kid=kid, scope="mcp tools:read"))
        assert token.subject == "alice" and token.client_id == "desk-app"
        assert token.scopes == ["mcp", "tools:read"] and token.resource == RES
        assert token.claims is not None and token.claims["iss"] == srv.issuer
    assert (await verifier.check(srv.issue(aud=["other", RES + "/"]))).subject == "alice"
    assert (await verifier.check(srv.issue(aud=RES, scope=None, scp=["a", "b"]))).scopes == ["a", "b"]
    assert await verifier.verify_token(srv.issue(aud=RES)) is not None  # the SDK's protocol
    assert await verifier.verify_token(srv.issue(aud="elsewhere")) is None


async def test_time_claims_with_leeway(srv: AuthServer, verifier: JwtVerifier) -> None:
    assert await reason(verifier, srv.issue(aud=RES, lifetime=-120)) == "token expired"
    assert (await verifier.check(srv.issue(aud=RES, lifetime=-5))).subject == "alice"  # within 30 s
    future = int(time.time()) + 600
    assert await reason(verifier, srv.issue(aud=RES, nbf=future)) == "token not yet valid"
    assert await reason(verifier, srv.issue(aud=RES, iat=future)) == "token not yet valid"
    assert await reason(verifier, srv.issue(aud=RES, omit=("exp",))) == "token lacks a required claim"


async def test_audience_and_issuer(srv: AuthServer, verifier: JwtVerifier) -> None:
    wrong_aud = srv.issue(aud="http://127.0.0.1:8765/other")
    assert await reason(verifier, wrong_aud) == "token not issued for this resource"
    assert await reason(verifier, srv.issue(aud=["a", "b"])) == "token not issued for this resource"
    assert await reason(verifier, srv.issue(aud=RES, omit=("aud",))) == "token lacks a required claim"
    bad_iss = srv.issue(aud=RES, iss="http://127.0.0.1:1/evil")
    assert await reason(verifier, bad_iss) == "token issuer not accepted"


async def test_alg_none_and_hs256_with_the_public_key(srv: AuthServer, verifier: JwtVerifier) -> None:
    payload = claims(srv)
    none = handmade({"alg": "none", "typ": "JWT", "kid": "r1"}, payload)
    assert await reason(verifier, none) == "token algorithm not allowed"
    none_lower = handmade({"alg": "None", "kid": "r1"}, payload)
    assert await reason(verifier, none_lower) == "token algorithm not allowed"
    pem = srv.public_pem("r1")
    hs = handmade({"alg": "HS256", "kid": "r1"}, payload, lambda m: hmac.new(pem, m, hashlib.sha256).digest())
    assert await reason(verifier, hs) == "token algorithm not allowed"
    # The gateway cannot be configured to take HS*, or none, at all.
    for algs in (("HS256",), ("none",), ()):
        with pytest.raises(ConfigError) as info:
            jwt_settings(srv, algorithms=algs)
        assert info.value.code == "ERR_GATEWAY_CONFIG"


async def test_key_confusion_and_foreign_keys(srv: AuthServer, verifier: JwtVerifier) -> None:
    # An ES256 key named by a token that says RS256.
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    confused = srv.issue(aud=RES, kid="e1", key=attacker, alg="RS256")
    assert await reason(verifier, confused) == "token algorithm does not match its key"
    # The right kid, the wrong key; and a key offered in the token's own headers is never used.
    forged = srv.issue(aud=RES, kid="r1", key=attacker, alg="RS256")
    assert await reason(verifier, forged) == "bad token signature"
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(attacker.public_key()))
    embedded = srv.issue(
        aud=RES, kid="r1", key=attacker, alg="RS256", headers={"jwk": jwk, "jku": "http://127.0.0.1:1/k"}
    )
    assert await reason(verifier, embedded) == "bad token signature"
    crit = srv.issue(aud=RES, headers={"crit": ["exp"]})
    assert await reason(verifier, crit) == "token has critical headers"
    tampered = srv.issue(aud=RES, sub="alice").split(".")
    tampered[1] = b64(json.dumps(claims(srv, sub="root")).encode())
    assert await reason(verifier, ".".join(tampered)) == "bad token signature"


async def test_junk_tokens(srv: AuthServer, verifier: JwtVerifier) -> None:
    for junk in ("", "abc", "a.b.c", "....", "e30.e30.", "x" * 20_000, "\u00e9.\u00e9.\u00e9"):
        why = await reason(verifier, junk)
        assert why in {"malformed token", "token too long", "token algorithm not allowed"}
    nested = handmade({"alg": "RS256", "kid": "r1"}, {"a": [[[[[]]]]]})
    assert await reason(verifier, nested) == "bad token signature"  # checked before any claim


async def test_unknown_kid_is_fetched_once_then_refused(srv: AuthServer) -> None:
    v = JwtVerifier(jwt_settings(srv, jwks_min_refetch_s=1.0))
    try:
        await v.check(srv.issue(aud=RES))
        await anyio.sleep(1.1)
        before = srv.jwks_fetches
        srv.add_key("r2")  # rotated in after the first fetch: found by one more fetch
        assert (await v.check(srv.issue(aud=RES, kid="r2"))).subject == "alice"
        assert srv.jwks_fetches == before + 1
        # A flood of unknown kids right after makes no more fetches (at most one per second).
        for i in range(20):
            srv.keys[f"x{i}"] = srv.keys["r1"]
            assert await reason(v, srv.issue(aud=RES, kid=f"x{i}")) == "unknown signing key"
        assert srv.jwks_fetches == before + 1
        await anyio.sleep(1.1)
        assert await reason(v, srv.issue(aud=RES, kid="x0")) == "unknown signing key"
        assert srv.jwks_fetches == before + 2  # later, an unknown kid is looked up again, once
    finally:
        await v.aclose()


async def test_no_kid_takes_the_only_fitting_key(srv: AuthServer, verifier: JwtVerifier) -> None:
    key = srv.keys["r1"][0]
    token = srv.issue(aud=RES, kid=None, key=key, alg="RS256")
    assert (await verifier.check(token)).subject == "alice"
    srv.add_key("r9")
    v = JwtVerifier(jwt_settings(srv))
    try:  # two RSA keys now: a token without kid is ambiguous
        assert await reason(v, token) == "unknown signing key"
    finally:
        await v.aclose()


@pytest.mark.parametrize("mode", ["hang", "junk", "huge", "500", "reset", "notjwks"])
async def test_jwks_server_misbehaving_is_unavailable_in_bounded_time(srv: AuthServer, mode: str) -> None:
    srv.jwks_mode = mode
    v = JwtVerifier(jwt_settings(srv, timeout_s=0.5, jwks_min_refetch_s=5))
    try:
        started = time.monotonic()
        first = await unavailable(v, srv.issue(aud=RES))
        assert "the signing keys could not be fetched" in first.message
        assert time.monotonic() - started < 3
        assert 1 <= first.retry_after_s <= 5
        started = time.monotonic()  # the next requests do not wait for the server again
        for _ in range(5):
            await unavailable(v, srv.issue(aud=RES))
        assert time.monotonic() - started < 0.5
    finally:
        await v.aclose()


async def test_a_key_server_that_is_down_is_unavailable_then_recovers() -> None:
    with AuthServer() as down:
        v = JwtVerifier(jwt_settings(down, timeout_s=0.5, jwks_min_refetch_s=0))
        try:
            token = down.issue(aud=RES)
            down.down()  # connection refused
            assert "HTTP failure" in (await unavailable(v, token)).message
            down.up()
            assert (await v.check(token)).subject == "alice"
        finally:
            await v.aclose()


async def test_concurrent_requests_share_one_hanging_fetch(srv: AuthServer) -> None:
    srv.jwks_mode = "hang"
    before = srv.jwks_fetches
    v = JwtVerifier(jwt_settings(srv, timeout_s=0.5))
    retries: list[int] = []

    async def one() -> None:
        retries.append((await unavailable(v, srv.issue(aud=RES))).retry_after_s)

    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(one)
    finally:
        await v.aclose()
    assert len(retries) == 10 and all(1 <= r <= 10 for r in retries)
    assert srv.jwks_fetches - before == 1


async def test_keys_in_force_survive_a_failing_refresh(srv: AuthServer) -> None:
    v = JwtVerifier(jwt_settings(srv, jwks_ttl_s=0, jwks_min_refetch_s=0, jwt_cache_s=0, timeout_s=0.5))
    try:
        assert (await v.check(srv.issue(aud=RES))).subject == "alice"
        srv.jwks_mode = "junk"
        assert (await v.check(srv.issue(aud=RES))).subject == "alice"
        srv.jwks_mode = "empty"  # a good answer with no keys replaces them
        assert await reason(v, srv.issue(aud=RES)) == "unknown signing key"
    finally:
        await v.aclose()


@pytest.mark.parametrize("mode", ["hang", "500", "junk", "down"])
async def test_cached_keys_keep_working_during_an_outage(mode: str) -> None:
    """Keys fetched before decide while the key set cannot be fetched; a kid they do not know is
    "cannot decide" (503), not "bad" (401), until the key set answers again."""
    with AuthServer() as a:
        v = JwtVerifier(jwt_settings(a, timeout_s=0.5, jwks_min_refetch_s=0.3, jwt_cache_s=0))
        try:
            assert (await v.check(a.issue(aud=RES))).subject == "alice"
            a.add_key("r2")  # rotated in at the server, not yet seen by the gateway
            if mode == "down":
                a.down()
            else:
                a.jwks_mode = mode
            await anyio.sleep(0.35)
            for _ in range(3):
                assert (await v.check(a.issue(aud=RES, kid="e1"))).subject == "alice"  # known kid
                await unavailable(v, a.issue(aud=RES, kid="r2"))  # unknown kid, keys unreachable
                await anyio.sleep(0.35)
            if mode == "down":
                a.up()
            a.jwks_mode = "ok"
            await anyio.sleep(0.35)
            assert (await v.check(a.issue(aud=RES, kid="r2"))).subject == "alice"
            await anyio.sleep(0.35)
            a.keys["x9"] = a.keys["r1"]  # never published: proven unknown now that keys answer
            assert await reason(v, a.issue(aud=RES, kid="x9")) == "unknown signing key"
        finally:
            await v.aclose()


async def test_stale_keys_stop_after_their_grace(srv: AuthServer) -> None:
    quick = {"jwks_min_refetch_s": 0, "jwt_cache_s": 0, "timeout_s": 0.5}
    v = JwtVerifier(jwt_settings(srv, jwks_ttl_s=0.2, jwks_stale_s=0.5, **quick))
    try:
        assert (await v.check(srv.issue(aud=RES))).subject == "alice"
        srv.jwks_mode = "500"
        await anyio.sleep(0.3)  # past the ttl, within the grace: still in force
        assert (await v.check(srv.issue(aud=RES))).subject == "alice"
        await anyio.sleep(0.6)  # past the grace: cannot decide
        await unavailable(v, srv.issue(aud=RES))
        srv.jwks_mode = "ok"
        assert (await v.check(srv.issue(aud=RES))).subject == "alice"
    finally:
        await v.aclose()


async def test_cancelled_verification_leaves_the_cache_usable(srv: AuthServer) -> None:
    srv.jwks_mode = "hang"
    v = JwtVerifier(jwt_settings(srv, timeout_s=5, jwks_min_refetch_s=0))
    try:
        with anyio.move_on_after(0.3) as scope:
            await v.check(srv.issue(aud=RES))
        assert scope.cancelled_caught
        srv.jwks_mode = "ok"
        with anyio.fail_after(5):
            assert (await v.check(srv.issue(aud=RES))).subject == "alice"
    finally:
        await v.aclose()


async def test_verified_jwts_are_remembered_briefly(srv: AuthServer) -> None:
    quick = {"jwks_ttl_s": 0, "jwks_min_refetch_s": 0}
    remembering = JwtVerifier(jwt_settings(srv, **quick))
    strict = JwtVerifier(jwt_settings(srv, jwt_cache_s=0, **quick))
    try:
        token = srv.issue(aud=RES)
        for v in (remembering, strict):
            assert (await v.check(token)).token == token
        srv.jwks_mode = "empty"  # the key is withdrawn
        assert (await remembering.check(token)).subject == "alice"  # within jwt_cache_s
        assert await reason(strict, token) == "unknown signing key"
        assert await reason(remembering, srv.issue(aud=RES)) == "unknown signing key"
    finally:
        await remembering.aclose()
        await strict.aclose()
    srv.jwks_mode = "ok"
    v = JwtVerifier(jwt_settings(srv, leeway_s=1))
    try:  # never past the token's exp (+ leeway)
        short = srv.issue(aud=RES, lifetime=1.5)
        assert (await v.check(short)).subject == "alice"
        await anyio.sleep(2.7)
        assert await reason(v, short) == "token expired"
    finally:
        await v.aclose()


def test_settings_are_checked(srv: AuthServer) -> None:
    bad: list[dict[str, Any]] = [
        {"resource": RES, "issuer": srv.issuer},  # no way to verify
        {"resource": RES, "jwks_url": f"{srv.url}/jwks"},  # no issuer
        {"resource": RES, "issuer": "x", "jwks_url": "http://auth.example.com/jwks"},  # plain http
        {"resource": RES, "issuer": "x", "jwks_url": "https://u:p@auth.example.com/jwks"},
        {"resource": "ftp://x/mcp", "issuer": "x", "jwks_url": "https://a/jwks"},
        {"resource": RES, "issuer": "x", "introspection_url": "https://a/i", "client_id": "c"},
        {"resource": RES, "issuer": "x", "jwks_url": "https://a/jwks", "timeout_s": 0},
    ]
    for kw in bad:
        with pytest.raises(ConfigError) as info:
            OAuthSettings(**kw)
        assert info.value.code == "ERR_GATEWAY_CONFIG"
    ok = OAuthSettings(resource=RES, issuer="https://a", jwks_url="https://a/jwks", client_secret="s3cr3t-x")
    assert "s3cr3t" not in repr(ok)
    assert OAuthSettings(resource=RES, issuer="x", jwks_url="http://[::1]:9/jwks").jwks_url


# -- introspection ----------------------------------------------------------------------------


async def test_introspection_active_and_cached(srv: AuthServer) -> None:
    v = IntrospectionVerifier(intro_settings(srv))
    exp = int(time.time()) + 300
    token = srv.opaque(sub="bob", aud=RES, scope="mcp", exp=exp, iss=srv.issuer, client_id="cli")
    try:
        before = srv.introspections
        for _ in range(3):
            got = await v.check(token)
            assert (got.subject, got.client_id, got.scopes, got.expires_at) == ("bob", "cli", ["mcp"], exp)
            assert got.token == token
        assert srv.introspections == before + 1
        inactive = "opaque-never-issued"
        for _ in range(3):
            assert await reason(v, inactive) == "token inactive"
        assert srv.introspections == before + 2  # the refusal is cached too
    finally:
        await v.aclose()


async def test_introspection_answers_are_checked(srv: AuthServer) -> None:
    v = IntrospectionVerifier(intro_settings(srv))
    now = int(time.time())
    cases = {
        srv.opaque(sub="a", aud="http://other/mcp", exp=now + 60): "token not issued for this resource",
        srv.opaque(sub="a", exp=now + 60): "token not issued for this resource",
        srv.opaque(sub="a", aud=[RES], exp=now - 120): "token expired",
        srv.opaque(sub="a", aud=RES, nbf=now + 600): "token not yet valid",
        srv.opaque(sub="a", aud=RES, iss="http://evil"): "token issuer not accepted",
    }
    junk = [  # active, but not a well-formed answer: the server's fault, not the token's
        srv.opaque(sub=["a"], aud=RES),
        srv.opaque(sub="a", aud=RES, exp="soon"),
        srv.opaque(sub="a", aud=RES, iat=True),
        srv.opaque(sub="a", aud=RES, iss=7),
    ]
    try:
        for token, why in cases.items():
            assert await reason(v, token) == why
        for token in junk:
            assert "malformed introspection answer" in (await unavailable(v, token)).message
        assert (await v.check(srv.opaque(sub="a", aud=[RES, "x"]))).subject == "a"
    finally:
        await v.aclose()


@pytest.mark.parametrize("mode", ["hang", "junk", "huge", "500", "reset", "inactive"])
async def test_introspection_server_misbehaving(srv: AuthServer, mode: str) -> None:
    srv.introspect_mode = mode
    v = IntrospectionVerifier(intro_settings(srv, timeout_s=0.5))
    token = srv.opaque(sub="a", aud=RES)
    try:
        started = time.monotonic()
        if mode == "inactive":
            assert await reason(v, token) == "token inactive"
        else:
            assert "could not be introspected" in (await unavailable(v, token)).message
        assert time.monotonic() - started < 3
        if mode != "inactive":  # a failed exchange is not cached: once the server is well, it works
            srv.introspect_mode = "ok"
            assert (await v.check(token)).subject == "a"
    finally:
        await v.aclose()


async def test_introspection_server_down_then_up() -> None:
    with AuthServer() as a:
        v = IntrospectionVerifier(intro_settings(a, timeout_s=0.5))
        token = a.opaque(sub="a", aud=RES)
        try:
            a.down()
            await unavailable(v, token)
            a.up()
            assert (await v.check(token)).subject == "a"
        finally:
            await v.aclose()


async def test_a_flood_waits_at_most_the_timeout_for_a_hanging_introspection(srv: AuthServer) -> None:
    """More requests than may be in flight at once: the ones waiting for a turn give up at the
    same deadline (waiting included), not after the ones before them."""
    srv.introspect_mode = "hang"
    v = IntrospectionVerifier(intro_settings(srv, timeout_s=0.6))
    took: list[float] = []

    async def one(i: int) -> None:
        started = time.monotonic()
        await unavailable(v, srv.opaque(sub=f"u{i}", aud=RES))
        took.append(time.monotonic() - started)

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(80):
                    tg.start_soon(one, i)
    finally:
        await v.aclose()
    assert len(took) == 80 and max(took) < 2.5, max(took)


async def test_introspection_with_wrong_credentials(srv: AuthServer) -> None:
    v = IntrospectionVerifier(intro_settings(srv, client_secret="not-the-secret"))
    try:  # the gateway's own credentials are refused: nothing is known about the token
        assert "HTTP 401" in (await unavailable(v, srv.opaque(sub="a", aud=RES))).message
    finally:
        await v.aclose()


async def test_introspection_client_secret_post(srv: AuthServer) -> None:
    srv.introspection_auth = {"client_secret_post"}
    basic = IntrospectionVerifier(intro_settings(srv))
    post = IntrospectionVerifier(intro_settings(srv, client_auth="client_secret_post"))
    token = srv.opaque(sub="pat", aud=RES)
    try:
        await unavailable(basic, token)  # this server takes no HTTP Basic
        srv.introspection_forms.clear()
        assert (await post.check(token)).subject == "pat"
        form = srv.introspection_forms[-1]
        assert form == {
            "token": token,
            "token_type_hint": "access_token",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        }
        srv.introspection_auth = {"client_secret_basic"}
        other = srv.opaque(sub="pat", aud=RES)
        await unavailable(post, other)  # and this one takes only HTTP Basic
    finally:
        srv.introspection_auth = {"client_secret_basic"}
        await basic.aclose()
        await post.aclose()
    with pytest.raises(ConfigError):
        intro_settings(srv, client_auth="private_key_jwt")


async def test_a_bloated_introspection_answer_is_not_cached(srv: AuthServer) -> None:
    """Every cached answer keeps its claims: an answer over 32 KiB is junk (cannot decide), so the
    cache holds at most cache_size x 32 KiB whatever the server sends."""
    from toolbridge.gateway._oauth import MAX_INTROSPECTION_BYTES

    v = IntrospectionVerifier(intro_settings(srv))
    fat = srv.opaque(sub="a", aud=RES, padding="p" * MAX_INTROSPECTION_BYTES)
    fine = srv.opaque(sub="a", aud=RES, padding="p" * (MAX_INTROSPECTION_BYTES - 200))
    try:
        assert "too big" in (await unavailable(v, fat)).message
        assert len(v._cache) == 0
        assert (await v.check(fine)).subject == "a"
    finally:
        await v.aclose()


async def test_introspection_cache_is_bounded(srv: AuthServer) -> None:
    v = IntrospectionVerifier(intro_settings(srv, cache_size=4))
    tokens = [srv.opaque(sub=f"u{i}", aud=RES) for i in range(10)]
    try:
        for token in tokens:
            await v.check(token)
        assert len(v._cache) == 4
        assert all(token not in key for key in v._cache.digests() for token in tokens)  # hashed only
    finally:
        await v.aclose()


async def test_both_ways_jwts_by_keys_others_by_introspection(srv: AuthServer) -> None:
    v = OAuthVerifier(intro_settings(srv, jwks_url=f"{srv.url}/jwks"))
    try:
        before = srv.introspections
        assert (await v.check(srv.issue(aud=RES, sub="jay"))).subject == "jay"
        assert srv.introspections == before
        assert (await v.check(srv.opaque(sub="oscar", aud=RES))).subject == "oscar"
        assert srv.introspections == before + 1
    finally:
        await v.aclose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=300),
        st.tuples(st.dictionaries(st.text(max_size=5), st.text(max_size=5)), st.binary(max_size=40)).map(
            lambda t: handmade({"alg": "RS256", "kid": "r1", **t[0]}, {"x": 1}, lambda _m: t[1])
        ),
    )
)
def test_any_text_is_refused_with_a_reason(srv: AuthServer, token: str) -> None:
    async def check() -> None:
        v = OAuthVerifier(jwt_settings(srv))
        try:
            with anyio.fail_after(10), pytest.raises(TokenRejected):
                await v.check(token)
        finally:
            await v.aclose()

    anyio.run(check)
