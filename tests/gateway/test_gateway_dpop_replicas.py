"""Two gateway replicas (`--stateless`, one PostgreSQL journal) share DPoP's replay window and nonce key.

`tests/oauth/dpop_server.py` issues a DPoP-bound access token; both replicas serve the same
resource (as behind one load balancer) with `dpopNonce: true`. A nonce handed out by one replica
is good at the other, and a proof accepted by one is refused as replayed by the other: alone,
each process would accept it once (its own window) and ask for its own nonce.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from gw_helpers import free_port, upstream_manifest
from test_gateway_dpop import _bound_token
from test_gateway_oauth_gate import App, call
from test_gateway_replicas import kill_group, start_replica, wait_listening
from test_gateway_wire import INIT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oauth"))
from test_dpop_client import Start, dpop_server  # noqa: F401  (a fixture)

from toolbridge.clients import DPoPKey
from toolbridge.errors import ConfigError
from toolbridge.gateway import ClientRule, OAuthGate, OAuthSettings
from toolbridge.gateway._replica_state import ReplicaState

CLIENTS = """clients:
  - name: job
    oauth: { subject: c1 }
    permissions: { allow: [tool:up_echo, effect:read] }
"""
INITIALIZE = json.dumps(INIT)


async def test_replicas_refuse_a_proof_replayed_to_another_and_accept_each_others_nonces(
    tmp_path: Path,
    postgres_url: str,
    dpop_server: Start,  # noqa: F811
) -> None:
    base = dpop_server()
    resource = f"{base}/mcp"  # the one URL both replicas serve behind the balancer
    oauth = f"""oauth:
  resource: {resource}
  issuer: {base}
  jwksUri: {base}/jwks
  dpopNonce: true
"""
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, gateway=oauth)
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    manifest.write_text(text, encoding="utf-8")
    key = DPoPKey()
    token = await anyio.to_thread.run_sync(_bound_token, base, key)
    ports = [free_port(), free_port()]
    replicas = [start_replica(manifest, port, {"JOURNAL_URL": postgres_url}) for port in ports]
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        async with httpx2.AsyncClient(timeout=30) as http:

            async def post(port: int, proof: str) -> httpx2.Response:
                headers = {
                    "Authorization": f"DPoP {token}",
                    "DPoP": proof,
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                }
                return await http.post(f"http://127.0.0.1:{port}/mcp", content=INITIALIZE, headers=headers)

            def proof(nonce: str | None) -> str:
                return key.proof("POST", resource, access_token=token, nonce=nonce)

            first = await post(ports[0], proof(None))
            assert first.status_code == 401 and "use_dpop_nonce" in first.headers["www-authenticate"]
            nonce = first.headers["dpop-nonce"]

            # Replica 0's nonce is good at replica 1 (one key in the database).
            used = proof(nonce)
            answer = await post(ports[1], used)
            assert answer.status_code == 200, answer.text

            # The same proof again, at the other replica and at the same one: replayed.
            for port in ports:
                again = await post(port, used)
                assert again.status_code == 401, again.text
                assert 'error="invalid_dpop_proof"' in again.headers["www-authenticate"]
                assert "replayed" in again.headers["www-authenticate"]

            # A fresh proof with the same nonce passes at either.
            for port in ports:
                assert (await post(port, proof(nonce))).status_code == 200

            # Replica 1 hands out nonces replica 0 takes.
            asked = await post(ports[1], proof(None))
            assert asked.status_code == 401
            assert (await post(ports[0], proof(asked.headers["dpop-nonce"]))).status_code == 200

        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            keys = conn.execute("SELECT count(*) FROM toolbridge_gateway_keys").fetchone()
            proofs = conn.execute(
                "SELECT count(*) FROM toolbridge_gateway_once WHERE kind = 'dpop'"
            ).fetchone()
        assert keys is not None and keys[0] == 1
        assert proofs is not None and proofs[0] == 4  # the proofs accepted, once each
    finally:
        for proc in replicas:
            kill_group(proc)


async def test_one_winner_when_replicas_race_for_a_proof_and_names_do_not_mix(postgres_url: str) -> None:
    one, two = ReplicaState(postgres_url, "RaceGate"), ReplicaState(postgres_url, "RaceGate")
    other = ReplicaState(postgres_url, "OtherGate")
    try:
        for state in (one, two, other):
            await state.setup()
        assert one.nonce_key == two.nonce_key and len(one.nonce_key) == 32
        assert other.nonce_key != one.nonce_key
        now = time.time()
        wins: list[bool] = []

        async def use(state: ReplicaState) -> None:
            wins.append(await state.first_use("jti-raced", now + 300, now))

        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(use, (one, two)[i % 2])
        assert wins.count(True) == 1 and len(wins) == 16
        assert await other.first_use("jti-raced", now + 300, now)  # another gateway's window
        # Past its window a jti may be used again (a new proof cannot carry an old iat anyway).
        assert await one.first_use("jti-raced", now + 900, now + 301)
    finally:
        for state in (one, two, other):
            state.close()


async def test_a_shared_window_that_cannot_be_reached_answers_503(
    postgres_url: str,
    dpop_server: Start,  # noqa: F811
) -> None:
    base = dpop_server()
    resource = f"{base}/mcp"
    key = DPoPKey()
    token = await anyio.to_thread.run_sync(_bound_token, base, key)
    state = ReplicaState(postgres_url, "GoneGate", timeout_s=2)
    await state.setup()
    app = App()
    settings = OAuthSettings(resource=resource, issuer=base, jwks_url=f"{base}/jwks", jwt_cache_s=0)
    gate = OAuthGate(app, settings, [ClientRule("job", subject="c1")], dpop_state=state)
    try:

        def auth() -> list[tuple[bytes, bytes]]:
            proof = key.proof("POST", resource, access_token=token)
            return [(b"authorization", f"DPoP {token}".encode()), (b"dpop", proof.encode())]

        assert (await call(gate, auth()))[0] == 200
        state.close()  # the database is gone for this replica
        status, headers = await call(gate, auth())
        assert status == 503 and headers["retry-after"]
        assert app.seen == ["job"]
    finally:
        await gate.verifier.aclose()
    with pytest.raises(ConfigError, match="the replicas' shared state"):
        await ReplicaState("postgresql://nobody@127.0.0.1:1/none", "G", timeout_s=1).setup()
