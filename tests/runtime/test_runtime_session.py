"""`runtime.session()`: the runtime's rules for any caller, against real servers."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rt_helpers import Empty, Message, exists
from rt_server import SERVER_MARKER

from toolbridge.agent.models import ModelPrices
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.errors import ConfigError, PolicyError
from toolbridge.runtime import CODES, GovernedSession, create_runtime, define_mcp_tool, define_tool

HERE = Path(__file__).resolve().parent
READ = ["tool:fs_read_text_file", "effect:read"]


def _files(node: str, filesystem_js: str, folder: Path) -> tuple[StdioClient, dict[str, Any]]:
    client = StdioClient(node, [filesystem_js, str(folder)])
    binding = {"provider": McpToolProvider(client), "prefix": "fs_", "effects": "read"}
    return client, binding


async def test_a_granted_call_reaches_the_server_and_is_journaled_with_the_principal(
    node: str, filesystem_js: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello from the file")
    runtime = create_runtime("durable", permissions={"allow": READ}, journal=tmp_path / "runs.sqlite")
    client, binding = _files(node, filesystem_js, tmp_path)
    async with client, runtime.session(tool_providers=[binding], principal="alice") as session:
        assert isinstance(session, GovernedSession) and session.principal == "alice"
        names = [spec.name for spec in await session.list_tools()]
        assert "fs_read_text_file" in names and "fs_write_file" in names
        result = await session.call_tool("fs_read_text_file", {"path": str(tmp_path / "notes.txt")})
        assert "hello from the file" in result.to_text()
    outcome = session.result()
    assert (outcome.outcome, outcome.error_code, outcome.run_id) == ("succeeded", None, session.run_id)
    record = runtime.inspect(session.run_id)
    assert record.principal == "alice" and record.outcome == "succeeded" and record.agent == "session (alice)"
    (evidence,) = record.calls
    assert (evidence.tool_id, evidence.effects, evidence.outcome) == (
        "fs_read_text_file",
        "read",
        "succeeded",
    )
    assert evidence.request_sent and evidence.response_received and evidence.kind == "discovered"
    runtime.close()


async def test_an_ungranted_call_never_reaches_the_server_and_the_session_fails_closed(
    node: str, filesystem_js: str, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    (tmp_path / "notes.txt").write_text("x")
    runtime = create_runtime(permissions={"allow": READ})
    client, binding = _files(node, filesystem_js, tmp_path)
    async with client, runtime.session(tool_providers=[binding]) as session:
        with pytest.raises(PolicyError) as refused:
            await session.call_tool("fs_write_file", {"path": str(target), "content": "no"})
        assert refused.value.code == "PERMISSION_DENIED" and refused.value.outcome == "blocked"
        assert "tool:fs_write_file" in refused.value.message
        # fail closed: even a granted call is refused now, with the same code
        with pytest.raises(PolicyError) as closed:
            await session.call_tool("fs_read_text_file", {"path": str(tmp_path / "notes.txt")})
        assert closed.value.code == "PERMISSION_DENIED"
        with pytest.raises(PolicyError):
            await session.before_model_call("scripted")
    assert not exists(target)
    assert (session.result().outcome, session.result().error_code) == ("blocked", "PERMISSION_DENIED")
    record = runtime.inspect(session.run_id)
    assert record.outcome == "blocked"
    assert [(c.tool_id, c.request_sent, c.outcome, c.error_code) for c in record.calls] == [
        ("fs_write_file", False, "not_started", "PERMISSION_DENIED"),
        ("fs_read_text_file", False, "not_started", "PERMISSION_DENIED"),  # refused too: its row
    ]


async def test_the_turn_rule_checks_a_whole_batch_before_any_call_runs(
    node: str, filesystem_js: str, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("x")
    runtime = create_runtime(permissions={"allow": READ})
    client, binding = _files(node, filesystem_js, tmp_path)
    binding["effects"] = "write"  # every tool of the binding now needs effect:write
    async with client, runtime.session(tool_providers=[binding]) as session:
        with pytest.raises(PolicyError) as refused:
            await session.call_tools(
                [
                    ("fs_read_text_file", {"path": str(tmp_path / "notes.txt")}),
                    ("fs_write_file", {"path": str(tmp_path / "out.txt"), "content": "no"}),
                ]
            )
    assert refused.value.code == "PERMISSION_DENIED"
    assert not exists(tmp_path / "out.txt")
    calls = runtime.inspect(session.run_id).calls
    assert [(c.request_sent, c.outcome) for c in calls] == [(False, "not_started")] * 2


async def test_a_batch_runs_concurrently_bounded_and_returns_results_in_order() -> None:
    running, most = 0, 0

    async def slow(value: Any, ctx: Any) -> dict[str, str]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.2)
        running -= 1
        return {"content": value.content}

    tool = define_tool("slow", "1", "", Message, Message, "none", [], execute=slow)
    runtime = create_runtime(permissions={"allow": ["tool:slow"]})
    async with runtime.session(tools=[tool], max_parallel_tools=2) as session:
        results = await session.call_tools([("slow", {"content": str(i)}) for i in range(4)])
    assert [r.structured for r in results] == [{"content": str(i)} for i in range(4)]
    assert most == 2  # bounded: never more than two at once, and two did overlap
    assert session.result().ok


async def test_the_budget_refuses_the_call_that_does_not_fit() -> None:
    ran: list[int] = []
    tool = define_tool(
        "pay", "1", "", Empty, Message, "none", [], cost_micros=60,
        execute=lambda i, c: ran.append(1) or {"content": "paid"},
    )  # fmt: skip
    runtime = create_runtime(permissions={"allow": ["tool:pay"]}, limits={"max_cost_micros": 100})
    async with runtime.session(tools=[tool]) as session:
        assert (await session.call_tool("pay")).structured == {"content": "paid"}
        with pytest.raises(PolicyError) as refused:
            await session.call_tool("pay")
    assert refused.value.code == "BUDGET_EXCEEDED" and ran == [1]
    result = session.result()
    assert (result.outcome, result.error_code, result.cost_micros) == ("blocked", "BUDGET_EXCEEDED", 60)


async def test_model_calls_are_governed_by_grant_count_and_budget() -> None:
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=1_000_000)
    runtime = create_runtime(
        permissions={"allow": ["model:openai:gpt-x"]}, limits={"max_cost_micros": 50, "max_model_calls": 5}
    )
    async with runtime.session() as session:
        await session.before_model_call("openai:gpt-x", context_bytes=10, max_output_tokens=20, prices=prices)
        await session.after_model_call(input_tokens=8, output_tokens=12)
        assert session.result().cost_micros == 20
        with pytest.raises(PolicyError) as too_big:  # 10 + 40 more would pass 50 with 20 spent
            await session.before_model_call(
                "openai:gpt-x", context_bytes=10, max_output_tokens=40, prices=prices
            )
    assert too_big.value.code == "BUDGET_EXCEEDED"
    assert session.result().usage == {"input_tokens": 8, "output_tokens": 12, "model_calls": 1}
    async with runtime.session() as other:
        with pytest.raises(PolicyError) as denied:
            await other.before_model_call("openai:other")
    assert denied.value.code == "PERMISSION_DENIED" and "model:openai:other" in denied.value.message


async def test_an_error_answer_after_sending_is_failed_and_no_server_text_leaks() -> None:
    """The server answered `isError`: the outcome is known (`failed`, `TOOL_ERROR`), not unknown
    (issue 21: it was `outcome_unknown` though the server said what happened)."""
    async with StdioClient(sys.executable, [str(HERE / "rt_server.py")]) as client:
        fail = define_mcp_tool(
            id="ops.fail", version="1", description="", input=Empty, output=Message, effects="write",
            capabilities=[], remote_name="fail", client=client,
        )  # fmt: skip
        ok = define_mcp_tool(
            id="ops.ok", version="1", description="", input={"type": "object"}, output=Message,
            effects="none", capabilities=[], remote_name="ok", client=client,
        )  # fmt: skip
        runtime = create_runtime(permissions={"allow": ["tool:ops.fail", "effect:write", "tool:ops.ok"]})
        async with runtime.session(tools=[fail, ok]) as session:
            assert (await session.call_tool("ops_ok", {"message": "m"})).structured == {"content": "m"}
            with pytest.raises(PolicyError) as unknown:
                await session.call_tool("ops_fail")
            with pytest.raises(PolicyError) as closed:
                await session.call_tool("ops_ok", {"message": "m"})
    assert unknown.value.code == closed.value.code == "TOOL_ERROR"
    assert SERVER_MARKER not in repr(unknown.value.__dict__) and unknown.value.__cause__ is None
    assert (session.result().outcome, session.result().error_code) == ("failed", "TOOL_ERROR")
    calls = runtime.inspect(session.run_id).calls
    assert [(c.outcome, c.error_code) for c in calls] == [
        ("succeeded", None),
        ("failed", "TOOL_ERROR"),
        ("not_started", "TOOL_ERROR"),  # the call refused after the session ended has its row
    ]
    assert calls[1].request_sent and calls[1].response_received


async def test_a_session_cancelled_mid_call_with_effects_is_outcome_unknown(tmp_path: Path) -> None:
    async with StdioClient(sys.executable, [str(HERE / "rt_server.py")]) as client:
        slow = define_mcp_tool(
            id="ops.slow", version="1", description="", input={"type": "object"}, output=Message,
            effects="write", capabilities=[], remote_name="slow", client=client,
        )  # fmt: skip
        runtime = create_runtime(permissions={"allow": ["tool:ops.slow", "effect:write"]})
        session = runtime.session(tools=[slow])
        with anyio.move_on_after(0.5):
            async with session:
                await session.call_tool("ops_slow", {"seconds": 10})
    assert (session.result().outcome, session.result().error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = runtime.inspect(session.run_id).calls
    assert evidence.request_sent and evidence.outcome == "outcome_unknown"


async def test_the_session_deadline_is_max_duration_ms() -> None:
    async def wait(value: Any, ctx: Any) -> dict[str, str]:
        await anyio.sleep(5)
        return {"content": "late"}

    tool = define_tool("wait", "1", "", Empty, Message, "none", [], execute=wait)
    runtime = create_runtime(permissions={"allow": ["tool:wait"]}, limits={"max_duration_ms": 300})
    started = time.monotonic()
    async with runtime.session(tools=[tool]) as session:
        with pytest.raises(PolicyError) as late:
            await session.call_tool("wait")
    assert late.value.code == "TIMEOUT" and time.monotonic() - started < 2


async def test_hostile_use_of_a_session_gets_clear_errors() -> None:
    runtime = create_runtime(permissions={"allow": []})
    session = runtime.session()
    with pytest.raises(ConfigError, match="async with"):
        await session.call_tool("x")
    for bad in ({"principal": ""}, {"principal": 7}, {"principal": "x" * 300}, {"run_id": ""}):
        with pytest.raises(ConfigError):
            runtime.session(**bad)
    with pytest.raises(ConfigError, match="max_parallel_tools"):
        runtime.session(max_parallel_tools=0)
    with pytest.raises(ConfigError, match="not a declared tool"):
        runtime.session(tools=[object()])
    async with runtime.session() as session:
        with pytest.raises(PolicyError) as empty:
            await session.call_tools([])
        assert empty.value.code == "INVALID_INPUT"
    async with runtime.session() as session:
        with pytest.raises(PolicyError) as not_object:
            await session.call_tool("x", ["not", "an", "object"])  # type: ignore[arg-type]
        assert not_object.value.code == "INVALID_INPUT"
    async with runtime.session() as session:
        with pytest.raises(PolicyError) as missing:
            await session.call_tool("nothing_here")
        assert missing.value.code == "NOT_FOUND"
    async with runtime.session(run_id="run_same"):
        pass
    with pytest.raises(ConfigError, match="already in the journal"):
        async with runtime.session(run_id="run_same"):
            pass


_names = st.one_of(st.sampled_from(["echo", "secret", "echo_", ""]), st.text(max_size=20))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
_args = st.one_of(st.none(), st.dictionaries(st.text(max_size=8), _json, max_size=4), _json)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(_names, _args), max_size=4))
async def test_any_batch_gets_a_result_or_a_policy_error_and_ungranted_tools_never_run(
    batch: list[tuple[str, Any]],
) -> None:
    ran: list[str] = []
    echo = define_tool(
        "echo", "1", "", {"type": "object"}, {"type": "object"}, "none", [],
        execute=lambda i, c: ran.append("echo") or {"ok": True},
    )  # fmt: skip
    secret = define_tool(
        "secret", "1", "", {"type": "object"}, {"type": "object"}, "write", [],
        execute=lambda i, c: ran.append("secret") or {"ok": True},
    )  # fmt: skip
    runtime = create_runtime(permissions={"allow": ["tool:echo", "tool:secret"]})  # no effect:write
    async with runtime.session(tools=[echo, secret]) as session:
        try:
            results = await session.call_tools(batch)
        except PolicyError as exc:
            assert exc.code in CODES and session.result().error_code == exc.code
        else:
            assert len(results) == len(batch) and session.result().ok
    assert "secret" not in ran
    assert len(ran) in (0, len(batch))  # the turn rule: all of the batch or none of it


async def test_concurrent_callers_share_one_session_and_their_call_ids_are_journaled() -> None:
    running, most = 0, 0

    async def slow(value: Any, ctx: Any) -> dict[str, str]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(0.1)
        running -= 1
        return {"content": ctx.call_id}

    tool = define_tool("slow", "1", "", Empty, Message, "none", [], execute=slow)
    runtime = create_runtime(permissions={"allow": ["tool:slow"]})
    seen: dict[str, Any] = {}
    async with runtime.session(tools=[tool]) as session:

        async def one(i: int) -> None:
            seen[f"fw-{i}"] = (await session.call_tool("slow", {}, call_id=f"fw-{i}")).structured

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(one, i)
        assert most == 5  # they overlapped: one session serves concurrent callers
        with pytest.raises(PolicyError) as bad_ids:
            await session.call_tools([("slow", {}), ("slow", {})], call_ids=["same", "same"])
        assert bad_ids.value.code == "INVALID_INPUT"
    assert seen == {f"fw-{i}": {"content": f"fw-{i}"} for i in range(5)}
    calls = runtime.inspect(session.run_id).calls
    assert sorted(c.call_id for c in calls if c.outcome == "succeeded") == [f"fw-{i}" for i in range(5)]
    # the batch refused for its ids has its rows, under ids of the session's own
    assert [(c.call_id, c.outcome, c.error_code) for c in calls if c.outcome != "succeeded"] == [
        ("call_5_0", "not_started", "INVALID_INPUT"),
        ("call_5_1", "not_started", "INVALID_INPUT"),
    ]


async def test_an_exception_leaving_the_session_ends_it_failed_not_succeeded(tmp_path: Path) -> None:
    tool = define_tool(
        "echo", "1", "", Message, Message, "none", [], execute=lambda i, c: {"content": i.content}
    )
    runtime = create_runtime(
        "durable", permissions={"allow": ["tool:echo", "model:m"]}, journal=tmp_path / "runs.sqlite"
    )
    with pytest.raises(RuntimeError, match="the caller broke"):
        async with runtime.session(tools=[tool]) as session:
            assert (await session.call_tool("echo", {"content": "a"})).structured == {"content": "a"}
            raise RuntimeError("the caller broke")
    result = session.result()
    assert (result.outcome, result.error_code) == ("failed", "ABORTED") and CODES["ABORTED"] == "failed"
    assert result.error_message is not None and "caller broke" not in result.error_message
    record = runtime.inspect(session.run_id)
    assert (record.outcome, record.error_code) == ("failed", "ABORTED")
    assert [c.outcome for c in record.calls] == ["succeeded"]
    # a model call that raised (through a framework, say): `MODEL_FAILED`, its reservation settled
    with pytest.raises(ValueError):
        async with runtime.session() as model_session:
            await model_session.before_model_call("m")
            raise ValueError("provider said no")
    result = model_session.result()
    assert (result.outcome, result.error_code) == ("failed", "MODEL_FAILED")
    assert runtime.inspect(model_session.run_id).error_code == "MODEL_FAILED"
    # the session's own refusal keeps its code; a clean exit still succeeds
    with pytest.raises(PolicyError):
        async with runtime.session() as refused:
            await refused.call_tool("nothing_here")
    assert (refused.result().outcome, refused.result().error_code) == ("failed", "NOT_FOUND")
    async with runtime.session() as clean:
        pass
    assert clean.result().ok and runtime.inspect(clean.run_id).outcome == "succeeded"
    runtime.close()


async def test_an_exception_leaving_with_a_call_with_effects_in_flight_is_outcome_unknown() -> None:
    async with StdioClient(sys.executable, [str(HERE / "rt_server.py")]) as client:
        slow = define_mcp_tool(
            id="ops.slow", version="1", description="", input={"type": "object"}, output=Message,
            effects="write", capabilities=[], remote_name="slow", client=client,
        )  # fmt: skip
        runtime = create_runtime(permissions={"allow": ["tool:ops.slow", "effect:write"]})

        async def break_soon() -> None:
            await anyio.sleep(0.5)
            raise RuntimeError("a sibling task failed")

        with pytest.raises(BaseExceptionGroup) as left:
            async with runtime.session(tools=[slow]) as session, anyio.create_task_group() as tg:
                tg.start_soon(session.call_tool, "ops_slow", {"seconds": 10})
                tg.start_soon(break_soon)
    assert left.group_contains(RuntimeError)
    assert (session.result().outcome, session.result().error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = runtime.inspect(session.run_id).calls
    assert evidence.request_sent and evidence.outcome == "outcome_unknown"


async def test_on_model_call_error_settles_the_open_call_and_leaves_the_session_open() -> None:
    prices = ModelPrices(input_per_million_micros=1_000_000, output_per_million_micros=1_000_000)
    runtime = create_runtime(permissions={"allow": ["model:m"]}, limits={"max_cost_micros": 1_000})
    codes: list[Any] = []
    runtime.subscribe(lambda e: codes.append(e.data.get("code")) if e.type == "model.completed" else None)
    async with runtime.session() as session:
        await session.before_model_call("m", context_bytes=10, max_output_tokens=20, prices=prices)
        session.on_model_call_error(RuntimeError("provider down"))
        assert session.result().cost_micros == 30  # the full ceiling: the real cost is unknown
        with pytest.raises(ConfigError):  # nothing is open any more
            await session.after_model_call(input_tokens=1)
        # a retry (a framework's fallback) may go on: the session is not ended by the hook
        await session.before_model_call("m", context_bytes=1, max_output_tokens=1, prices=prices)
        session.on_model_call_error(anyio.get_cancelled_exc_class()())
        await session.before_model_call("m", context_bytes=1, max_output_tokens=1, prices=prices)
        await session.after_model_call(input_tokens=1, output_tokens=1)
        session.on_model_call_error()  # nothing open: does nothing
    assert codes == ["MODEL_FAILED", "CANCELLED", None]
    assert session.result().ok and session.result().cost_micros == 34
    assert session.result().usage == {"input_tokens": 1, "output_tokens": 1, "model_calls": 3}
