"""Approvals that wait for a person: a client without elicitation calls an approval-gated tool of a
real gateway (`toolbridge gateway`, a real upstream); the call waits as a pending row beside the
journal until an operator decides it (here from this test process, as another replica's console
would: the same SQLite file), or times out with its own code."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from gw_helpers import calls_of, gateway_stdio, journal_calls, upstream_manifest

from toolbridge.console import Approval, ApprovalStore

BINDING = """    effects: read
    exclude: [note]
  - provider: !ref Up
    prefix: w_
    include: [note]
    effects: write
    approval: write
"""
WRITER = """clients:
  - name: me
    local: true
    permissions:
      allow: [tool:up_echo, effect:read, tool:w_note, effect:write]
"""
CONSOLE = """console:
  operators:
    - name: olga
      token: "${{ secrets.olgaToken }}"
"""


def manifest_of(tmp_path: Path, timeout_ms: int = 60_000) -> Path:
    return upstream_manifest(
        tmp_path, clients=WRITER, binding=BINDING, gateway=f"{CONSOLE}approvalTimeoutMs: {timeout_ms}"
    )


async def pending_of(tmp_path: Path) -> Approval:
    """The first pending approval in the journal's database, waited for (a hang guard only)."""
    store = ApprovalStore(str(tmp_path / "journal.db"), readonly=True)
    try:
        with anyio.fail_after(30):
            while True:
                rows = await store.pending()
                if rows:
                    return rows[0]
                await anyio.sleep(0.05)
    finally:
        store.close()


async def decide(tmp_path: Path, approval_id: str, approve: bool, reason: str | None = None) -> bool:
    store = ApprovalStore(str(tmp_path / "journal.db"))
    try:
        return await store.decide(approval_id, by="olga", approve=approve, reason=reason)
    finally:
        store.close()


def rows_of(tmp_path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "journal.db") as db:
        return db.execute(
            "SELECT tool, identity, status, decided_by, reason, arguments FROM toolbridge_approvals"
        ).fetchall()


async def test_a_client_without_elicitation_waits_for_the_operator_who_approves(tmp_path: Path) -> None:
    progress: list[str | None] = []
    heard = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)
        heard.set()

    async with gateway_stdio(manifest_of(tmp_path)) as client, anyio.create_task_group() as tg:
        answers: list[types.CallToolResult] = []

        async def call() -> None:
            answers.append(
                await client.call_tool(
                    "w_note", {"text": "<script>alert(1)</script>"}, progress_callback=on_progress
                )
            )

        tg.start_soon(call)
        pending = await pending_of(tmp_path)
        assert (pending.tool, pending.identity, pending.server) == ("w_note", "me", "Up")
        assert pending.effects == "write"
        assert pending.arguments == {"text": "<script>alert(1)</script>"}
        assert calls_of(tmp_path) == []  # nothing sent while it waits
        with anyio.fail_after(30):  # the waiting client hears about it (it sent a progress token)
            await heard.wait()
        assert await decide(tmp_path, pending.id, True)
        assert not await decide(tmp_path, pending.id, False), "decided once: the second decision loses"
    assert not answers[0].is_error and answers[0].content[0].text == "noted"  # type: ignore[union-attr]
    assert progress[0] == "waiting for an operator's approval"
    assert calls_of(tmp_path) == ["note"]
    assert rows_of(tmp_path) == [("w_note", "me", "approved", "olga", None, None)]  # arguments cleared
    assert journal_calls(tmp_path)[-1][:3] == ("me", "w_note", "succeeded")


async def test_a_denial_is_refused_with_who_and_why_and_nothing_is_sent(tmp_path: Path) -> None:
    async with gateway_stdio(manifest_of(tmp_path)) as client, anyio.create_task_group() as tg:
        answers: list[types.CallToolResult] = []

        async def call() -> None:
            answers.append(await client.call_tool("w_note", {"text": "drop the table"}))

        tg.start_soon(call)
        pending = await pending_of(tmp_path)
        assert await decide(tmp_path, pending.id, False, "  not on a Friday  ")
    refused = answers[0]
    assert refused.is_error and refused.meta is not None
    assert refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
    assert calls_of(tmp_path) == []
    assert rows_of(tmp_path) == [("w_note", "me", "denied", "olga", "not on a Friday", None)]
    assert journal_calls(tmp_path)[-1] == ("me", "w_note", "not_started", "PERMISSION_DENIED", False)


async def test_no_decision_in_time_is_a_refusal_with_its_own_code_never_a_yes(tmp_path: Path) -> None:
    async with gateway_stdio(manifest_of(tmp_path, timeout_ms=1500)) as client:
        refused = await client.call_tool("w_note", {"text": "x"})
        # the operator decides too late: the row is already timed out, the decision loses
        row = rows_of(tmp_path)[0]
        assert row[2] == "timed_out" and row[3] == "gateway"
    assert refused.is_error and refused.meta is not None
    assert refused.meta["toolbridge/code"] == "APPROVAL_TIMEOUT"
    assert refused.meta["toolbridge/outcome"] == "blocked"
    assert calls_of(tmp_path) == []
    assert journal_calls(tmp_path)[-1] == ("me", "w_note", "not_started", "APPROVAL_TIMEOUT", False)
    with sqlite3.connect(tmp_path / "journal.db") as db:
        (approval_id,) = db.execute("SELECT id FROM toolbridge_approvals").fetchone()
    assert not await decide(tmp_path, approval_id, True)


async def test_elicitation_stays_first_where_the_client_supports_it(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with gateway_stdio(manifest_of(tmp_path), elicitation_callback=elicit) as client:
        ok = await client.call_tool("w_note", {"text": "asked in the client"})
    assert not ok.is_error and len(asked) == 1
    assert rows_of(tmp_path) == []  # no row: the person at the client answered


async def test_a_client_that_gives_up_withdraws_its_approval(tmp_path: Path) -> None:
    async with gateway_stdio(manifest_of(tmp_path)) as client:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await client.call_tool("w_note", {"text": "never mind"})

            tg.start_soon(call)
            await pending_of(tmp_path)
            tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
        with anyio.fail_after(30):
            while rows_of(tmp_path)[0][2] == "pending":  # noqa: ASYNC110 (another process writes it)
                await anyio.sleep(0.05)
    assert rows_of(tmp_path)[0][2:4] == ("cancelled", "gateway")
    assert calls_of(tmp_path) == []
