"""Tool lists that do not go stale, against a real SDK `MCPServer` over HTTP (growing_http_server.py).

- 2026-07-28: the client keeps a `subscriptions/listen` stream; when the server restarts, the dead
  stream drops the cache and is reopened with backoff, and a tool added after the restart is
  announced on the reopened stream.
- 2025-11-25: the same server advertises no `tools.listChanged` and announces nothing, so the
  cached list expires after `tools_ttl`; `list_tools(refresh=True)` always asks; an agent's next
  run sees the new tool too.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _growing import Growing, free_port

from toolbridge.agent import Agent, ScriptedModel
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import HttpClient
from toolbridge.clients._changes import LISTEN_RETRY_FIRST
from toolbridge.errors import ConfigError


def names(tools: list[object]) -> set[str]:
    return {getattr(tool, "name", "") for tool in tools}


async def wait_for(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what}: not within {seconds} s")


async def test_a_dead_change_stream_drops_the_cache_and_is_reopened(growing: Growing) -> None:
    async with HttpClient(growing.url, timeout=20, tools_ttl=None) as client:
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        assert client.protocol_version == "2026-07-28"
        conn = client._conn
        assert conn is not None and conn.channel.live and conn.channel.epoch == 1
        generation = client.generation
        await client.call_tool("add_tool", {"name": "before"})
        await wait_for(lambda: client.generation > generation, 5, "the change event")
        assert names(await client.list_tools()) == {"echo", "add_tool", "before"}

        generation = client.generation
        growing.restart_in_place()  # every stream dropped; a fresh server without "before"
        await wait_for(lambda: client.generation > generation, 10, "noticing the dead stream")
        # Not trusted while the stream is down: the listing asks the restarted server.
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        # Reopened with backoff on the same connection (not a new one), and live again.
        await wait_for(
            lambda: conn.channel.epoch == 2 and conn.channel.live, 10 + LISTEN_RETRY_FIRST, "reopen"
        )
        assert client._conn is conn

        generation = client.generation
        await client.call_tool("add_tool", {"name": "after"})
        # Announced on the reopened stream: the generation moves with no listing asked for.
        await wait_for(lambda: client.generation > generation, 5, "the change event after the restart")
        assert names(await client.list_tools()) == {"echo", "add_tool", "after"}
        assert (await client.call_tool("after", {}))["content"][0]["text"] == "I am after"


async def test_a_server_process_restarted_mid_session(growing: Growing) -> None:
    async with HttpClient(growing.url, timeout=20, tools_ttl=None) as client:
        await client.call_tool("add_tool", {"name": "before"})
        assert "before" in names(await client.list_tools())
        generation = client.generation
        growing.kill()
        growing.start()  # a new process on the same port
        await wait_for(lambda: client.generation > generation, 10, "noticing the restart")
        assert names(await client.list_tools()) == {"echo", "add_tool"}  # the stale tool is gone
        await client.call_tool("add_tool", {"name": "after"})
        # Announced on a reopened stream, or asked for while the stream is down: listed either way.
        deadline = time.monotonic() + 5
        while "after" not in names(await client.list_tools()):
            assert time.monotonic() < deadline, "a tool added after the restart is never listed"
            await asyncio.sleep(0.05)
        assert names(await client.list_tools()) == {"echo", "add_tool", "after"}


async def test_no_change_channel_means_the_cache_expires(growing: Growing) -> None:
    ttl = 3.0
    async with HttpClient(growing.url, timeout=20, mode="legacy", tools_ttl=ttl) as client:
        assert names(await client.list_tools()) == {"echo", "add_tool"}
        assert client.protocol_version == "2025-11-25"
        listed_at = time.monotonic()
        generation = client.generation
        await client.call_tool("add_tool", {"name": "quiet"})  # no notification on this connection
        cached = names(await client.list_tools())
        assert time.monotonic() - listed_at < ttl
        assert cached == {"echo", "add_tool"}  # within the TTL the cache answers (documented)
        assert client.generation == generation
        assert "quiet" in names(await client.list_tools(refresh=True))  # refresh always asks
        assert client.generation > generation  # and the list it was given changed

        generation = client.generation
        await client.call_tool("add_tool", {"name": "quieter"})
        await wait_for(lambda: client.generation > generation, ttl + 2, "the cache expiring")
        assert names(await client.list_tools()) == {"echo", "add_tool", "quiet", "quieter"}


async def test_an_agent_sees_a_tool_added_without_notification_on_its_next_run(growing: Growing) -> None:
    ttl = 1.0
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "add_tool", "arguments": {"name": "late"}}]},
            {"text": "added"},
            {"tool_calls": [{"name": "late", "arguments": {}}]},
            {"text": "done"},
        ]
    )
    client = HttpClient(growing.url, timeout=20, mode="legacy", tools_ttl=ttl)
    async with McpToolProvider(client) as provider:
        agent = Agent(model, [provider])
        assert (await agent.run("add a tool")).text == "added"
        assert {t.name for t in model.requests[0].tools} == {"echo", "add_tool"}
        await asyncio.sleep(ttl + 0.2)
        result = await agent.run("use it")
        assert result.text == "done"
        assert "late" in {t.name for t in model.requests[2].tools}
        assert "I am late" in str(model.requests[3].messages[-1].content)


@pytest.mark.parametrize("ttl", [-1, float("nan"), "30"])
def test_tools_ttl_is_checked(ttl: object) -> None:
    with pytest.raises(ConfigError, match="tools_ttl"):
        HttpClient("http://127.0.0.1:1/mcp", tools_ttl=ttl)  # type: ignore[arg-type]


async def test_a_flapping_stream_is_reopened_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolbridge.clients import _changes

    monkeypatch.setattr(_changes, "LISTEN_RETRY_FIRST", 0.05)
    monkeypatch.setattr(_changes, "LISTEN_RETRY_MAX", 0.2)
    server = Growing(free_port(), options=("--flap",))  # every listen stream dies once acknowledged
    server.start()
    try:
        async with HttpClient(server.url, timeout=20, tools_ttl=60) as client:
            assert names(await client.list_tools()) == {"echo", "add_tool"}
            conn = client._conn
            assert conn is not None
            await wait_for(lambda: conn.channel.gave_up, 15, "giving up on the flapping stream")
            assert not conn.channel.live
            assert conn.channel.epoch == 1 + _changes.LISTEN_RETRY_ATTEMPTS  # opened, then 8 reopens
            generation = client.generation
            await asyncio.sleep(0.5)
            assert client.generation == generation  # nothing runs any more
            # Without a channel the TTL rule applies, and the client keeps serving.
            await client.call_tool("add_tool", {"name": "late"})
            assert "late" in names(await client.list_tools(refresh=True))
            assert client._conn is conn
    finally:
        server.kill()


async def test_closing_while_the_stream_is_being_reopened_is_prompt(growing: Growing) -> None:
    client = HttpClient(growing.url, timeout=20, tools_ttl=None)
    await client.list_tools()
    conn = client._conn
    assert conn is not None and conn.channel.live and conn.task is not None
    growing.kill()  # the stream dies; the reopen waits in its backoff or fails
    await wait_for(lambda: not conn.channel.live, 10, "noticing the dead stream")
    started = time.monotonic()
    await client.aclose()
    assert time.monotonic() - started < 3
    assert conn.task.done() and conn.done.is_set()  # the owner, and its listen task, are gone
    pending = [t for t in asyncio.all_tasks() if t.get_name().startswith("toolbridge-connection")]
    assert not [t for t in pending if not t.done()]
