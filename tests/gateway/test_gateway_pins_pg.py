"""Pin approvals in PostgreSQL: two gateway replicas (stateless HTTP) with a PostgreSQL journal,
each with its own manifest directory. Only replica A has a lock file. A rug pull is withheld by
both; the lock renewed on A is stored in the database, and B serves the approved tools without
any lock file of its own. The database going away keeps the pins in force."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, free_port, upstream_manifest
from mcp.shared.exceptions import MCPError
from test_gateway_replicas import TOKEN, connect, kill_group, start_replica, wait_listening

from toolbridge.errors import ConfigError
from toolbridge.gateway._pins_pg import PgPinStore
from toolbridge.pinning import ServerLock

CLIENTS = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, tool:up_evil, tool:up_weather, tool:up_mutate, effect:read] }
"""


async def _names(port: int) -> dict[str, str]:
    async with connect(port) as client:
        return {t.name: t.description or "" for t in (await client.list_tools()).tools}


async def _until(port: int, check: object, what: str) -> dict[str, str]:
    with anyio.fail_after(30):
        while True:
            names = await _names(port)
            if check(names):  # type: ignore[operator]
                return names
            await anyio.sleep(0.3)


def _two_manifests(tmp_path: Path, postgres_url: str) -> tuple[Path, Path, dict[str, str]]:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n", lock="pins.json")
    text = manifest.read_text(encoding="utf-8").replace(
        "journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'
    )
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "gateway.yaml").write_text(text, encoding="utf-8")  # one upstream state for both
    env = {"ALICE_TOKEN": TOKEN, "JOURNAL_URL": postgres_url}
    return a / "gateway.yaml", b / "gateway.yaml", env


def _lock(manifest: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [TOOLBRIDGE, "lock", "--out", str(manifest.parent / "pins.json"), str(manifest)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


async def test_approve_on_one_replica_and_the_other_serves(tmp_path: Path, postgres_url: str) -> None:
    a, b, env = _two_manifests(tmp_path, postgres_url)
    _lock(a, env)
    ports = [free_port(), free_port()]
    replicas = [start_replica(m, port, env) for m, port in zip((a, b), ports, strict=True)]
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        # B has no lock file: it serves what A stored (at once, or at its watcher's next tick)
        await _until(ports[1], lambda n: "up_echo" in n, "adopted")
        assert not (b.parent / "pins.json").exists()

        # a rug pull under both replicas: echo changes, evil appears (each replica's upstream
        # rewrites the shared state and says its list changed); both withhold them
        for port in ports:
            async with connect(port) as client:
                await client.call_tool("up_mutate", {})
        for port in ports:
            names = await _until(port, lambda n: "up_echo" not in n, "withheld")
            assert "up_evil" not in names and "up_weather" in names
        async with connect(ports[1]) as client:
            with pytest.raises(MCPError) as info:
                await client.call_tool("up_echo", {"text": "x"})
            assert info.value.error.code == types.INVALID_PARAMS

        # a person reviews and renews the lock on A only; B follows through the database
        _lock(a, env)
        names = await _until(ports[1], lambda n: "up_evil" in n and "up_echo" in n, "approved")
        assert "ssh" in names["up_echo"]
        async with connect(ports[1]) as client:
            echoed = await client.call_tool("up_echo", {"text": "approved"})
            assert echoed.content[0].text == "approved"  # type: ignore[union-attr]
        assert not (b.parent / "pins.json").exists()

        # what is stored is what every replica serves: revoking there withholds everything
        store = PgPinStore(postgres_url, "TestGate")
        try:
            stored = await store.load("UpMcp")
            assert stored is not None and "evil" in stored.lock.tools
            await store.save("UpMcp", ServerLock(tools={}, instructions=None))  # revoke everything
        finally:
            store.close()
        for port in ports:
            await _until(port, lambda n: not n, "revoked")
    finally:
        for proc in replicas:
            kill_group(proc)


async def test_the_database_going_away_keeps_the_pins_in_force(tmp_path: Path, postgres_url: str) -> None:
    a, _, env = _two_manifests(tmp_path, postgres_url)
    _lock(a, env)
    port = free_port()
    proc = start_replica(a, port, env)
    try:
        await wait_listening(port, proc)
        assert "up_echo" in await _names(port)
        store = PgPinStore(postgres_url, "TestGate")
        try:

            async def drop(conn: object) -> None:
                await conn.execute("DROP TABLE toolbridge_gateway_pins")  # type: ignore[attr-defined]

            await store._run(drop)
        finally:
            store.close()
        await anyio.sleep(2.5)  # a few watcher ticks fail to read the store
        assert proc.poll() is None
        assert "up_echo" in await _names(port), "the pins in force stay"
    finally:
        kill_group(proc)


async def test_an_unreachable_store_is_one_clear_error() -> None:
    store = PgPinStore("postgresql://nobody@127.0.0.1:1/none", "G", timeout_s=2)
    try:
        with anyio.fail_after(20):
            with pytest.raises(ConfigError) as info:
                await store.setup()
        assert info.value.code == "ERR_CONFIG" and "pin store" in str(info.value)
    finally:
        store.close()


async def test_hostile_names_round_trip_and_junk_pins_match_nothing(postgres_url: str) -> None:
    """Names are bound parameters (quotes, NULs refused by the database, long names stored as
    they are); a stored pin that is not a hash never matches a tool, so it withholds it."""
    store = PgPinStore(postgres_url, "G'; DROP TABLE toolbridge_gateway_pins; --")
    try:
        await store.setup()
        tools = {"a'b\"c": "sha256:" + "0" * 64, "é" * 5000: "junk", **{f"t{i}": "x" for i in range(3000)}}
        with anyio.fail_after(60):
            version = await store.save("S\\x", ServerLock(tools=tools, instructions="sha256:" + "1" * 64))
            again = await store.save("S\\x", ServerLock(tools=tools, instructions=None))
            stored = await store.load("S\\x")
        assert again == version + 1
        assert stored is not None and stored.lock.tools == tools and stored.lock.instructions is None
        assert await store.versions() == {"S\\x": again}
        with pytest.raises(ConfigError):  # a NUL in a name: the database refuses, one clear error
            await store.save("nul\x00", ServerLock())
    finally:
        store.close()
    from toolbridge.functions import FunctionTools
    from toolbridge.pinning import PinnedToolProvider

    def echo(text: str) -> str:
        """Echo."""
        return text

    pinned = PinnedToolProvider(FunctionTools([echo]), ServerLock(tools={"echo": "junk"}), server="s")
    assert await pinned.list_tools() == [], "a junk pin matches nothing: the tool is withheld"
