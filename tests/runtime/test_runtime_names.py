"""A server cannot stop runs by the names it lists (denial of service by names).

Names colliding inside one server's listing, or taking a declared tool's model-facing name, are
left out (all of them, logged once) and the rest is kept; two configured sources offering one name
stay an error, with its own code (`TOOL_COLLISION` under a runtime), and no `TOOL_FAILED` is ever
reported for a call that was never made.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rt_helpers import Message, call, scripted

from toolbridge.agent import Agent
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.runtime import create_runtime, define_tool

HERE = Path(__file__).resolve().parent
HOSTILE = [
    ["echo ", "trailing space"],
    ["echo\u200b", "zero-width space"],
    ["fs.echo", "dotted"],
    ["fs_echo", "underscored"],
    ["w.x", "takes the declared tool's name"],
    ["ok", "the one honest tool"],
    ["ok", "listed twice"],
    ["fine", "a second honest tool"],
]


class Text(Message):
    pass


def _server(tmp_path: Path, names: list[list[str]] = HOSTILE) -> tuple[StdioClient, Path]:
    listing = tmp_path / "names.json"
    listing.write_text(json.dumps(names), encoding="utf-8")
    calls = tmp_path / "calls.log"
    calls.touch()
    return StdioClient(sys.executable, [str(HERE / "rt_names_server.py"), str(listing), str(calls)]), calls


def _calls(log: Path) -> list[str]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _declared() -> object:
    return define_tool("w_x", "1", "declared", {"type": "object"}, Message, "none", [],
                       execute=lambda i, c: {"content": "declared ran"})  # fmt: skip


async def test_colliding_names_are_left_out_and_the_rest_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client, log = _server(tmp_path)
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:fine", "tool:w_x", "effect:read"]}
    )
    async with client:
        provider = McpToolProvider(client)
        binding = {"provider": provider, "effects": "read"}
        with caplog.at_level("WARNING", logger="toolbridge.agent"):
            for _ in range(2):
                model = scripted(
                    {"tool_calls": [{"name": "fine", "arguments": {"text": "hi"}}, {"name": "w_x"}]},
                    {"text": "done"},
                )
                agent = Agent(model, tool_providers=[binding], tools=[_declared()])
                result = await runtime.run(agent, "go")
                assert result.outcome == "succeeded", result
                assert [t.name for t in model.requests[0].tools] == ["fine", "w_x"]
                shown = [r.content for r in result.steps[0].tool_results]
                assert shown[1] == {"content": "declared ran"}
    assert _calls(log) == ["fine", "fine"]  # the declared tool ran, not the server's "w.x"
    dropped = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    # one line per colliding group and agent; no control or invisible character printed raw
    assert len(dropped) == 2 * 4, dropped
    assert all("\u200b" not in line for line in dropped)
    assert any("'echo\\u200b'" in line for line in dropped)


async def test_a_call_to_a_left_out_name_is_not_found_and_never_made(tmp_path: Path) -> None:
    client, log = _server(tmp_path)
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:echo_", "effect:read"]})
    async with client:
        binding = {"provider": McpToolProvider(client), "effects": "read"}
        agent = Agent(scripted(call("echo_", text="x"), {"text": "never"}), tool_providers=[binding])
        result = await runtime.run(agent, "go")
    assert (result.outcome, result.error_code) == ("failed", "NOT_FOUND")
    assert _calls(log) == []
    # never made, but journaled: the row names the name asked for, refused as not found
    (row,) = runtime.inspect(result.run_id).calls
    assert (row.tool_id, row.kind, row.request_sent, row.outcome) == (
        "echo_",
        "unknown",
        False,
        "not_started",
    )
    assert row.error_code == "NOT_FOUND"


async def test_two_configured_sources_with_one_name_are_a_collision_not_a_tool_failure(
    tmp_path: Path,
) -> None:
    client, log = _server(tmp_path, [["same", "a"]])
    runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:same"]})
    async with client:
        provider = McpToolProvider(client)
        model = scripted(call("same", text="x"), {"text": "never"})
        agent = Agent(model, tool_providers=[provider, {"provider": provider}])
        result = await runtime.run(agent, "go")
    assert (result.outcome, result.error_code) == ("failed", "TOOL_COLLISION")
    assert result.error_message == "two configured tool sources offer the same model-facing tool name"
    assert _calls(log) == [] and model.requests == []


async def test_tools_that_cannot_be_listed_are_not_a_tool_failure(tmp_path: Path) -> None:
    gone = StdioClient(sys.executable, ["-c", "import sys; sys.exit(3)"])
    runtime = create_runtime(permissions={"allow": ["model:scripted"]})
    model = scripted({"text": "never"})
    result = await runtime.run(Agent(model, tool_providers=[McpToolProvider(gone)]), "go")
    assert (result.outcome, result.error_code) == ("failed", "TOOLS_UNAVAILABLE")
    assert model.requests == []
    await gone.aclose()


STATES = {
    "one": [["echo", "one"], ["other", "x"]],
    "two": [["echo", "two"], ["other", "x"]],
    "dup": [["echo", "one"], ["echo", "two"], ["other", "x"]],
    "dup-reversed": [["echo", "two"], ["echo", "one"], ["other", "x"]],
}


async def test_pinning_judges_every_entry_of_a_duplicated_name_so_lock_check_and_a_run_agree(
    tmp_path: Path,
) -> None:
    from rt_names_server import names_server

    from toolbridge.cli._lock import diff_locks
    from toolbridge.clients import InProcessClient
    from toolbridge.errors import PolicyError
    from toolbridge.pinning import PinnedToolProvider, lock_server

    def client(state: str) -> InProcessClient:
        names = [(n, d) for n, d in STATES[state]]
        return InProcessClient(names_server(names, tmp_path / "calls.log"), mode="legacy")

    agreed = 0
    for locked in STATES:
        async with client(locked) as c:
            lock = await lock_server(c)
        for current in STATES:
            async with client(current) as c:
                check_ok = not diff_locks(lock, await lock_server(c))  # what `lock --check` says
            async with PinnedToolProvider(client(current), lock) as pinned:
                statuses = await pinned.status()
                offered = [spec.name for spec in await pinned.list_tools()]
                try:
                    await pinned.call_tool("echo", {"text": "hi"})
                    called = True
                except PolicyError:
                    called = False
            echoes = [s for s in statuses if s.name == "echo"]
            assert len(echoes) == len([n for n, _ in STATES[current] if n == "echo"])
            assert len({s.state for s in echoes}) == 1  # every entry of the name judged alike
            run_ok = all(s.state == "pinned" for s in statuses)
            assert check_ok == run_ok == called == ("echo" in offered), (locked, current)
            agreed += check_ok
    # one/one, two/two, and a duplicate pinned as a whole, listed in either order (2 x 2)
    assert agreed == 6
