"""DPoP state shared by a gateway's replicas in PostgreSQL: the proofs' `jti`s and the nonce key.

Alone, each gateway process remembers the `jti`s of the proofs it accepted and signs its nonces
with a key of its own (`_dpop_proof`). Behind a load balancer, N replicas (`--stateless`) would
then each accept a proof once, so a proof captured in flight could be replayed to every other
replica within its window, and a client would be asked for a new nonce whenever it lands on
another replica. When the gateway's runtime journals into PostgreSQL and the gateway is an OAuth
resource server, its replicas share both in that database instead:

- table `toolbridge_dpop_proofs` holds, per gateway name, each accepted proof's `jti` until the
  end of its window; a proof is accepted by the one replica whose insert wins (a single
  `INSERT ... ON CONFLICT` per request with a DPoP-bound token: no read-then-write race), and every
  replica refuses it after that. Expired rows are deleted by whichever replica writes, at most once
  every `SWEEP_EVERY` accepted proofs of that replica.
- table `toolbridge_dpop_keys` holds one random 32-byte nonce key per gateway name, made by the
  first replica that starts (the others read it), so a nonce of one replica is good at all.

A database that does not answer within `timeout_s` makes the request 503 (`AuthUnavailable`,
`Retry-After`), never an accepted proof that could not be checked. The tables are created on first
use (under a transaction-scoped advisory lock, so replicas starting together do not race).
"""

from __future__ import annotations

import secrets
from typing import Any

import anyio

from .._pgpool import PoolUnavailable, autocommit_pool, create_schema
from ..errors import ConfigError, bounded
from ._oauth import AuthUnavailable

__all__ = ["SWEEP_EVERY", "SharedDpopState", "open_shared_dpop"]

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS toolbridge_dpop_proofs (
        gateway TEXT NOT NULL,
        jti TEXT NOT NULL,
        until DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (gateway, jti))""",
    "CREATE INDEX IF NOT EXISTS toolbridge_dpop_proofs_until ON toolbridge_dpop_proofs (until)",
    """CREATE TABLE IF NOT EXISTS toolbridge_dpop_keys (
        gateway TEXT PRIMARY KEY,
        nonce_key BYTEA NOT NULL)""",
]
_LOCK_KEY = 0x64706F70  # "dpop": the advisory lock that serialises creating the tables

SWEEP_EVERY = 256
"""A replica deletes expired `jti`s after this many proofs it accepted."""

_FIRST_USE = (
    "INSERT INTO toolbridge_dpop_proofs AS p (gateway, jti, until) VALUES (%s, %s, %s) "
    "ON CONFLICT (gateway, jti) DO UPDATE SET until = EXCLUDED.until WHERE p.until <= %s RETURNING 1"
)


class SharedDpopState:
    """One gateway's DPoP replay window and nonce key in PostgreSQL (see the module docstring).

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
        self.nonce_key = b""
        """The shared nonce key (read by `setup`)."""
        self._accepted = 0
        self._pool = autocommit_pool(
            url, max_size=4, timeout_s=timeout_s, statement_timeout_ms=statement_timeout_ms
        )

    def close(self) -> None:
        self._pool.close()

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
                    "INSERT INTO toolbridge_dpop_keys (gateway, nonce_key) VALUES (%s, %s) "
                    "ON CONFLICT (gateway) DO NOTHING",
                    (self.gateway, secrets.token_bytes(32)),
                )
                cur = await conn.execute(
                    "SELECT nonce_key FROM toolbridge_dpop_keys WHERE gateway = %s", (self.gateway,)
                )
                row = await cur.fetchone()
            return bytes(row[0])

        try:
            with anyio.fail_after(2 * self.timeout_s):
                async with self._pool.connection() as conn:
                    self.nonce_key = await work(conn)
        except TimeoutError:
            raise ConfigError(f"shared DPoP state: no answer within {2 * self.timeout_s:g} s") from None
        except PoolUnavailable as exc:
            raise ConfigError(f"shared DPoP state: {exc}") from None
        except psycopg.Error as exc:
            raise ConfigError(
                f"shared DPoP state: {bounded(type(exc).__name__ + ': ' + str(exc), 300)}"
            ) from None

    async def first_use(self, jti: str, until: float, now: float) -> bool:
        """Record `jti` until `until` for every replica; False if one recorded it already and it
        has not expired.

        Raises:
            AuthUnavailable: the database did not answer in time or failed (the request gets 503).
        """
        import psycopg

        self._accepted += 1
        sweep = self._accepted % SWEEP_EVERY == 0
        try:
            with anyio.fail_after(self.timeout_s):
                async with self._pool.connection() as conn:
                    cur = await conn.execute(_FIRST_USE, (self.gateway, jti, until, now))
                    first = await cur.fetchone() is not None
                    if sweep:
                        await conn.execute(
                            "DELETE FROM toolbridge_dpop_proofs WHERE gateway = %s AND until <= %s",
                            (self.gateway, now),
                        )
        except TimeoutError:
            raise AuthUnavailable(
                f"the shared DPoP replay window did not answer within {self.timeout_s:g} s"
            ) from None
        except PoolUnavailable as exc:
            raise AuthUnavailable(f"the shared DPoP replay window: {exc}") from None
        except psycopg.Error as exc:
            raise AuthUnavailable(f"the shared DPoP replay window failed: {type(exc).__name__}") from None
        return first


async def open_shared_dpop(journal_location: str | None, gateway: str) -> SharedDpopState | None:
    """The shared DPoP state when the journal is in PostgreSQL (tables made, key read), else None.

    Raises:
        ConfigError: the database cannot be reached or refuses.
    """
    from ..runtime import is_postgres_url

    if journal_location is None or not is_postgres_url(journal_location):
        return None
    state = SharedDpopState(journal_location, gateway)
    try:
        await state.setup()
    except BaseException:
        state.close()
        raise
    return state
