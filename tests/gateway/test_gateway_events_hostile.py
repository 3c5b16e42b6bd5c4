"""Hostile input to the gateway's notifications: an upstream flooding updates and logs, junk
notifications, and a client that never reads (its outbox is bounded, the others still hear)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, gateway_stdio, stdio_params, upstream_manifest
from mcp.shared.message import SessionMessage
from test_gateway_events import BINDING, ME, Heard, events_of

from toolbridge.gateway import _events, create_server, open_gateway
from toolbridge.gateway._events import (
    LISTEN_HOLD_S,
    LOG_DATA_LIMIT,
    MAX_HELD_PER_IDENTITY,
    MAX_LINKS_PER_IDENTITY,
    MAX_LISTEN_PER_IDENTITY,
    MAX_SUBSCRIPTIONS,
    MAX_URI_CHARS,
    OUTBOX_SIZE,
    SUBSCRIBE_TIMEOUT_S,
    UPSTREAM_BURST,
    UPSTREAM_PER_SECOND,
    EventHub,
)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def test_an_upstream_flood_is_cut_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    heard = Heard()
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        await client.set_logging_level("debug")
        await client.subscribe_resource("test://readme")
        started = time.monotonic()
        await client.call_tool("up_storm", {})  # 40 000 notifications, as fast as the upstream can
        await heard.until(lambda: len(heard.items) >= 50)
        # the gateway answers promptly in the middle of the flood
        for _ in range(5):
            with anyio.fail_after(5):
                echoed = await client.call_tool("up_echo", {"text": "still here"})
            assert echoed.content[0].text == "still here"  # type: ignore[union-attr]
            await anyio.sleep(0.2)
        elapsed = time.monotonic() - started
        budget = UPSTREAM_BURST + UPSTREAM_PER_SECOND * (elapsed + 1)
        assert len(heard.items) <= budget, f"{len(heard.items)} notifications passed in {elapsed:.1f}s"
        updates = heard.of(types.ResourceUpdatedNotification)
        logs = heard.of(types.LoggingMessageNotification)
        assert updates and logs and {m.params.logger for m in logs} == {"Up/storm"}


async def test_junk_notifications_are_dropped_and_what_follows_arrives(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    heard = Heard()
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        await client.set_logging_level("debug")
        await client.subscribe_resource("test://readme")
        await client.call_tool("up_junknotes", {})
        await heard.until(lambda: bool(heard.of(types.ResourceUpdatedNotification)))
        await anyio.sleep(0.5)
        assert [str(m.params.uri) for m in heard.of(types.ResourceUpdatedNotification)] == ["test://readme"]
        logs = [m.params for m in heard.of(types.LoggingMessageNotification)]
        # the 100 kB, 40-deep log message reached the client as bounded text; junk levels did not
        assert [p.level for p in logs] == ["error"]
        assert isinstance(logs[0].data, str) and len(logs[0].data) <= LOG_DATA_LIMIT + 60
        echoed = await client.call_tool("up_echo", {"text": "fine"})
        assert echoed.content[0].text == "fine"  # type: ignore[union-attr]


async def test_a_subscription_over_a_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    """Past the limits, resources/subscribe says which limit, not "resource not found"; the
    connection keeps working and what it holds keeps being delivered."""
    from mcp.shared.exceptions import MCPError

    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    heard = Heard()
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        await client.subscribe_resource("test://readme")
        for i in range(MAX_SUBSCRIPTIONS - 1):
            await client.subscribe_resource(f"test://many/{i}")
        with pytest.raises(MCPError) as over:
            await client.subscribe_resource("test://many/one-more")
        assert over.value.error.code == types.INVALID_REQUEST
        assert (
            f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per connection" in over.value.error.message
        )
        await client.unsubscribe_resource("test://many/0")
        await client.subscribe_resource("test://many/one-more")  # room again
        with pytest.raises(MCPError) as long_uri:
            await client.subscribe_resource("test://" + "x" * MAX_URI_CHARS)
        assert f"at most {MAX_URI_CHARS} characters" in long_uri.value.error.message
        assert "xxxxxxxx" not in long_uri.value.error.message  # the URI is not echoed back
        echoed = await client.call_tool("up_echo", {"text": "fine"})
        assert echoed.content[0].text == "fine"  # type: ignore[union-attr]


def _msg(data: dict[str, Any]) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(data))


async def test_a_client_that_never_reads_has_a_bounded_outbox(tmp_path: Path) -> None:
    """Two handshake-era connections on one gateway: one never reads what the gateway sends. Its
    outbox stays at `OUTBOX_SIZE`, the rest is dropped and counted, and the other one still hears."""
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    async with open_gateway(manifest) as gateway:
        server = create_server(gateway)
        hub = gateway.events
        got: list[Any] = []
        async with hub.running(), anyio.create_task_group() as tg:
            pairs = []
            for _ in range(2):
                to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](100)
                server_out, from_server = anyio.create_memory_object_stream[SessionMessage](4)
                pairs.append((to_server, from_server))
                tg.start_soon(server.run, server_in, server_out, server.create_initialization_options())

            async def read_all() -> None:
                async for message in pairs[1][1]:
                    got.append(message.message)

            tg.start_soon(read_all)
            for to_server, _ in pairs:
                await to_server.send(
                    _msg({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
                )
                await to_server.send(_msg({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                await to_server.send(
                    _msg(
                        {
                            "jsonrpc": "2.0",
                            "id": 2,
                            "method": "logging/setLevel",
                            "params": {"level": "debug"},
                        }
                    )
                )
            with anyio.fail_after(20):
                while len(hub._links) < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            identity = gateway.local_identity
            result = await gateway.core.call(identity, "up_storm", {})
            assert not result.is_error
            with anyio.fail_after(30):
                while hub.dropped == 0:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            stuck = next(link for link in hub._links.values() if link.dropped)
            assert stuck.recv.statistics().current_buffer_used <= OUTBOX_SIZE
            logs_before = sum(1 for m in got if getattr(m, "method", "") == "notifications/message")
            await anyio.sleep(1.0)
            logs_after = sum(1 for m in got if getattr(m, "method", "") == "notifications/message")
            assert logs_after > logs_before > 0, "the reading connection keeps hearing"
            others = [link for link in hub._links.values() if link is not stuck]
            assert others and others[0].dropped == 0
            tg.cancel_scope.cancel()


def test_a_stdio_client_that_never_reads_does_not_grow_the_gateway(tmp_path: Path) -> None:
    """A client that sends requests (and an upstream storm) but never reads its stdout: the
    gateway's memory stays bounded and it exits when the client closes its stdin."""
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    params = stdio_params(manifest)
    proc = subprocess.Popen(
        [TOOLBRIDGE, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=params.env,
    )
    assert proc.stdin is not None
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "test://readme"}},
    ]
    lines += [
        {
            "jsonrpc": "2.0",
            "id": 10 + i,
            "method": "tools/call",
            "params": {"name": "up_storm", "arguments": {}},
        }
        for i in range(3)
    ]
    try:
        for line in lines:
            proc.stdin.write(json.dumps(line).encode() + b"\n")
        proc.stdin.flush()
        peak = 0
        for _ in range(30):
            time.sleep(0.25)
            peak = max(peak, _rss_kb(proc.pid))
            assert proc.poll() is None, "the gateway died"
        assert peak < 400_000, f"the gateway grew to {peak} kB"
        proc.stdin.close()
        proc.wait(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def test_listen_streams_are_bounded_and_cleaned_up(tmp_path: Path) -> None:
    """A 2026-07-28 client opens listen streams for URIs it may and may not read, and junk URIs;
    only what it may read is honored, and the upstream is unsubscribed when the stream ends."""
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest, "auto") as client:
        uris = ["test://readme", "x" * 10_000, "\x1b[31m", *[f"test://n{i}" for i in range(300)]]
        async with client.listen(resource_subscriptions=uris) as sub:
            honored = sub.honored.resource_subscriptions or []
        assert "test://readme" in honored and "x" * 10_000 not in honored
        assert len(honored) <= 256
        async with client.listen(tools_list_changed=True) as sub:
            assert sub.honored.tools_list_changed
    calls = events_of(tmp_path)
    subs = [c for c in calls if c.startswith("sub:")]
    unsubs = [c for c in calls if c.startswith("unsub:")]
    assert sorted(s[4:] for s in subs) == sorted(u[6:] for u in unsubs), "every hold let go"


async def test_one_identity_cannot_take_every_listen_stream(tmp_path: Path) -> None:
    """alice opens as many listen streams as one identity may: her next one is refused with a
    clear error, bob still listens, and alice listens again once she closed one."""
    from contextlib import AsyncExitStack

    from gw_helpers import gateway_http
    from mcp.shared.exceptions import MCPError
    from test_gateway_events import ALICE, BOB, ENV, TWO, http_client

    manifest = upstream_manifest(tmp_path, clients=TWO, binding=BINDING)
    with gateway_http(manifest, env=ENV) as url:
        async with http_client(url, ALICE, "auto") as alice, http_client(url, BOB, "auto") as bob:
            with anyio.fail_after(60):
                async with AsyncExitStack() as streams:
                    for _ in range(MAX_LISTEN_PER_IDENTITY):
                        await streams.enter_async_context(alice.listen(tools_list_changed=True))
                    with pytest.raises(MCPError) as refused:
                        async with alice.listen(tools_list_changed=True):
                            pass
                    assert f"at most {MAX_LISTEN_PER_IDENTITY} listen streams" in str(refused.value)
                    async with bob.listen(tools_list_changed=True) as sub:  # bob is not starved
                        assert sub.honored.tools_list_changed
                    assert (await alice.call_tool("up_echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]
                await anyio.sleep(0.5)  # the streams closed: the slots are free again
                async with alice.listen(tools_list_changed=True) as sub:
                    assert sub.honored.tools_list_changed


async def test_a_hung_subscription_costs_a_bounded_wait(tmp_path: Path) -> None:
    """The upstream never answers `resources/subscribe` for some URIs: a listen asking for them is
    answered within `LISTEN_HOLD_S` (with what could be held), and the connection keeps serving."""
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest, "auto") as client:
        # The upstream started and answering first: the 5 s bound below is for calls made while
        # a listen is held, not for starting it on a loaded machine.
        with anyio.fail_after(60):
            await client.call_tool("up_echo", {"text": "warm"})
        started = time.monotonic()
        answered: list[float] = []

        async def meanwhile() -> None:
            while not answered:
                with anyio.fail_after(5):
                    echoed = await client.call_tool("up_echo", {"text": "still here"})
                assert echoed.content[0].text == "still here"  # type: ignore[union-attr]
                await anyio.sleep(0.5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(meanwhile)
            with anyio.fail_after(LISTEN_HOLD_S + 10):
                uris = ["test://hang-1", "test://hang-2", "test://readme"]
                async with client.listen(resource_subscriptions=uris) as sub:
                    answered.append(time.monotonic() - started)
                    honored = sub.honored.resource_subscriptions or []
        assert LISTEN_HOLD_S - 1 <= answered[0] <= LISTEN_HOLD_S + 5, answered
        assert "test://hang-1" not in honored and "test://hang-2" not in honored
    assert SUBSCRIBE_TIMEOUT_S < LISTEN_HOLD_S < 2 * SUBSCRIBE_TIMEOUT_S  # so the second hang is cut


class _Client:
    """Stands for an upstream client as far as the hub sees it (it taps the message handler)."""

    def _message_handler(self, conn: Any) -> Any:
        async def handle(message: Any) -> None:
            pass

        return handle


class _Src:
    """A source of the hub: a name, an upstream client, resources passed through."""

    def __init__(self, name: str, hub: EventHub | None = None) -> None:
        self.name, self.client, self.resources = name, _Client(), True
        if hub is not None:
            hub.tap(self.client, self)  # type: ignore[arg-type]


async def test_a_hung_upstream_delays_only_its_own_subscriptions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_events, "SUBSCRIBE_TIMEOUT_S", 1.0)
    hub = EventHub()
    hung, ok = _Src("hung"), _Src("ok")
    asked: list[tuple[str, str, bool]] = []

    async def upstream(client: Any, uri: str, subscribe: bool) -> None:
        asked.append(("hung" if client is hung.client else "ok", uri, subscribe))
        if client is hung.client:
            await anyio.sleep_forever()

    took: dict[str, tuple[bool, float]] = {}

    async def hold(name: str, holder: object, uri: str, src: _Src) -> None:
        started = time.monotonic()
        held = await hub.hold(holder, uri, [src], upstream, owner="x")
        took[name] = (held, time.monotonic() - started)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold, "hung", object(), "test://a", hung)
            await anyio.sleep(0.1)
            tg.start_soon(hold, "ok", object(), "test://b", ok)
    assert not took["hung"][0] and 0.9 < took["hung"][1] < 2, took  # refused after its timeout
    assert took["ok"][0] and took["ok"][1] < 0.5, took  # not held up by the other upstream's lock
    assert asked == [("hung", "test://a", True), ("ok", "test://b", True)]
    assert hub.held_by("x") == 1


async def test_an_identity_holds_a_bounded_number_of_subscriptions() -> None:
    hub = EventHub()
    src = _Src("up", hub)
    upstream_calls: list[bool] = []

    async def upstream(client: Any, uri: str, subscribe: bool) -> None:
        upstream_calls.append(subscribe)

    holders = [object() for _ in range(MAX_HELD_PER_IDENTITY // 256 + 1)]
    held = 0
    for holder in holders:  # many connections or streams of one identity
        for i in range(256):
            held += await hub.hold(holder, f"test://{id(holder)}/{i}", [src], upstream, owner="alice")
    assert held == MAX_HELD_PER_IDENTITY == hub.held_by("alice")
    assert await hub.hold(object(), "test://bob", [src], upstream, owner="bob")  # others still may
    await hub.let_go(holders[0], None, upstream)
    assert hub.held_by("alice") == MAX_HELD_PER_IDENTITY - 256
    assert await hub.hold(holders[-1], "test://again", [src], upstream, owner="alice")
    for holder in holders:
        await hub.let_go(holder, None, upstream)
    assert hub.held_by("alice") == 0
    assert upstream_calls.count(True) == MAX_HELD_PER_IDENTITY + 2  # alice's, bob's, "again"
    assert upstream_calls.count(False) == MAX_HELD_PER_IDENTITY + 1  # all of alice's let go


async def test_letting_go_on_a_hung_upstream_frees_the_count_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_events, "SUBSCRIBE_TIMEOUT_S", 0.3)
    hub = EventHub()
    src = _Src("up", hub)
    hang = {"now": False}
    unsubscribing: list[str] = []

    async def upstream(client: Any, uri: str, subscribe: bool) -> None:
        if not subscribe:
            unsubscribing.append(uri)
        if hang["now"]:
            await anyio.sleep_forever()

    holder = object()
    for i in range(5):
        assert await hub.hold(holder, f"test://{i}", [src], upstream, owner="alice")
    hang["now"] = True
    with anyio.move_on_after(0.5):  # cut short, as a caller's deadline would
        await hub.let_go(holder, None, upstream)
    assert hub.held_by("alice") == 0  # counted free at once, whatever the upstream does
    assert len(unsubscribing) == 2, unsubscribing  # one timed out, the next cut by the deadline
    hang["now"] = False
    assert await hub.hold(object(), "test://4", [src], upstream, owner="alice")  # reused or renewed


class _Conn:
    """A handshake-era connection with a channel for server messages, as the hub sees it."""

    def __init__(self) -> None:
        from contextlib import AsyncExitStack

        self.has_standalone_channel = True
        self.exit_stack = AsyncExitStack()


class _Session:
    def __init__(self) -> None:
        self.protocol_version = "2025-11-25"
        self._connection = _Conn()
        self.sent: list[Any] = []

    async def send_notification(self, message: Any) -> None:
        self.sent.append(message)


async def test_one_identity_cannot_push_out_the_others_connections() -> None:
    """alice opens more handshake-era connections than one identity is remembered for: her own
    oldest ones stop hearing, bob's connection keeps hearing list changes."""
    from types import SimpleNamespace

    hub = EventHub()
    alice, bob = SimpleNamespace(name="alice"), SimpleNamespace(name="bob")
    with anyio.fail_after(10):
        async with hub.running():
            bobs = _Session()
            hub.seen(bobs, bob)  # type: ignore[arg-type]
            alices = [_Session() for _ in range(MAX_LINKS_PER_IDENTITY + 40)]
            for session in alices:
                hub.seen(session, alice)  # type: ignore[arg-type]
            assert hub.link_of(bobs) is not None
            assert [hub.link_of(a) is not None for a in alices] == [False] * 40 + [
                True
            ] * MAX_LINKS_PER_IDENTITY
            hub.seen(alices[40], alice)  # activity keeps a connection: the next one out is another
            hub.seen(_Session(), alice)  # type: ignore[arg-type]
            assert hub.link_of(alices[40]) is not None and hub.link_of(alices[41]) is None
            await hub.changed("tools")
            while not bobs.sent or not alices[-1].sent:  # noqa: ASYNC110  (the senders are the hub's)
                await anyio.sleep(0.01)
            assert [type(m).__name__ for m in bobs.sent] == ["ToolListChangedNotification"]
            assert not alices[0].sent
