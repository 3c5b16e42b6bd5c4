"""The agent against real MCP servers (server-filesystem, server-everything) with a ScriptedModel."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import anyio
import pytest

from toolbridge.agent import Agent, Message, ModelRequest, ScriptedModel
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.content import ImagePart, TextPart
from toolbridge.errors import AgentError
from toolbridge.functions import FunctionTools


def tool_texts(request: ModelRequest) -> list[str]:
    out = []
    for message in request.messages:
        if message.role == "tool":
            assert not isinstance(message.content, str)
            out.append("\n".join(p.text for p in message.content if isinstance(p, TextPart)))
    return out


def count_lines(text: str) -> int:
    """Count the lines of a text.

    Args:
        text: the text.
    """
    return len(text.splitlines())


async def test_multi_step_across_filesystem_and_function_tools(
    fs_client: StdioClient, data_dir: Path
) -> None:
    summary = data_dir / "summary.txt"
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "fs_list_directory", "arguments": {"path": str(data_dir)}}]},
            {
                "tool_calls": [
                    {"name": "fs_read_text_file", "arguments": {"path": str(data_dir / "notes.txt")}}
                ]
            },
            {"tool_calls": [{"name": "count_lines", "arguments": {"text": "alpha\nbeta\ngamma\n"}}]},
            {
                "tool_calls": [
                    {
                        "name": "fs_write_file",
                        "arguments": {"path": str(summary), "content": "notes.txt: 3 lines\n"},
                    }
                ]
            },
            {"text": "Wrote summary.txt"},
        ]
    )
    agent = Agent(
        model,
        [
            {
                "provider": McpToolProvider(fs_client),
                "prefix": "fs_",
                "include": ["list_directory", "read_text_file", "write_file"],
            },
            FunctionTools([count_lines]),
        ],
    )
    result = await agent.run("Summarize the notes.")
    assert result.text == "Wrote summary.txt"
    assert sorted(t.name for t in model.requests[0].tools) == [
        "count_lines",
        "fs_list_directory",
        "fs_read_text_file",
        "fs_write_file",
    ]
    listing, content, lines, written = tool_texts(model.requests[4])
    assert "[FILE] notes.txt" in listing and "[FILE] todo.md" in listing
    assert json.loads(content) == {"content": "alpha\nbeta\ngamma\n"}  # structured content, as JSON text
    assert lines == "3"
    assert "Successfully wrote" in written
    assert summary.read_text() == "notes.txt: 3 lines\n"
    assert not any(r.error for s in result.steps for r in s.tool_results)


async def test_exclude_and_collision_with_an_mcp_server(fs_client: StdioClient) -> None:
    provider = McpToolProvider(fs_client)
    model = ScriptedModel([{"text": "ok"}])
    await Agent(model, [{"provider": provider, "exclude": ["write_file", "edit_file", "move_file"]}]).run(
        "go"
    )
    names = [t.name for t in model.requests[0].tools]
    assert "read_text_file" in names and "write_file" not in names and "move_file" not in names

    def read_text_file(path: str) -> str:
        """A native tool with the same name."""
        return path

    with pytest.raises(AgentError) as info:
        await Agent(
            ScriptedModel([{"text": "x"}]), [provider, FunctionTools([read_text_file], name="native")]
        ).run("go")
    assert info.value.code == "ERR_AGENT_TOOL_COLLISION"
    assert '"read_text_file"' in info.value.message and "'native'" in info.value.message


async def test_server_error_text_reaches_the_next_model_turn(fs_client: StdioClient, data_dir: Path) -> None:
    missing = data_dir / "missing.txt"
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": str(missing)}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": str(data_dir / "todo.md")}}]},
            {"text": "recovered"},
        ]
    )
    result = await Agent(model, [McpToolProvider(fs_client)]).run("read it")
    failure = result.steps[0].tool_results[0]
    assert failure.error and failure.error_code == "ERR_MCP_TOOL_ERROR"
    fed_back = tool_texts(model.requests[1])[0]
    assert fed_back.startswith("Error: ") and "ENOENT" in fed_back and "missing.txt" in fed_back
    assert json.loads(tool_texts(model.requests[2])[1]) == {"content": "- write tests\n"}
    assert result.text == "recovered"


async def test_image_tool_result_reaches_the_model_as_an_image(everything_client: StdioClient) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "get-tiny-image"}]}, {"text": "a tiny image"}])
    await Agent(model, [McpToolProvider(everything_client)]).run("show me")
    (message,) = [m for m in model.requests[1].messages if m.role == "tool"]
    assert isinstance(message, Message) and not isinstance(message.content, str)
    images = [p for p in message.content if isinstance(p, ImagePart)]
    assert len(images) == 1 and images[0].media_type == "image/png" and len(images[0].data) > 100

    blind = ScriptedModel(
        [{"tool_calls": [{"name": "get-tiny-image"}]}, {"text": "x"}], supports_images=False
    )
    await Agent(blind, [McpToolProvider(everything_client)]).run("show me")
    assert "[image: image/png, " in tool_texts(blind.requests[1])[0]


async def test_two_slow_server_calls_run_in_parallel(everything_client: StdioClient) -> None:
    provider = McpToolProvider(everything_client)
    await provider.list_tools()  # connect before timing
    one_call = {"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}}
    start = time.monotonic()
    await Agent(ScriptedModel([{"tool_calls": [one_call]}, {"text": "one done"}]), [provider]).run("go")
    single = time.monotonic() - start
    model = ScriptedModel([{"tool_calls": [one_call, one_call]}, {"text": "both done"}])
    start = time.monotonic()
    result = await Agent(model, [provider]).run("go")
    elapsed = time.monotonic() - start
    assert elapsed < 1.6 * single, (elapsed, single)
    assert [r.error for r in result.steps[0].tool_results] == [False, False]


async def test_cancellation_mid_run_leaves_no_call_or_task(everything_client: StdioClient) -> None:
    provider = McpToolProvider(everything_client)
    await provider.list_tools()
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "trigger-long-running-operation", "arguments": {"duration": 20, "steps": 20}}
                ]
            },
            {"text": "never"},
        ]
    )
    agent = Agent(model, [provider])
    before = set(asyncio.all_tasks())
    start = time.monotonic()
    with anyio.move_on_after(0.7):
        await agent.run("go")
    assert time.monotonic() - start < 2
    await anyio.sleep(0.1)
    assert set(asyncio.all_tasks()) <= before
    # The connection is still healthy and not busy with the abandoned operation.
    with anyio.fail_after(3):
        echoed = await everything_client.call_tool("echo", {"message": "still here"})
    assert "still here" in echoed["content"][0]["text"]
    assert model.remaining == 1


async def test_tools_relisted_after_a_server_list_change() -> None:
    from fixtures.inproc_servers import changing_server
    from toolbridge.clients import InProcessClient

    async with InProcessClient(changing_server()) as client:
        provider = McpToolProvider(client)
        model = ScriptedModel(
            [
                {"tool_calls": [{"name": "add_tool", "arguments": {"name": "newcomer"}}]},
                {"text": "added"},
                {"tool_calls": [{"name": "newcomer"}]},
                {"text": "called"},
            ]
        )
        agent = Agent(model, [provider])
        generation = provider.generation
        await agent.run("add a tool")
        assert "newcomer" not in [t.name for t in model.requests[0].tools]
        for _ in range(200):  # the notification travels on its own; give it a moment
            if provider.generation != generation:
                break
            await anyio.sleep(0.01)
        assert provider.generation != generation
        result = await agent.run("call it")
        assert "newcomer" in [t.name for t in model.requests[2].tools]
        assert result.steps[0].tool_results[0].content == {"result": "I am newcomer"}
