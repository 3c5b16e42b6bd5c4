"""Cumulative quotas per identity: calls and cost over a period, held in the shared journal.

A runtime's `limits` bound **one run** (for the gateway, one forwarded call). A `Quota` bounds
what one principal (a gateway client's identity) does **in total** over a period: at most
`max_calls` calls and `max_cost_micros` of spend per `period` (`hour`, `day`, `month`, fixed
windows in UTC, or `total`: never reset). The counters live in the journal's `quotas` table
(`toolbridge_quotas` in PostgreSQL), one row per (principal, window), so every process writing
the same journal (N `gateway --stateless` replicas on one PostgreSQL) enforces one cap.

**Atomic.** Admitting a call is one statement: an `INSERT ... ON CONFLICT DO UPDATE ... WHERE
calls + 1 <= max_calls AND spent + reserved + ceiling <= max_cost RETURNING`: it counts the call
and reserves its most possible cost (its binding's `costMicros`) only when both still fit, so two
replicas can never both take the last call. After the call the reservation is settled in one
statement: the actual cost charged, the rest released; a call refused before anything was sent
(outcome `blocked`) gives its call back.

**When a process dies** between the two statements, its reservation stays charged until the
window ends (a cap is never exceeded by a crash; it may be reached early by one).

Backends implement `reserve_quota` / `settle_quota` / `quota_usage` (and the awaited
`areserve_quota` / `asettle_quota`): SQL ones with `QuotaStatements`, the memory journal with
`MemoryQuotas` (one process only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio

from ..errors import ConfigError, PolicyError
from ..tools import ToolResult
from ._host import RuntimeHost
from ._journal import JournalBackend, QuotaUsage
from ._outcomes import RuntimeResult
from ._sql_dialect import Dialect

if TYPE_CHECKING:
    from ..catalog import ToolCatalog

__all__ = ["PERIODS", "MemoryQuotas", "Quota", "QuotaStatements", "QuotaUsage", "period_key"]

log = logging.getLogger("toolbridge.runtime")

Period = Literal["hour", "day", "month", "total"]
PERIODS: tuple[str, ...] = ("hour", "day", "month", "total")
UNLIMITED = 2**62
"""What an unset maximum is compared with (no counter reaches it)."""


class QuotaSession(Protocol):
    """What `Quota.call` uses of a session (a `GovernedSession`): its runtime's journal, its
    principal and tools, its calls and its outcome."""

    @property
    def rt(self) -> RuntimeHost: ...

    @property
    def principal(self) -> str | None: ...

    @property
    def catalog(self) -> ToolCatalog: ...

    def result(self) -> RuntimeResult: ...

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        context: object = None,
    ) -> ToolResult: ...

    async def refuse(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        code: str = "PERMISSION_DENIED",
        detail: str | None = None,
        *,
        call_id: str | None = None,
    ) -> PolicyError: ...


QUOTAS_TABLE = """
CREATE TABLE IF NOT EXISTS {quotas} (
    principal TEXT NOT NULL,
    period_key TEXT NOT NULL,
    calls {BIGINT} NOT NULL DEFAULT 0,
    spent_micros {BIGINT} NOT NULL DEFAULT 0,
    reserved_micros {BIGINT} NOT NULL DEFAULT 0,
    updated_at {REAL} NOT NULL,
    PRIMARY KEY (principal, period_key)
);
"""
"""One row per principal and window: calls counted, cost spent and reserved."""


def period_key(period: str, now: float | None = None) -> str:
    """The window `now` (epoch seconds) falls in: `2026-12-02T03`, `2026-12-02`, `2026-12` or `total`."""
    if period == "total":
        return "total"
    t = time.gmtime(time.time() if now is None else now)
    if period == "hour":
        return time.strftime("%Y-%m-%dT%H", t)
    if period == "day":
        return time.strftime("%Y-%m-%d", t)
    if period == "month":
        return time.strftime("%Y-%m", t)
    raise ConfigError(f"quota period must be one of {', '.join(PERIODS)}, got {period!r}")


@dataclass(frozen=True)
class QuotaStatements:
    """The quota statements in one dialect (parameters in the order of each method's docs)."""

    reserve: str
    """(principal, key, ceiling, now, max_calls, max_micros) -> a row when admitted."""
    settle: str
    """(reserved, reserved, actual, calls_back, now, principal, key)."""
    usage: str
    """(principal, key) -> (calls, spent, reserved)."""

    @classmethod
    def of(cls, d: Dialect) -> QuotaStatements:
        return cls(
            reserve=d.sql(
                "INSERT INTO {quotas} (principal, period_key, calls, spent_micros, reserved_micros, "
                "updated_at) VALUES (?, ?, 1, 0, ?, ?) ON CONFLICT (principal, period_key) DO UPDATE "
                "SET calls = {quotas}.calls + 1, "
                "reserved_micros = {quotas}.reserved_micros + excluded.reserved_micros, "
                "updated_at = excluded.updated_at "
                "WHERE {quotas}.calls + 1 <= ? AND "
                "{quotas}.spent_micros + {quotas}.reserved_micros + excluded.reserved_micros <= ? "
                "RETURNING calls"
            ),
            settle=d.sql(
                "UPDATE {quotas} SET reserved_micros = CASE WHEN reserved_micros > ? "
                "THEN reserved_micros - ? ELSE 0 END, spent_micros = spent_micros + ?, "
                "calls = calls - ?, updated_at = ? WHERE principal = ? AND period_key = ?"
            ),
            usage=d.sql(
                "SELECT calls, spent_micros, reserved_micros FROM {quotas} "
                "WHERE principal = ? AND period_key = ?"
            ),
        )


def reserve_params(
    principal: str, key: str, ceiling: int, max_calls: int, max_micros: int
) -> tuple[Any, ...]:
    return (principal, key, ceiling, time.time(), max_calls, max_micros)


def settle_params(principal: str, key: str, reserved: int, actual: int, calls_back: int) -> tuple[Any, ...]:
    return (reserved, reserved, actual, calls_back, time.time(), principal, key)


def usage_of(row: Any) -> QuotaUsage | None:
    if row is None:
        return None
    return QuotaUsage(int(row[0]), int(row[1]), int(row[2]))


class MemoryQuotas:
    """The memory journal's quotas: the same rules, in one process."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], list[int]] = {}

    def reserve(self, principal: str, key: str, ceiling: int, max_calls: int, max_micros: int) -> bool:
        row = self._rows.get((principal, key))
        if row is None:
            self._rows[(principal, key)] = [1, 0, ceiling]
            return True
        if row[0] + 1 > max_calls or row[1] + row[2] + ceiling > max_micros:
            return False
        row[0] += 1
        row[2] += ceiling
        return True

    def settle(self, principal: str, key: str, reserved: int, actual: int, calls_back: int) -> None:
        row = self._rows.get((principal, key))
        if row is not None:
            row[0] -= calls_back
            row[1] += actual
            row[2] = max(0, row[2] - reserved)

    def usage(self, principal: str, key: str) -> QuotaUsage | None:
        row = self._rows.get((principal, key))
        return None if row is None else QuotaUsage(*row)


@runtime_checkable
class _Costed(Protocol):
    """A declared tool or a binding: each says what one call costs."""

    cost_micros: object


def call_cost(catalog: ToolCatalog, name: str) -> int:
    """The most one call of `name` costs (its declared tool's or binding's `cost_micros`)."""
    listed = catalog.current() or catalog.last()
    target = listed.targets.get(name) if listed is not None else None
    if target is None:
        return 0
    source = target.source if target.declared else target.binding
    cost = source.cost_micros if isinstance(source, _Costed) else None
    return max(0, cost) if isinstance(cost, int) else 0


@dataclass(frozen=True)
class Quota:
    """A principal's cumulative cap over a period (see the module docs).

    Args:
        period: `hour`, `day`, `month` (fixed UTC windows) or `total` (never reset).
        max_calls: calls admitted per window (None: not capped).
        max_cost_micros: spend per window, in millionths of a USD (None: not capped).
    """

    period: str = "day"
    max_calls: int | None = None
    max_cost_micros: int | None = None

    def __post_init__(self) -> None:
        if self.period not in PERIODS:
            raise ConfigError(f"quota period must be one of {', '.join(PERIODS)}, got {self.period!r}")
        for name, value in (("max_calls", self.max_calls), ("max_cost_micros", self.max_cost_micros)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"quota {name} must be a non-negative integer, got {value!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Quota:
        """From a manifest's `quota` mapping (`period`, `maxCalls`, `maxCostMicros`)."""
        return cls(
            period=str(config.get("period", "day")),
            max_calls=config.get("max_calls", config.get("maxCalls")),
            max_cost_micros=config.get("max_cost_micros", config.get("maxCostMicros")),
        )

    def _fits_alone(self, ceiling: int) -> bool:
        calls = UNLIMITED if self.max_calls is None else self.max_calls
        cost = UNLIMITED if self.max_cost_micros is None else self.max_cost_micros
        return calls >= 1 and ceiling <= cost

    async def call(
        self,
        session: QuotaSession,
        name: str,
        args: Mapping[str, Any],
        *,
        context: object = None,
    ) -> Any:
        """`session.call_tool(name, args)` counted against the quota of the session's principal.

        The call reserves the most it can cost (its declared tool's or binding's `cost_micros`).
        A call that does not fit is refused through `session.refuse` (journaled, nothing sent):
        `LIMIT_EXCEEDED` past `max_calls`, `BUDGET_EXCEEDED` past `max_cost_micros`.

        Raises:
            PolicyError: the refusal, or the call's own.
        """
        journal: JournalBackend = session.rt.journal_port.backend
        principal = session.principal or ""
        key = period_key(self.period)
        ceiling = call_cost(session.catalog, name)
        max_calls = UNLIMITED if self.max_calls is None else self.max_calls
        max_micros = UNLIMITED if self.max_cost_micros is None else self.max_cost_micros
        try:
            admitted = self._fits_alone(ceiling) and await journal.areserve_quota(
                principal, key, ceiling, max_calls, max_micros
            )
        except PolicyError as exc:  # the journal could not be written: nothing is sent
            raise await session.refuse(name, args, exc.code, "quota") from None
        if not admitted:
            code = await self._code(journal, principal, key, ceiling)
            raise await session.refuse(name, args, code, "quota")
        calls_back = 0
        try:
            result = await session.call_tool(name, args, context=context)
        except PolicyError as exc:
            calls_back = 1 if exc.outcome == "blocked" else 0
            raise
        finally:
            with anyio.CancelScope(shield=True):
                actual = session.result().cost_micros
                try:
                    await journal.asettle_quota(principal, key, ceiling, actual, calls_back)
                except PolicyError:
                    log.warning("a quota of %r could not be settled (its reservation stays)", principal)
        return result

    async def _code(self, journal: JournalBackend, principal: str, key: str, ceiling: int) -> str:
        """Which cap a refused call met: the calls' (`LIMIT_EXCEEDED`) or the cost's."""
        if self.max_calls is None:
            return "BUDGET_EXCEEDED"
        if self.max_calls == 0:
            return "LIMIT_EXCEEDED"
        if not self._fits_alone(ceiling):
            return "BUDGET_EXCEEDED"
        try:
            used = await journal.aquota_usage(principal, key)
        except Exception:  # only which code to give: the call is refused either way
            return "LIMIT_EXCEEDED"
        full = used is not None and used.calls >= self.max_calls
        return "LIMIT_EXCEEDED" if full else "BUDGET_EXCEEDED"
