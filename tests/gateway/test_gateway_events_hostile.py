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

from toolbridge.gateway import create_server, open_gateway
from toolbridge.gateway._events import LOG_DATA_LIMIT, OUTBOX_SIZE, UPSTREAM_BURST, UPSTREAM_PER_SECOND

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
