"""The bulkhead fields of a `Gateway` document: checked like every field, defaults as documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gateway_manifest import codes

from toolbridge.gateway._bulkhead import Bulkheads
from toolbridge.manifest._kinds_gateway import GatewayDoc


@pytest.mark.parametrize(
    "gateway",
    [
        "maxSessions: 0\n",
        "maxSessions: -5\n",
        "maxSessions: '100'\n",
        "maxSessions: 10\nmaxSessionsPerIdentity: 11\n",
        "maxSessionsPerIdentity: 0\n",
        "maxCallsInFlightPerIdentity: 0\n",
        "sessionIdleTimeoutMs: 10\n",
        "upstreamListTimeoutMs: 99\n",
        "upstreamStartTimeoutMs: 1e12\n",
        "breakerFailures: 0\n",
        "breakerCooldownMs: 99999999999\n",
        "maxSesions: 10\n",
    ],
)
def test_bad_bounds_are_errors(tmp_path: Path, gateway: str) -> None:
    found = codes(tmp_path, "tasks: [!ref T]\n" + gateway)
    assert [c for c in found if c[1] == "error"], found


def test_the_defaults_are_the_documented_ones(tmp_path: Path) -> None:
    assert codes(tmp_path, "tasks: [!ref T]\n") == []
    fields = GatewayDoc.model_fields
    defaults = {name: fields[name].default for name in fields}
    assert defaults["max_sessions"] == 10_000 and defaults["max_sessions_per_identity"] is None
    assert defaults["session_idle_timeout_ms"] == 1_800_000
    assert defaults["max_calls_in_flight_per_identity"] == 64
    assert defaults["upstream_start_timeout_ms"] == 30_000 and defaults["upstream_list_timeout_ms"] == 10_000
    assert defaults["breaker_failures"] == 3 and defaults["breaker_cooldown_ms"] == 30_000
    assert Bulkheads().sessions_per_identity == 1_000
    assert Bulkheads(max_sessions=5).sessions_per_identity == 1
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text(encoding="utf-8")
    for row in (
        "| `maxSessions` | 10 000 |",
        "| `maxSessionsPerIdentity` | a tenth of `maxSessions` (1 000) |",
        "| `sessionIdleTimeoutMs` | 1 800 000 (30 min) |",
        "| `maxCallsInFlightPerIdentity` | 64 |",
        "| `upstreamStartTimeoutMs` | 30 000 |",
        "| `upstreamListTimeoutMs` | 10 000 |",
        "| `breakerFailures` | 3 |",
        "| `breakerCooldownMs` | 30 000 |",
    ):
        assert row in doc, row
