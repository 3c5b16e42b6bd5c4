"""The runtime against real MCP servers (server-filesystem, server-everything) via the official SDK client."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pydantic
from mcp import Client, StdioServerParameters
from rt_helpers import Empty, Message, WriteIn, call, exists, read_text, scripted

from toolbridge.agent import Agent
from toolbridge.runtime import create_runtime, define_mcp_tool

WRITE_GRANTS = ["model:scripted", "tool:fs.write_file", "fs:write", "effect:write"]


def write_tool(client: Client) -> object:
    return define_mcp_tool(
        id="fs.write_file",
        version="1",
        description="Write a text file.",
        input=WriteIn,
        output=Message,
        effects="write",
        capabilities=["fs:write"],
        remote_name="write_file",
        client=client,
        timeout_ms=10_000,
    )


async def test_write_without_permission_is_blocked_and_nothing_is_written(
    fs_params: StdioServerParameters, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    async with Client(fs_params) as fs_client:
        await _without_each_grant(fs_client, target)


async def _without_each_grant(fs_client: Client, target: Path) -> None:
    for missing in WRITE_GRANTS[1:]:
        runtime = create_runtime(permissions={"allow": [g for g in WRITE_GRANTS if g != missing]})
        model = scripted(call("fs_write_file", path=str(target), content="hello"), {"text": "done"})
        agent = Agent(model, tools=[write_tool(fs_client)])
        result = await runtime.run(agent, "write it")
        assert (result.outcome, result.error_code) == ("blocked", "PERMISSION_DENIED"), missing
        assert missing in (result.error_message or "")
        assert not exists(target)
        (evidence,) = runtime.inspect(result.run_id).calls
        assert evidence.request_sent is False and evidence.outcome == "not_started"


async def test_write_with_permission_succeeds(fs_params: StdioServerParameters, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    model = scripted(call("fs_write_file", path=str(target), content="hello"), {"text": "done"})
    runtime = create_runtime(permissions={"allow": WRITE_GRANTS})
    async with Client(fs_params) as fs_client:
        result = await runtime.run(Agent(model, tools=[write_tool(fs_client)]), "write it")
    assert result.outcome == "succeeded", result
    assert result.output == "done"
    assert read_text(target) == "hello"
    (evidence,) = runtime.inspect(result.run_id).calls
    assert evidence.request_sent and evidence.response_received and evidence.outcome == "succeeded"
    assert evidence.tool_id == "fs.write_file" and evidence.tool_version == "1"
    assert len(evidence.args_sha256) == 64
    # the model saw the validated structured content
    tool_message = model.requests[1].messages[-1]
    assert "Successfully wrote" in tool_message.content[0].text


class LongIn(pydantic.BaseModel):
    duration: float
    steps: int


async def _long_running(client: Client, effects: str) -> tuple[str, str | None, object]:
    tool = define_mcp_tool(
        id="ops.long",
        version="1",
        description="A long operation.",
        input=LongIn,
        output=Empty,
        effects=effects,
        capabilities=[],
        remote_name="trigger-long-running-operation",
        client=client,
        timeout_ms=300,
    )
    model = scripted(call("ops_long", duration=5, steps=5), {"text": "never"})
    runtime = create_runtime(
        permissions={"allow": ["model:scripted", "tool:ops.long", f"effect:{effects}"]},
    )
    started = time.monotonic()
    result = await runtime.run(Agent(model, tools=[tool]), "go")
    assert time.monotonic() - started < 3
    return result.outcome, result.error_code, runtime.inspect(result.run_id)


async def test_timeout_of_a_write_tool_is_outcome_unknown(everything_params: StdioServerParameters) -> None:
    async with Client(everything_params) as everything_client:
        outcome, code, record = await _long_running(everything_client, "write")
    assert (outcome, code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    (evidence,) = record.calls  # type: ignore[attr-defined]
    assert evidence.request_sent and not evidence.response_received
    assert evidence.outcome == "outcome_unknown"


async def test_timeout_of_a_none_tool_fails(everything_params: StdioServerParameters) -> None:
    async with Client(everything_params) as everything_client:
        outcome, code, record = await _long_running(everything_client, "none")
        # the client is still usable: the cancelled call did not break the session
        echoed = await everything_client.call_tool("echo", {"message": "still here"})
    assert (outcome, code) == ("failed", "TIMEOUT")
    (evidence,) = record.calls  # type: ignore[attr-defined]
    assert evidence.request_sent and not evidence.response_received and evidence.outcome == "failed"
    assert "still here" in str(echoed.content)


class SlowIn(pydantic.BaseModel):
    seconds: float
    note: str


async def test_a_timed_out_call_is_cancelled_on_the_server(tmp_path: Path) -> None:
    note = tmp_path / "cancelled.txt"
    params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).parent / "rt_server.py")])
    async with Client(params) as client:
        tool = define_mcp_tool(
            id="ops.slow",
            version="1",
            description="",
            input=SlowIn,
            output=Message,
            effects="write",
            capabilities=[],
            remote_name="slow",
            client=client,
            timeout_ms=500,
        )
        runtime = create_runtime(permissions={"allow": ["model:scripted", "tool:ops.slow", "effect:write"]})
        model = scripted(call("ops_slow", seconds=30, note=str(note)))
        result = await runtime.run(Agent(model, tools=[tool]), "go")
        assert result.outcome == "outcome_unknown"
        with anyio.fail_after(5):
            while not exists(note):  # noqa: ASYNC110 - another process writes the file
                await anyio.sleep(0.05)
    assert read_text(note) == "cancelled"
