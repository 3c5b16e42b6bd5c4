"""What a client hears outside its own calls: list changes (both eras, `subscriptions/listen` in the
2026-07-28 era), upstream resource updates for what it subscribed to, and upstream log messages
at the level it asked for, namespaced by upstream. Real gateway process, real upstream, the
official SDK client."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gw_helpers import gateway_http, gateway_stdio, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

from toolbridge.gateway._events import UPSTREAM_BURST, UPSTREAM_PER_SECOND

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

GRANTS = "tool:up_tick, tool:up_mutate, tool:up_storm, tool:up_junknotes, tool:up_echo, effect:read"
ME = f"""clients:
  - name: me
    local: true
    permissions: {{ allow: [{GRANTS}, "resources:*", "logs:up_"] }}
"""
BINDING = "    effects: read\n"
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
TWO = f"""clients:
  - name: alice
    token: "${{{{ secrets.aliceToken }}}}"
    permissions: {{ allow: [{GRANTS}, "resources:*", "logs:*"] }}
  - name: bob
    token: "${{{{ secrets.bobToken }}}}"
    permissions: {{ allow: [tool:up_echo, effect:read] }}
"""
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}


def events_of(tmp_path: Path) -> list[str]:
    """What the upstream was asked to do besides calls (`sub:URI`, `unsub:URI`, `level:LEVEL`)."""
    log = tmp_path / "state" / "events.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


class Heard:
    """Notifications a client received, by kind."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        self.items.append(message)
        self.event.set()
        self.event = anyio.Event()

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.items if isinstance(m, kind)]

    async def until(self, check: Any, within: float = 20) -> None:
        with anyio.fail_after(within):
            while not check():
                await self.event.wait()


@asynccontextmanager
async def http_client(url: str, token: str, mode: str, heard: Heard | None = None) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(
            streamable_http_client(url, http_client=http),  # type: ignore[arg-type]
            mode=mode,
            message_handler=heard,
        ) as client,
    ):
        yield client


async def test_handshake_era_updates_and_logs_over_stdio(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    heard = Heard()
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        caps = client.server_capabilities
        assert caps.resources is not None and caps.resources.subscribe
        await client.set_logging_level("info")
        await client.subscribe_resource("test://readme")
        result = await client.call_tool("up_tick", {})
        assert not result.is_error

        def complete() -> bool:
            logs = heard.of(types.LoggingMessageNotification)
            return len(logs) >= 2 and bool(heard.of(types.ResourceListChangedNotification))

        await heard.until(lambda: bool(heard.of(types.ResourceUpdatedNotification)) and complete())
        await anyio.sleep(0.5)  # nothing else is on its way
        updates = [str(m.params.uri) for m in heard.of(types.ResourceUpdatedNotification)]
        assert updates == ["test://readme"], "only the subscribed URI, once"
        logs = [m.params for m in heard.of(types.LoggingMessageNotification)]
        assert [p.level for p in logs] == ["info", "error"], "debug is below the level asked for"
        assert {p.logger for p in logs} == {"Up/ticker"}, "namespaced by the upstream"
        assert logs[0].data == {"n": 1, "text": "an info line"}
        assert logs[1].data == "red error line", "terminal escapes and bidi controls removed"

        await client.unsubscribe_resource("test://readme")
        heard.items.clear()
        await client.call_tool("up_tick", {})
        await heard.until(lambda: len(heard.of(types.LoggingMessageNotification)) >= 2)
        await anyio.sleep(0.5)
        assert not heard.of(types.ResourceUpdatedNotification), "unsubscribed: no update"
    calls = events_of(tmp_path)
    assert "level:info" in calls, "the upstream was asked for the level"
    assert calls.count("sub:test://readme") == 1 and calls.count("unsub:test://readme") == 1


async def test_2026_era_listen_over_stdio(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest, "auto") as client:
        assert client.protocol_version == "2026-07-28"
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed
        assert caps.resources is not None and caps.resources.subscribe
        before = {t.name: t.description for t in (await client.list_tools()).tools}
        events: list[Any] = []
        async with client.listen(
            tools_list_changed=True, resource_subscriptions=["test://readme", "test://nowhere"]
        ) as sub:
            assert sub.honored.tools_list_changed
            await client.call_tool("up_tick", {})
            await client.call_tool("up_mutate", {})
            with anyio.fail_after(20):
                async for event in sub:
                    events.append(event)
                    if ToolsListChanged() in events and ResourceUpdated("test://readme") in events:
                        break
        after = {t.name: t.description for t in (await client.list_tools()).tools}
        assert "ssh" in (after["up_echo"] or "") and "ssh" not in (before["up_echo"] or "")
        assert ResourceUpdated("test://other") not in events
    calls = events_of(tmp_path)
    assert "sub:test://readme" in calls and "unsub:test://readme" in calls, "held while listening"


@pytest.mark.parametrize("stateless", [False, True])
async def test_2026_era_listen_over_http(tmp_path: Path, stateless: bool) -> None:
    manifest = upstream_manifest(tmp_path, clients=TWO, binding=BINDING)
    extra = ("--stateless",) if stateless else ()
    with gateway_http(manifest, *extra, env=ENV) as url:
        async with (
            http_client(url, ALICE, "auto") as alice,
            http_client(url, BOB, "auto") as bob,
        ):
            assert alice.protocol_version == "2026-07-28"
            got: dict[str, list[Any]] = {"alice": [], "bob": []}

            async def hear(who: str, client: Client, ready: anyio.Event) -> None:
                async with client.listen(
                    tools_list_changed=True, resource_subscriptions=["test://readme"]
                ) as sub:
                    got[who].append(sub.honored)
                    ready.set()
                    async for event in sub:
                        got[who].append(event)

            async with anyio.create_task_group() as tg:
                ready = [anyio.Event(), anyio.Event()]
                tg.start_soon(hear, "alice", alice, ready[0])
                tg.start_soon(hear, "bob", bob, ready[1])
                with anyio.fail_after(20):
                    await ready[0].wait()
                    await ready[1].wait()
                await alice.call_tool("up_tick", {})
                await alice.call_tool("up_mutate", {})
                with anyio.fail_after(20):
                    while (  # noqa: ASYNC110
                        ToolsListChanged() not in got["bob"]
                        or ResourceUpdated("test://readme") not in got["alice"]
                    ):
                        await anyio.sleep(0.05)
                await anyio.sleep(0.5)
                tg.cancel_scope.cancel()
            # bob may not read resources: his stream was not given the URI, and hears no update
            assert got["alice"][0].resource_subscriptions == ["test://readme"]
            assert not got["bob"][0].resource_subscriptions
            assert ResourceUpdated("test://readme") not in got["bob"]


async def test_handshake_era_http_two_identities(tmp_path: Path) -> None:
    """Only the subscriber hears an update; only an identity holding `logs:` hears logs."""
    manifest = upstream_manifest(tmp_path, clients=TWO, binding=BINDING)
    alice_heard, bob_heard = Heard(), Heard()
    with gateway_http(manifest, env=ENV) as url:
        async with (
            http_client(url, ALICE, "legacy", alice_heard) as alice,
            http_client(url, BOB, "legacy", bob_heard) as bob,
        ):
            await alice.set_logging_level("debug")
            await bob.set_logging_level("debug")
            await alice.subscribe_resource("test://readme")
            await bob.list_tools()
            await anyio.sleep(0.5)  # the GET streams are open
            await alice.call_tool("up_tick", {})
            await alice.call_tool("up_mutate", {})

            def alice_done() -> bool:
                return (
                    len(alice_heard.of(types.LoggingMessageNotification)) >= 3
                    and bool(alice_heard.of(types.ResourceUpdatedNotification))
                    and bool(alice_heard.of(types.ToolListChangedNotification))
                )

            await alice_heard.until(alice_done)
            await bob_heard.until(lambda: bool(bob_heard.of(types.ToolListChangedNotification)))
            await anyio.sleep(0.5)
            assert not bob_heard.of(types.ResourceUpdatedNotification)
            assert not bob_heard.of(types.LoggingMessageNotification), "bob holds no logs: grant"


MODERN = Path(__file__).with_name("modern_upstream.py")


def modern_manifest(tmp_path: Path) -> Path:
    """A gateway in front of a 2026-07-28 upstream (`modern_upstream.py`, prefix `mo_`)."""
    path = tmp_path / "modern.yaml"
    path.write_text(
        f"""kind: Gateway
metadata: {{ name: ModernGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Mo
    prefix: mo_
    effects: none
---
kind: Runtime
metadata: {{ name: Policy }}
permissions: {{ allow: [tool:mo_touch, "resources:*"] }}
---
kind: Mcp.StdioClient
metadata: {{ name: MoMcp }}
command: {sys.executable}
args: [{json.dumps(str(MODERN))}]
---
kind: AiMcp.ToolProvider
metadata: {{ name: Mo }}
client: !ref MoMcp
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_2026_era_upstreams_updates_reach_subscribers(tmp_path: Path, mode: str) -> None:
    """The gateway holds a `subscriptions/listen` stream on a 2026-07-28 upstream for each URI
    its clients subscribed to; an update of another URI reaches nobody."""
    manifest = modern_manifest(tmp_path)
    heard = Heard()
    async with gateway_stdio(manifest, mode, message_handler=heard) as client:
        if mode == "legacy":
            await client.subscribe_resource("note://one")
            await client.call_tool("mo_touch", {"uri": "note://two"})
            await client.call_tool("mo_touch", {"uri": "note://one"})
            await heard.until(lambda: bool(heard.of(types.ResourceUpdatedNotification)))
            await anyio.sleep(0.5)
            assert [str(m.params.uri) for m in heard.of(types.ResourceUpdatedNotification)] == ["note://one"]
            await client.unsubscribe_resource("note://one")
            heard.items.clear()
            await client.call_tool("mo_touch", {"uri": "note://one"})
            await anyio.sleep(1.0)
            assert not heard.of(types.ResourceUpdatedNotification), "let go: the upstream stream ended"
        else:
            async with client.listen(resource_subscriptions=["note://one"]) as sub:
                assert sub.honored.resource_subscriptions == ["note://one"]
                await client.call_tool("mo_touch", {"uri": "note://two"})
                await client.call_tool("mo_touch", {"uri": "note://one"})
                with anyio.fail_after(20):
                    async for event in sub:
                        assert event == ResourceUpdated("note://one")
                        break


async def test_subscriptions_are_renewed_when_the_upstream_restarts(tmp_path: Path) -> None:
    """The upstream crashes; the gateway restarts it for the next call, subscribes the new
    process to what its clients still hold and sets its logging level, so updates keep coming."""
    grants = f"{GRANTS}, tool:up_crash"
    clients = ME.replace(GRANTS, grants)
    manifest = upstream_manifest(tmp_path, clients=clients, binding=BINDING)
    heard = Heard()
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        await client.set_logging_level("info")
        await client.subscribe_resource("test://readme")
        crashed = await client.call_tool("up_crash", {})
        assert crashed.is_error
        for _ in range(3):  # the first call restarts the upstream; the renewal races its update
            await client.call_tool("up_tick", {})
            with anyio.move_on_after(3):
                await heard.until(lambda: bool(heard.of(types.ResourceUpdatedNotification)))
            if heard.of(types.ResourceUpdatedNotification):
                break
        assert [str(m.params.uri) for m in heard.of(types.ResourceUpdatedNotification)][:1] == [
            "test://readme"
        ]
    assert events_of(tmp_path).count("sub:test://readme") == 2, "subscribed again after the restart"
    assert events_of(tmp_path).count("level:info") == 2, "and its logging level set again"


@pytest.mark.parametrize("level", ["info", None])
async def test_2026_era_calls_hear_upstream_logs_they_opted_into(tmp_path: Path, level: str | None) -> None:
    """A 2026-07-28 call that carries a log level in `_meta` hears the upstream's log messages
    sent while it is in flight (namespaced, rate-limited); one without it hears none."""
    grants = f"{GRANTS}, tool:up_flood"
    manifest = upstream_manifest(tmp_path, clients=ME.replace(GRANTS, grants), binding=BINDING)
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with gateway_stdio(manifest, "auto", logging_callback=on_log, log_level=level) as client:
        assert client.protocol_version == "2026-07-28"
        started = time.monotonic()
        result = await client.call_tool("up_flood", {})  # 3000 log messages during the call
        elapsed = time.monotonic() - started
        assert not result.is_error
    if level is None:
        assert logs == []
    else:
        assert logs and {p.logger for p in logs} == {"Up"}
        assert len(logs) <= UPSTREAM_BURST + UPSTREAM_PER_SECOND * (elapsed + 1), "rate-limited"
        assert all(isinstance(p.data, str) and p.data.startswith("log line") for p in logs)
