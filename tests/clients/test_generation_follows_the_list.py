"""`generation` grows whenever the list a caller is given changed, however it was refreshed.

Against a real SDK `MCPServer` over HTTP whose tools grow (growing_http_server.py): a cached list
refreshed inside `list_tools()` after its `tools_ttl` expired (nobody read `generation` in
between), a `list_changed` announcement, and a reconnect to a restarted server. Each time, a
consumer that caches by generation (an agent's catalog) is given the new list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from _growing import Growing

from toolbridge.agent import Agent, ScriptedModel
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import HttpClient


def names(tools: list[object]) -> set[str]:
    return {getattr(tool, "name", "") for tool in tools}


async def wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        await asyncio.sleep(0.02)


async def test_a_ttl_refresh_inside_list_tools_grows_the_generation(growing: Growing) -> None:
    ttl = 0.3
    async with HttpClient(growing.url, timeout=20, mode="legacy", tools_ttl=ttl) as client:
        generation = client.generation
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        await client.call_tool("add_tool", {"name": "quiet"})  # announced to nobody
        await asyncio.sleep(ttl + 0.2)  # the cache expires; nothing reads `generation` meanwhile
        assert "quiet" in names(await client.list_tools())  # refreshed inside list_tools()
        assert client.generation > generation
        settled = client.generation
        assert "quiet" in names(await client.list_tools(refresh=True))  # the same list again
        assert client.generation == settled  # an unchanged list is no change


async def test_an_agent_sees_a_list_another_caller_refreshed(growing: Growing) -> None:
    ttl = 0.3
    model = ScriptedModel(["first", "second"])
    client = HttpClient(growing.url, timeout=20, mode="legacy", tools_ttl=ttl)
    async with McpToolProvider(client) as provider:
        agent = Agent(model, [provider])
        assert (await agent.run("one")).text == "first"
        assert {t.name for t in model.requests[0].tools} == {"echo", "add_tool"}
        await client.call_tool("add_tool", {"name": "late"})
        await asyncio.sleep(ttl + 0.2)
        assert "late" in names(await client.list_tools())  # another caller refreshes the cache
        assert (await agent.run("two")).text == "second"
        assert "late" in {t.name for t in model.requests[1].tools}  # not the catalog's old list


async def test_list_changed_grows_the_generation(growing: Growing) -> None:
    async with HttpClient(growing.url, timeout=20, tools_ttl=None) as client:
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        assert client.protocol_version == "2026-07-28"
        generation = client.generation
        await client.call_tool("add_tool", {"name": "announced"})
        await wait_for(lambda: client.generation > generation, 10, "the list_changed announcement")
        assert "announced" in names(await client.list_tools())


async def test_a_reconnect_to_a_changed_server_grows_the_generation(growing: Growing) -> None:
    async with HttpClient(growing.url, timeout=20, mode="legacy", tools_ttl=None) as client:
        await client.call_tool("add_tool", {"name": "before"})
        assert "before" in names(await client.list_tools(refresh=True))
        generation = client.generation
        growing.kill()
        growing.start()  # a new process: its list has no "before"
        assert (await client.call_tool("echo", {"text": "hi"}))["content"][0]["text"] == "hi"
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        assert client.generation > generation
