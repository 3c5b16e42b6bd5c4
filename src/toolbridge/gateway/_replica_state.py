"""State a gateway's replicas share in PostgreSQL: single-use marks and one key.

Alone, a gateway process remembers what may be used only once (the `jti` of each DPoP proof it
accepted, the nonce of each 2026-07-28 input round it resumed) and signs what it hands out (DPoP
nonces, sealed round states) with keys of its own (`_dpop_proof`, `_rounds`). Behind a load
balancer, N replicas (`--stateless`) would then each accept a proof or a round once, so what was
captured in flight could be replayed to every other replica within its window, and a client would
be asked again whenever its retry lands on another replica. When the gateway's runtime journals
into PostgreSQL its replicas share both in that database instead:

- table `toolbridge_gateway_once` holds, per gateway name and kind (`dpop`, `round`), each used
  token until the end of its window; a token is accepted by the one replica whose insert wins (a
  single `INSERT ... ON CONFLICT` per use: no read-then-write race), and every replica refuses it
  after that. Expired rows are deleted by whichever replica writes, at most once every
  `SWEEP_EVERY` accepted uses of that replica.
- table `toolbridge_gateway_keys` holds one random 32-byte secret per gateway name, made by the
  first replica that starts (the others read it). Each use has its own key derived from it
  (`key_for`: HMAC-SHA256 of the secret over the purpose), so a DPoP nonce and a round state are
  never signed with the same key, and what one replica signs every replica can check.

A database that does not answer within `timeout_s` refuses the use (`SharedStateUnavailable`: the
HTTP request gets 503, a round -32603), never accepts what could not be checked. The tables are
created on first use (under a transaction-scoped advisory lock, so replicas starting together do
not race).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import anyio

from .._pgpool import PoolUnavailable, autocommit_pool, create_schema
from ..errors import ConfigError, bounded
from ._oauth import AuthUnavailable

__all__ = ["SWEEP_EVERY", "ReplicaState", "SharedStateUnavailable", "open_replica_state"]

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS toolbridge_gateway_once (
        gateway TEXT NOT NULL,
        kind TEXT NOT NULL,
        token TEXT NOT NULL,
        until DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (gateway, kind, token))""",
    "CREATE INDEX IF NOT EXISTS toolbridge_gateway_once_until ON toolbridge_gateway_once (until)",
    """CREATE TABLE IF NOT EXISTS toolbridge_gateway_keys (
        gateway TEXT PRIMARY KEY,
        secret BYTEA NOT NULL)""",
]
_LOCK_KEY = 0x72706C73  # "rpls": the advisory lock that serialises creating the tables

SWEEP_EVERY = 256
"""A replica deletes expired tokens after this many uses it accepted."""

_FIRST_USE = (
    "INSERT INTO toolbridge_gateway_once AS o (gateway, kind, token, until) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (gateway, kind, token) DO UPDATE SET until = EXCLUDED.until WHERE o.until <= %s RETURNING 1"
)


class SharedStateUnavailable(AuthUnavailable):
    """The replicas' shared state did not answer in time or failed: the use is refused."""


class ReplicaState:
    """One gateway's single-use marks and key in PostgreSQL (see the module docstring).

    Args:
        url: the PostgreSQL URL (the runtime journal's).
        gateway: the gateway's name (replicas of one manifest share it).
        timeout_s: how long a connection may take, and each check as a whole.
    """

    def __init__(
        self, url: str, gateway: str, *, timeout_s: float = 5.0, statement_timeout_ms: int = 3000
    ) -> None:
        self.gateway = gateway
        self.timeout_s = timeout_s
        self._secret = b""  # read (or made) by `setup`
        self._accepted = 0
        self._pool = autocommit_pool(
            url, max_size=4, timeout_s=timeout_s, statement_timeout_ms=statement_timeout_ms
        )

    def close(self) -> None:
        self._pool.close()

    def key_for(self, purpose: str) -> bytes:
        """The key every replica derives for `purpose` from the shared secret (after `setup`)."""
        if not self._secret:
            raise RuntimeError("ReplicaState.setup() has not run")
        return hmac.new(self._secret, purpose.encode(), hashlib.sha256).digest()

    @property
    def nonce_key(self) -> bytes:
        """The key of the gateway's DPoP nonces (`_dpop_proof.NonceIssuer`)."""
        return self.key_for("dpop nonce")

    async def first_use(self, jti: str, until: float, now: float) -> bool:
        """A DPoP proof's `jti`: `first_use_of("dpop", ...)`."""
        return await self.first_use_of("dpop", jti, until, now)

    async def setup(self) -> None:
        """Create the tables if they are missing and read (or make) the nonce key.

        Raises:
            ConfigError: (`ERR_CONFIG`) the database cannot be reached or refuses.
        """
        import psycopg

        async def work(conn: Any) -> bytes:
            await create_schema(conn, _LOCK_KEY, _SCHEMA)
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO toolbridge_gateway_keys (gateway, secret) VALUES (%s, %s) "
                    "ON CONFLICT (gateway) DO NOTHING",
                    (self.gateway, secrets.token_bytes(32)),
                )
                cur = await conn.execute(
                    "SELECT secret FROM toolbridge_gateway_keys WHERE gateway = %s", (self.gateway,)
                )
                row = await cur.fetchone()
            return bytes(row[0])

        try:
            with anyio.fail_after(2 * self.timeout_s):
                async with self._pool.connection() as conn:
                    self._secret = await work(conn)
        except (TimeoutError, PoolUnavailable, psycopg.Error) as exc:
            why = _failure(exc, 2 * self.timeout_s, detail=True)
            raise ConfigError(f"the replicas' shared state: {why}") from None

    async def first_use_of(self, kind: str, token: str, until: float, now: float) -> bool:
        """Record `token` of `kind` until `until` for every replica; False if one recorded it
        already and it has not expired.

        Raises:
            SharedStateUnavailable: the database did not answer in time or failed.
        """
        import psycopg

        self._accepted += 1
        sweep = self._accepted % SWEEP_EVERY == 0
        try:
            with anyio.fail_after(self.timeout_s):
                async with self._pool.connection() as conn:
                    cur = await conn.execute(_FIRST_USE, (self.gateway, kind, token, until, now))
                    first = await cur.fetchone() is not None
                    if sweep:
                        await conn.execute(
                            "DELETE FROM toolbridge_gateway_once WHERE gateway = %s AND until <= %s",
                            (self.gateway, now),
                        )
        except (TimeoutError, PoolUnavailable, psycopg.Error) as exc:
            why = _failure(exc, self.timeout_s, detail=False)
            raise SharedStateUnavailable(f"the replicas' shared {kind} marks: {why}") from None
        return first


def _failure(exc: BaseException, timeout_s: float, *, detail: bool) -> str:
    """What went wrong with the database, in one line (`detail`: the driver's message too, at
    start, where no client's request is being answered)."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, PoolUnavailable):
        return str(exc)
    name = type(exc).__name__
    return bounded(f"{name}: {exc}", 300) if detail else f"failed ({name})"


async def open_replica_state(journal_location: str | None, gateway: str) -> ReplicaState | None:
    """The replicas' shared state when the journal is in PostgreSQL (tables made, secret read),
    else None.

    Raises:
        ConfigError: the database cannot be reached or refuses.
    """
    from ..runtime import is_postgres_url

    if journal_location is None or not is_postgres_url(journal_location):
        return None
    state = ReplicaState(journal_location, gateway)
    try:
        await state.setup()
    except BaseException:
        state.close()
        raise
    return state
