"""2026-07-28 input rounds across gateway replicas (`--stateless`, one PostgreSQL journal).

A 2026 client asked for approval by replica 0 answers on replica 1 (as behind a load balancer):
the round is honoured there, the call runs once, and the same answer replayed to either replica
is asked again, never run again. Alone, each replica sealed rounds with a key of its own, so the
answer was not honoured elsewhere and the client was asked over and over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gw_helpers import free_port
from test_gateway_calls import ALICE, BOB, ENV, MODERN, Person, asking_manifest, connect, text_of
from test_gateway_replicas import kill_group, start_replica, wait_listening

from toolbridge.gateway._rounds import APPROVAL_KEY, RoundStates

YES = {APPROVAL_KEY: types.ElicitResult(action="accept", content={"approve": True})}


async def test_a_round_asked_by_one_replica_is_answered_at_another_once(
    tmp_path: Path, postgres_url: str
) -> None:
    manifest = asking_manifest(
        tmp_path, upstream_mode="modern", effects="write", binding="    approval: write"
    )
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("journal: journal.db", 'journal: "${{ secrets.journalUrl }}"'), "utf-8")
    ports = [free_port(), free_port()]
    replicas = [start_replica(manifest, port, {**ENV, "JOURNAL_URL": postgres_url}) for port in ports]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    args: dict[str, Any] = {"path": "/home/alice/notes.txt", "content": "hello from replica 0"}
    try:
        for port, proc in zip(ports, replicas, strict=True):
            await wait_listening(port, proc)
        with anyio.fail_after(120):  # hang guard
            async with (
                connect(urls[0], ALICE, MODERN, Person("alice")) as zero,
                connect(urls[1], ALICE, MODERN, Person("alice")) as one,
                connect(urls[1], BOB, MODERN, Person("bob")) as bob,
            ):
                first = await zero.session.call_tool("ask_write_file", args, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult)
                assert first.input_requests is not None and APPROVAL_KEY in first.input_requests
                state = first.request_state

                async def retry(client: Any, arguments: dict[str, Any] = args) -> Any:
                    return await client.session.call_tool(
                        "ask_write_file",
                        arguments,
                        input_responses=YES,
                        request_state=state,
                        allow_input_required=True,
                    )

                stolen = await retry(bob)  # another identity on the other replica: asked, not run
                assert isinstance(stolen, types.InputRequiredResult)
                ran = await retry(one)
                assert isinstance(ran, types.CallToolResult) and not ran.is_error, ran
                assert text_of(ran) == f"wrote {len(args['content'])} characters"
                for client in (zero, one):  # replayed to either replica: asked again, not run
                    again = await retry(client)
                    assert isinstance(again, types.InputRequiredResult)
                    assert again.request_state != state
                other = await retry(one, {**args, "content": "other"})  # bound to those arguments
                assert isinstance(other, types.InputRequiredResult)
                written = [await c.call_tool("ask_written", {}) for c in (zero, one)]
                assert sum(w.structured_content["result"] for w in written) == 1  # one upstream each
    finally:
        for proc in replicas:
            kill_group(proc)


async def test_rounds_shared_by_replicas_are_used_once_and_suspended_ones_stay_home() -> None:
    """Two processes' `RoundStates` sharing a key and the single-use marks: each honours the
    other's state once; a round whose call is held suspended in one is not honoured by the other;
    a round sealed under another key is not the gateway's."""
    used: set[str] = set()

    async def claim(nonce: str, until: float, now: float) -> bool:
        if nonce in used:
            return False
        used.add(nonce)
        return True

    key = b"k" * 32
    zero, one, stranger = RoundStates(), RoundStates(), RoundStates()
    zero.share(key, claim)
    one.share(key, claim)
    state = zero.seal("alice", "t", "d", number=1, approved=False, upstream=None)
    resumed, why = await one.open(state, "alice", "t", "d")
    assert resumed is not None and resumed.number == 1 and why == ""
    assert await zero.open(state, "alice", "t", "d") == (None, "already used")
    assert await one.open(state, "alice", "t", "d") == (None, "already used")
    held = zero.seal("alice", "t", "d", number=2, approved=True, upstream=None, suspended="call-1")
    assert await one.open(held, "alice", "t", "d") == (None, "held by another gateway process")
    resumed, why = await zero.open(held, "alice", "t", "d")
    assert resumed is not None and resumed.suspended == "call-1"
    assert await stranger.open(state, "alice", "t", "d") == (None, "not the gateway's")


@pytest.mark.parametrize("state", ["", "x.y", "e30.00", "." * 10, "a" * 300_000, 5])
async def test_a_hostile_state_is_not_honoured(state: Any) -> None:
    rounds = RoundStates()
    resumed, why = await rounds.open(state, "alice", "t", "d")
    assert resumed is None and why in {"malformed", "not the gateway's"}
