"""`CallRequests`: what a server asks during a call is answered by that call's own handlers
(toolbridge's StdioClient against a real SDK server that elicits, samples and asks for roots)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolbridge.clients import CallRequests, StdioClient
from toolbridge.errors import ConfigError, JsonRpcError

ASKING = Path(__file__).resolve().parents[1] / "gateway" / "upstreams" / "asking_server.py"


def client(mode: str) -> StdioClient:
    made = StdioClient(sys.executable, [str(ASKING)], mode=mode, timeout=60)
    made.offer_call_requests("sampling", "elicitation", "roots")
    return made


def person(name: str, asked: list[str]) -> CallRequests:
    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"{name}: {params.message}")
        return types.ElicitResult(action="accept", content={"ok": True})

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(f"{name}: sampled")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"{name}'s model"), model="m"
        )

    async def roots() -> types.ListRootsResult:
        asked.append(f"{name}: roots")
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{name}")])  # type: ignore[arg-type]

    return CallRequests(sampling=sample, elicitation=elicit, roots=roots)


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_each_call_answers_what_it_is_asked(mode: str) -> None:
    asked: list[str] = []
    async with client(mode) as c:
        alice = person("alice", asked)
        assert text(await c.call_tool("pay", {"who": "alice"}, requests=alice)) == "alice: accept ok=True"
        assert (
            text(await c.call_tool("summarize", {"who": "alice"}, requests=alice)) == "alice: alice's model"
        )
        assert (
            text(await c.call_tool("where", {"who": "alice"}, requests=alice)) == "alice: file:///home/alice"
        )
        assert asked == ["alice: transfer 5000 EUR for alice?", "alice: sampled", "alice: roots"]
        # a call without handlers refuses; the server fails its call with the refusal
        with pytest.raises(JsonRpcError) as refused:
            await c.call_tool("pay", {"who": "nobody"})
        assert refused.value.rpc_code == -32600 and "does not take elicitation" in str(refused.value)


async def test_two_calls_in_flight_in_the_handshake_era_are_never_guessed() -> None:
    asked: list[str] = []
    refusals: list[str] = []
    async with client("legacy") as c:

        async def call(who: str) -> None:
            args = {"who": who, "meet": 2, "group": "g"}
            with pytest.raises(JsonRpcError) as refused:
                await c.call_tool("pay", args, requests=person(who, asked))
            refusals.append(str(refused.value))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "alice")
            tg.start_soon(call, "bob")
    assert asked == []
    assert len(refusals) == 2 and all("2 calls are in flight" in r for r in refusals)


async def test_a_2026_round_can_be_taken_and_resumed_by_the_caller() -> None:
    async with client("modern") as c:
        first = await c.call_tool("pay", {"who": "alice"}, allow_input_required=True)
        assert first["resultType"] == "input_required"
        ((key, request),) = first["inputRequests"].items()
        assert request["params"]["message"] == "transfer 5000 EUR for alice?"
        done = await c.call_tool(
            "pay",
            {"who": "alice"},
            input_responses={key: types.ElicitResult(action="accept", content={"ok": False})},
            request_state=first.get("requestState"),
        )
        assert text(done) == "alice: accept ok=False"


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ConfigError):
        StdioClient(sys.executable, [str(ASKING)]).offer_call_requests("telepathy")  # type: ignore[arg-type]
