"""The journal fails mid-run: nothing is sent unrecorded, and the result and the journal agree.

Real SQLite failures only: a journal locked by another connection (or process) past the busy
timeout, and a journal that is full (`PRAGMA max_page_count`, so writes fail with SQLITE_FULL).
"""

from __future__ import annotations

import copy
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from rt_helpers import Empty, Message, call, exists, scripted

from toolbridge.agent import Agent, AgentHooks
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.runtime import Event, Journal, RunRecord, RuntimeResult, create_runtime, define_tool
from toolbridge.runtime._journal import read_back
from toolbridge.tools import ToolResult, ToolSpec

WRITE = ["model:scripted", "tool:fs_write_file", "effect:write"]


class Holder:
    """Another connection that takes the journal's write lock and keeps it."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)

    def lock(self) -> None:
        self.db.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def close(self) -> None:
        self.release()
        self.db.close()


def _journal(path: Path) -> Journal:
    return Journal(path, durable=True, busy_timeout_ms=50)


def _read(path: Path, run_id: str) -> RunRecord | None:
    reader = Journal.open_existing(path)
    try:
        return reader.get_run(run_id)
    finally:
        reader.close()


def _agrees(result: RuntimeResult, record: RunRecord | None) -> None:
    """The journal says what the result says, now or once this process is gone."""
    if record is None:
        assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
        return
    if record.outcome == "running":  # the end could not be written: read it back as if dead
        record = read_back(copy.deepcopy(record), alive=False)
        assert record.outcome == result.outcome, (record, result)
        return
    assert (record.outcome, record.error_code) == (result.outcome, result.error_code)
    for c in record.calls:
        assert c.outcome != "running", record


def _fs_agent(provider: Any, target: Path, hooks: Any = None) -> Agent:
    model = scripted(call("fs_write_file", path=str(target), content="hello"), {"text": "done"})
    binding = {"provider": provider, "prefix": "fs_", "include": ["write_file"], "effects": "write"}
    return Agent(model, tool_providers=[binding], hooks=hooks)


async def test_a_journal_locked_by_another_process_at_run_start_is_a_result_not_an_exception(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    runtime = create_runtime("durable", permissions={"allow": ["model:scripted"]}, journal=_journal(path))
    script = (
        "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.readline(); "
        "db.execute('ROLLBACK')"
    )
    holder = subprocess.Popen(  # noqa: ASYNC220 - a lock holder the test drives by hand
        [sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    events: list[Event] = []
    runtime.subscribe(events.append)
    model = scripted({"text": "never"})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = await runtime.run(Agent(model), "hello", run_id="run_locked")
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    assert result.run_id == "run_locked" and result.error_message
    assert model.requests == []  # nothing ran
    assert [e.type for e in events] == ["run.started", "run.completed"]
    assert events[-1].data["code"] == "JOURNAL_UNAVAILABLE"
    _agrees(result, _read(path, "run_locked"))
    # the lock is gone: the same runtime works again
    again = await runtime.run(Agent(scripted({"text": "ok"})), "hello")
    assert again.outcome == "succeeded"
    runtime.close()


async def test_request_sent_not_recorded_means_not_sent(
    filesystem_js: str, node: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = data / "out.txt"
    path = tmp_path / "runs.sqlite"
    holder = Holder(path)

    class LockBeforeTheCall(AgentHooks):
        """Outermost around the runtime's call: the call is planned, its request not yet sent."""

        async def call_tool(
            self, ctx: Any, call: Any, invoke: Callable[[], Awaitable[ToolResult]]
        ) -> ToolResult:
            holder.lock()
            return await invoke()

    runtime = create_runtime("durable", permissions={"allow": WRITE}, journal=_journal(path))
    runtime.subscribe(lambda e: holder.release() if e.type == "tool.completed" else None)
    try:
        async with StdioClient(node, [filesystem_js, str(data)]) as client:
            agent = _fs_agent(McpToolProvider(client), target, hooks=LockBeforeTheCall())
            result = await runtime.run(agent, "write it")
    finally:
        holder.close()
    assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    assert not exists(target)  # nothing reached the server
    record = _read(path, result.run_id)
    _agrees(result, record)
    assert record is not None
    (evidence,) = record.calls
    assert not evidence.request_sent and evidence.outcome == "not_started"
    runtime.close()


class LockingProvider:
    """A provider that takes the journal lock while its (real) call is on its way."""

    def __init__(self, inner: McpToolProvider, holder: Holder) -> None:
        self.inner, self.holder = inner, holder

    async def list_tools(self) -> list[ToolSpec]:
        return await self.inner.list_tools()

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        self.holder.lock()
        return await self.inner.call_tool(name, args)


async def test_a_journal_failure_after_sending_is_outcome_unknown_in_the_result_and_the_journal(
    filesystem_js: str, node: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = data / "out.txt"
    path = tmp_path / "runs.sqlite"
    holder = Holder(path)
    runtime = create_runtime("durable", permissions={"allow": WRITE}, journal=_journal(path))

    def release_after_the_call(event: Event) -> None:
        if event.type == "tool.completed":
            holder.release()  # the run's end can be written again

    runtime.subscribe(release_after_the_call)
    try:
        async with StdioClient(node, [filesystem_js, str(data)]) as client:
            agent = _fs_agent(LockingProvider(McpToolProvider(client), holder), target)
            result = await runtime.run(agent, "write it")
    finally:
        holder.close()
    assert exists(target)  # the write ran
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    record = _read(path, result.run_id)
    _agrees(result, record)
    assert record is not None and record.outcome == "outcome_unknown"
    (evidence,) = record.calls
    assert evidence.request_sent and evidence.outcome == "outcome_unknown"
    runtime.close()


async def test_a_journal_still_locked_at_the_end_gives_the_outcome_it_will_be_read_back_with(
    filesystem_js: str, node: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = tmp_path / "runs.sqlite"
    holder = Holder(path)
    runtime = create_runtime("durable", permissions={"allow": WRITE}, journal=_journal(path))
    try:
        async with StdioClient(node, [filesystem_js, str(data)]) as client:
            agent = _fs_agent(LockingProvider(McpToolProvider(client), holder), data / "out.txt")
            result = await runtime.run(agent, "write it")
        assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
        holder.release()
        stuck = _read(path, result.run_id)
        assert stuck is not None and stuck.outcome == "running"  # this process is alive
        _agrees(result, stuck)  # ... and once it is gone, it reads back as the result said
    finally:
        holder.close()
    runtime.close()  # retries the run's end
    _agrees(result, _read(path, result.run_id))


async def test_effects_none_and_a_journal_failure_after_the_response_is_failed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    holder = Holder(path)
    ran: list[int] = []

    def lock_while_running(value: Any, ctx: Any) -> dict[str, str]:
        ran.append(1)
        holder.lock()
        return {"content": "ok"}

    tool = define_tool("t", "1", "", Empty, Message, "none", [], execute=lock_while_running)
    runtime = create_runtime(
        "durable", permissions={"allow": ["model:scripted", "tool:t"]}, journal=_journal(path)
    )
    runtime.subscribe(lambda e: holder.release() if e.type == "tool.completed" else None)
    try:
        result = await runtime.run(Agent(scripted(call("t"), "done"), tools=[tool]), "go")
    finally:
        holder.close()
    assert ran == [1]
    assert (result.outcome, result.error_code) == ("failed", "JOURNAL_UNAVAILABLE")
    _agrees(result, _read(path, result.run_id))
    runtime.close()


async def test_a_full_journal_never_sends_unrecorded_and_never_disagrees(tmp_path: Path) -> None:
    """SQLITE_FULL at every point of a run: sweep the journal's size limit one page at a time."""
    path = tmp_path / "runs.sqlite"
    journal = _journal(path)
    db = journal._db  # the runtime's own connection: max_page_count is per connection
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")
    executed: dict[str, int] = {}

    def write(value: Any, ctx: Any) -> dict[str, str]:
        executed[ctx.run_id] = executed.get(ctx.run_id, 0) + 1
        return {"content": "x" * 300}

    tool = define_tool("w", "1", "", Empty, Message, "write", [], execute=write)
    runtime = create_runtime(
        "durable",
        permissions={"allow": ["model:scripted", "tool:w", "effect:write"]},
        journal=journal,
    )
    seen: set[str] = set()
    for i in range(80):
        # one turn of three calls: planned together, then sent, so a page can fill in between
        turns = [{"tool_calls": [{"name": "w", "arguments": {}}] * 3}, {"text": "done"}]
        result = await runtime.run(Agent(scripted(*turns), tools=[tool]), "go", run_id=f"run_{i}")
        record = journal.get_run(result.run_id)
        _agrees(result, record)
        sent = sum(c.request_sent for c in record.calls) if record is not None else 0
        assert executed.get(result.run_id, 0) == sent, (result, record)  # nothing sent unrecorded
        seen.add(result.error_code or "ok")
        if result.ok:
            assert record is not None and [c.outcome for c in record.calls] == ["succeeded"] * 3
        if not result.ok:  # full: one more page, so the next runs fail at other points
            pages += 1
            db.execute(f"PRAGMA max_page_count={pages}")
    # the sweep hit the journal at run start, before a call, after one, and let runs through
    assert {"ok", "JOURNAL_UNAVAILABLE", "OUTCOME_UNKNOWN"} <= seen, seen
    runtime.close()
