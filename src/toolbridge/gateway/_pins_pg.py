"""Pin approvals in PostgreSQL, shared by every replica of a gateway.

When a gateway's runtime journals into PostgreSQL and the gateway pins its upstreams (`lock:`),
the pins in force live in the same database, so every replica serves the same tools without
each trusting its own lock file:

- Table `toolbridge_gateway_pins` holds, per gateway name and server name, the pinned hash of each
  tool; `toolbridge_gateway_pin_servers` the server's instructions hash, the pins of its prompts,
  resources and templates (`side`, JSON; added to an older table on first use), a version that
  grows with every change, who wrote it (`host:pid`) and when.
- A replica that starts adopts what the database holds for a server, unless its own lock file is
  newer than that (written after the last approval): then the file is the newer approval and is
  stored. Nothing stored and no lock file: every tool of the server is withheld.
- A lock file renewed under a running replica (`toolbridge lock --out FILE MANIFEST`) is an
  approval: the replica stores it, and every replica adopts it at its next check (the gateway's
  watcher asks for the versions once a second: one small query).
- Approvals are monotonic: each row carries when its pins were approved (`approved_at`, the lock
  file's `approvedAt`, or its modification time for a lock written before); a save older than
  what is stored changes nothing (`save` answers None). An old lock file copied into a replica's
  folder is refused; `toolbridge lock --rollback OLD` re-approves an older lock on purpose.

Every wait is bounded: a connection within `timeout_s` (the pool's), every statement within the
server's `statement_timeout`, each operation as a whole within twice `timeout_s`. The tables are
created on first use (under a transaction-scoped advisory lock, so replicas starting together
do not race).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import anyio

from .._pgpool import PoolUnavailable, autocommit_pool, create_schema
from ..errors import ConfigError, bounded
from ..pinning import SIDE_KINDS, ServerLock

__all__ = ["PgPinStore", "StoredPins"]

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS toolbridge_gateway_pin_servers (
        gateway TEXT NOT NULL,
        server TEXT NOT NULL,
        instructions TEXT,
        version BIGINT NOT NULL,
        written_by TEXT NOT NULL,
        written_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (gateway, server))""",
    """CREATE TABLE IF NOT EXISTS toolbridge_gateway_pins (
        gateway TEXT NOT NULL,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (gateway, server, tool))""",
    # The pins of prompts, resources and templates ({"prompts": {name: hash}, ...}, JSON; NULL:
    # stored before they were pinned, so none recorded).
    "ALTER TABLE toolbridge_gateway_pin_servers ADD COLUMN IF NOT EXISTS side TEXT",
    # When the pins were approved (the lock's `approvedAt`); NULL: stored before, `written_at` stands in.
    "ALTER TABLE toolbridge_gateway_pin_servers ADD COLUMN IF NOT EXISTS approved_at DOUBLE PRECISION",
]
_LOCK_KEY = 0x70696E73  # the advisory lock that serialises creating the tables


def _side_json(lock: ServerLock) -> str:
    return json.dumps({kind: lock.side(kind) for kind in SIDE_KINDS}, sort_keys=True)


def _side_of(text: Any) -> dict[str, dict[str, str]]:
    """The side pins stored as JSON (none for NULL or anything that is not the expected shape)."""
    try:
        data = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        data = {}
    out: dict[str, dict[str, str]] = {}
    for kind in SIDE_KINDS:
        pins = data.get(kind) if isinstance(data, dict) else None
        out[kind] = (
            {str(k): v for k, v in pins.items() if isinstance(v, str)} if isinstance(pins, dict) else {}
        )
    return out


@dataclass(frozen=True)
class StoredPins:
    """A server's pins as stored: the lock, its version, and when (epoch seconds) it was written."""

    lock: ServerLock
    version: int
    written_at: float
    approved_at: float = 0.0
    """When these pins were approved (`written_at` for pins stored before approvals were dated)."""


class PgPinStore:
    """The pins of one gateway's servers in PostgreSQL (see the module docstring).

    Args:
        url: the PostgreSQL URL (the runtime journal's).
        gateway: the gateway's name (replicas of one manifest share it).
        timeout_s: how long a connection may take; statements get `statement_timeout_ms`.
    """

    def __init__(
        self, url: str, gateway: str, *, timeout_s: float = 10.0, statement_timeout_ms: int = 5000
    ) -> None:
        self.gateway = gateway
        self.timeout_s = timeout_s
        self.who = f"{socket.gethostname()[:100]}:{os.getpid()}"
        self._pool = autocommit_pool(
            url, max_size=2, timeout_s=timeout_s, statement_timeout_ms=statement_timeout_ms
        )

    def close(self) -> None:
        self._pool.close()

    async def _run(self, work: Any) -> Any:
        """Run `work(conn)` on a pooled connection, bounded; database failures are `ConfigError`."""
        import psycopg

        try:
            with anyio.fail_after(2 * self.timeout_s):
                async with self._pool.connection() as conn:
                    return await work(conn)
        except TimeoutError:
            raise ConfigError(f"pin store: no answer within {2 * self.timeout_s:g} s") from None
        except PoolUnavailable as exc:
            raise ConfigError(f"pin store: {exc}") from None
        except psycopg.Error as exc:
            raise ConfigError(f"pin store: {bounded(type(exc).__name__ + ': ' + str(exc), 300)}") from None

    async def setup(self) -> None:
        """Create the tables if they are missing.

        Raises:
            ConfigError: (`ERR_CONFIG`) the database cannot be reached or refuses.
        """

        async def work(conn: Any) -> None:
            await create_schema(conn, _LOCK_KEY, _SCHEMA)

        await self._run(work)

    async def load(self, server: str) -> StoredPins | None:
        """What is stored for `server` (None: nothing yet)."""

        async def work(conn: Any) -> StoredPins | None:
            cur = await conn.execute(
                "SELECT instructions, version, written_at, side, COALESCE(approved_at, written_at) "
                "FROM toolbridge_gateway_pin_servers "
                "WHERE gateway = %s AND server = %s",
                (self.gateway, server),
            )
            head = await cur.fetchone()
            if head is None:
                return None
            cur = await conn.execute(
                "SELECT tool, digest FROM toolbridge_gateway_pins WHERE gateway = %s AND server = %s",
                (self.gateway, server),
            )
            tools = {str(tool): str(digest) for tool, digest in await cur.fetchall()}
            side = _side_of(head[3])
            lock = ServerLock(tools=tools, instructions=head[0], **side)
            return StoredPins(lock, int(head[1]), float(head[2]), float(head[4]))

        result: StoredPins | None = await self._run(work)
        return result

    async def save(self, server: str, lock: ServerLock, approved_at: float | None = None) -> int | None:
        """Store `lock` as `server`'s pins, approved at `approved_at` (default: now), unless what
        is stored was approved later (monotonic: then nothing changes and the answer is None);
        returns the new version."""
        now = time.time()
        approved = now if approved_at is None else approved_at

        async def work(conn: Any) -> int | None:
            async with conn.transaction():
                cur = await conn.execute(
                    "INSERT INTO toolbridge_gateway_pin_servers AS s "
                    "(gateway, server, instructions, version, written_by, written_at, side, approved_at) "
                    "VALUES (%s, %s, %s, 1, %s, %s, %s, %s) ON CONFLICT (gateway, server) DO UPDATE SET "
                    "instructions = EXCLUDED.instructions, version = s.version + 1, "
                    "written_by = EXCLUDED.written_by, written_at = EXCLUDED.written_at, "
                    "side = EXCLUDED.side, approved_at = EXCLUDED.approved_at "
                    "WHERE COALESCE(s.approved_at, s.written_at) <= EXCLUDED.approved_at RETURNING version",
                    (self.gateway, server, lock.instructions, self.who, now, _side_json(lock), approved),
                )
                row = await cur.fetchone()
                if row is None:  # an approval newer than this one is in force
                    return None
                await conn.execute(
                    "DELETE FROM toolbridge_gateway_pins WHERE gateway = %s AND server = %s",
                    (self.gateway, server),
                )
                if lock.tools:
                    async with conn.cursor() as c:
                        await c.executemany(
                            "INSERT INTO toolbridge_gateway_pins (gateway, server, tool, digest) "
                            "VALUES (%s, %s, %s, %s)",
                            [(self.gateway, server, tool, digest) for tool, digest in lock.tools.items()],
                        )
                return int(row[0])

        version: int | None = await self._run(work)
        return version

    async def versions(self) -> dict[str, int]:
        """The stored version of every server of this gateway."""

        async def work(conn: Any) -> dict[str, int]:
            cur = await conn.execute(
                "SELECT server, version FROM toolbridge_gateway_pin_servers WHERE gateway = %s",
                (self.gateway,),
            )
            return {str(server): int(version) for server, version in await cur.fetchall()}

        result: dict[str, int] = await self._run(work)
        return result
