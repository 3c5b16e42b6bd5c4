"""What a failed call's answer proves, in `runtime.session` and agent runs, on every journal backend
(memory, SQLite, PostgreSQL): an `isError` result is `failed` / `TOOL_ERROR`, a JSON-RPC -32602
is `failed` / `TOOL_REFUSED` (nothing charged), a -32603 or a server-defined code is
`outcome_unknown` for a tool with effects; and every refused call has its row
(`session.refuse`, budget, limits, grants).

The server is the gateway tests' `faith_server.py` (official SDK, over stdio)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from rt_helpers import call, scripted

from toolbridge import McpToolProvider, PolicyError
from toolbridge.agent import Agent
from toolbridge.clients import StdioClient
from toolbridge.errors import ConfigError
from toolbridge.runtime import create_runtime

FAITH = Path(__file__).resolve().parent.parent / "gateway" / "upstreams" / "faith_server.py"
KEY = "sk-answers-0123456789abcdef"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """The journal a runtime is created with: None (memory), an SQLite file or a PostgreSQL URL."""
    if request.param == "memory":
        return None
    if request.param == "sqlite":
        return str(tmp_path / "journal.sqlite")
    return str(request.getfixturevalue("postgres_url"))


def runtime_of(journal: str | None, allow: list[str], **limits: Any) -> Any:
    limits = {"max_cost_micros": 1000, **limits}
    if journal is None:
        return create_runtime(permissions={"allow": allow}, limits=limits)
    return create_runtime("durable", permissions={"allow": allow}, journal=journal, limits=limits)


@asynccontextmanager
async def faith() -> AsyncIterator[McpToolProvider]:
    async with StdioClient(sys.executable, [str(FAITH)], env={"FAITH_KEY": KEY}) as client:
        yield McpToolProvider(client)


ALLOW = [f"tool:{n}" for n in ("oops", "refuse", "internal", "custom", "write", "rich")] + [
    "effect:write",
    "effect:read",
]
EXPECTED = {
    # name: (session outcome, code, call row outcome, response received, charged)
    "oops": ("failed", "TOOL_ERROR", "failed", True, 5),
    "refuse": ("failed", "TOOL_REFUSED", "failed", True, 0),
    "internal": ("outcome_unknown", "OUTCOME_UNKNOWN", "outcome_unknown", False, 5),
    "custom": ("outcome_unknown", "OUTCOME_UNKNOWN", "outcome_unknown", False, 5),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_a_session_journals_what_the_answer_proves(journal: str | None, name: str) -> None:
    runtime = runtime_of(journal, ALLOW)
    try:
        binding = {"effects": "write", "cost_micros": 5}
        async with (
            faith() as provider,
            runtime.session(tool_providers=[{"provider": provider, **binding}]) as session,
        ):
            with pytest.raises(PolicyError) as failed:
                await session.call_tool(name, {})
        outcome, code, row, received, charged = EXPECTED[name]
        assert (failed.value.outcome, failed.value.code) == (outcome, code)
        assert KEY not in repr(failed.value.__dict__)
        assert (session.result().outcome, session.result().error_code) == (outcome, code)
        (evidence,) = runtime.inspect(session.run_id).calls
        assert (evidence.tool_id, evidence.outcome, evidence.error_code) == (name, row, code)
        assert evidence.request_sent and evidence.response_received is received
        assert evidence.cost_micros == charged
    finally:
        runtime.close()


async def test_an_agent_run_classifies_the_same(tmp_path: Path) -> None:
    runtime = runtime_of(str(tmp_path / "j.sqlite"), [*ALLOW, "model:scripted"])
    try:
        async with faith() as provider:
            binding = {"provider": provider, "effects": "write"}
            refused = await runtime.run(Agent(scripted(call("refuse")), [binding]), "go")
            errored = await runtime.run(Agent(scripted(call("oops")), [binding]), "go")
            unknown = await runtime.run(Agent(scripted(call("internal")), [binding]), "go")
        assert (refused.outcome, refused.error_code) == ("failed", "TOOL_REFUSED")
        assert (errored.outcome, errored.error_code) == ("failed", "TOOL_ERROR")
        assert (unknown.outcome, unknown.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
        for result, code in ((refused, "TOOL_REFUSED"), (errored, "TOOL_ERROR")):
            (evidence,) = runtime.inspect(result.run_id).calls
            assert (evidence.outcome, evidence.error_code) == ("failed", code)
    finally:
        runtime.close()


async def test_refuse_records_the_call_and_ends_the_session(journal: str | None) -> None:
    runtime = runtime_of(journal, ALLOW)
    try:
        async with (
            faith() as provider,
            runtime.session(tool_providers=[provider], principal="alice") as session,
        ):
            with pytest.raises(ConfigError):
                await session.refuse("write", {}, "OUTCOME_UNKNOWN")  # not a refusal's code
            error = await session.refuse(
                "write", {"path": "/etc/passwd"}, "PERMISSION_DENIED", "approval declined"
            )
            assert (error.code, error.outcome) == ("PERMISSION_DENIED", "blocked")
            assert error.message.endswith("approval declined")
            with pytest.raises(PolicyError) as closed:  # fail closed, like any refusal
                await session.call_tool("write", {})
            assert closed.value.code == "PERMISSION_DENIED"
        assert (session.result().outcome, session.result().error_code) == ("blocked", "PERMISSION_DENIED")
        evidence, refused = runtime.inspect(session.run_id).calls
        # the call refused after the session ended has its row too
        assert (refused.tool_id, refused.outcome, refused.error_code) == (
            "write",
            "not_started",
            "PERMISSION_DENIED",
        )
        assert (evidence.tool_id, evidence.outcome, evidence.error_code) == (
            "write",
            "not_started",
            "PERMISSION_DENIED",
        )
        assert not evidence.request_sent and evidence.args_bytes == len(b'{"path":"/etc/passwd"}')
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("allow", "limits", "args", "code"),
    [
        (["tool:write"], {}, {}, "PERMISSION_DENIED"),  # no effect:write
        (ALLOW, {"max_cost_micros": 1}, {}, "BUDGET_EXCEEDED"),
        (ALLOW, {"max_tool_calls": 0}, {}, "LIMIT_EXCEEDED"),
        (ALLOW, {"max_input_bytes": 8}, {"text": "x" * 100}, "LIMIT_EXCEEDED"),
    ],
)
async def test_every_refused_call_has_a_row(
    journal: str | None, allow: list[str], limits: dict[str, int], args: dict[str, Any], code: str
) -> None:
    runtime = runtime_of(journal, allow, **limits)
    try:
        binding = {"cost_micros": 5}
        async with (
            faith() as provider,
            runtime.session(tool_providers=[{"provider": provider, **binding}]) as session,
        ):
            with pytest.raises(PolicyError) as refused:
                await session.call_tool("write", args)
        assert refused.value.code == code
        (evidence,) = runtime.inspect(session.run_id).calls
        assert (evidence.tool_id, evidence.outcome, evidence.error_code) == ("write", "not_started", code)
        assert not evidence.request_sent and evidence.cost_micros == 0
    finally:
        runtime.close()
