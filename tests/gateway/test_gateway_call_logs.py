"""An upstream's log messages during a call reach that call's client, never another identity.

A handshake-era client that did not ask for logs (`logging/setLevel`) hears, related to its call,
what the upstream logs while its call is the one call in flight on that upstream (as it would
from the server directly), when its identity holds the `logs:` grant; with two calls in flight
nothing tells whose a message is, so neither hears it. Two bearer identities on one HTTP gateway
in front of `upstreams/logging_server.py` (`meet=2` holds both calls in flight at once).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from gw_helpers import clients_block, gateway_http, policy_doc, stdio_upstream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
LOGGING = HERE / "upstreams" / "logging_server.py"
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}


def manifest(tmp_path: Path, bob_logs: bool) -> Path:
    bob_grants = "tool:lg_say, effect:read" + (", logs:lg_" if bob_logs else "")
    text = f"""
kind: Gateway
metadata: {{ name: LogGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Logging
    prefix: lg_
    effects: read
{clients_block(("alice", 'tool:lg_say, effect:read, "logs:lg_"'), ("bob", bob_grants))}
{policy_doc()}{stdio_upstream("Logging", [sys.executable, str(LOGGING)])}"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


class Heard(list[str]):
    """The log lines a client heard; `wait(n)` waits (bounded) until it heard `n`."""

    def __init__(self) -> None:
        super().__init__()
        self.more = anyio.Event()

    def hear(self, line: str) -> None:
        self.append(line)
        self.more.set()
        self.more = anyio.Event()

    async def wait(self, n: int) -> None:
        with anyio.fail_after(10):  # the log is sent beside the answer; it may follow it
            while len(self) < n:
                await self.more.wait()


@asynccontextmanager
async def connect(url: str, token: str, heard: Heard) -> AsyncIterator[Client]:
    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard.hear(str(params.data))

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(
            streamable_http_client(url, http_client=http), mode="legacy", logging_callback=on_log
        ) as client,  # type: ignore[arg-type]
    ):
        yield client


async def test_a_call_hears_its_own_logs_and_nobody_elses(tmp_path: Path) -> None:
    alice_heard, bob_heard = Heard(), Heard()
    with gateway_http(manifest(tmp_path, bob_logs=False), env=ENV) as url:
        async with connect(url, ALICE, alice_heard) as a, connect(url, BOB, bob_heard) as b:
            await a.call_tool("lg_say", {"who": "alice"})
            await b.call_tool("lg_say", {"who": "bob"})  # bob holds no logs: grant
            await alice_heard.wait(1)
            async with anyio.create_task_group() as tg:  # both in flight: whose is a message?
                tg.start_soon(a.call_tool, "lg_say", {"who": "alice-2", "meet": 2, "group": "g"})
                tg.start_soon(b.call_tool, "lg_say", {"who": "bob-2", "meet": 2, "group": "g"})
            await a.call_tool("lg_say", {"who": "alice-3"})
            await alice_heard.wait(2)
    assert [h for h in alice_heard if "log for" in h] == ["log for alice", "log for alice-3"]
    assert bob_heard == []
