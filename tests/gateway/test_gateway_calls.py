"""What an upstream asks during a call reaches the client whose call it is, never another identity.

Two real identities (bearer tokens) on one HTTP gateway in front of one real upstream
(`upstreams/asking_server.py`, the official SDK's `MCPServer`) that elicits ("transfer 5000
EUR for alice?"), samples and asks for roots. `meet=2` holds both calls in the upstream until
both arrived, so they are in flight at once (no sleeps).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gw_helpers import clients_block, gateway_http, policy_doc, stdio_upstream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).resolve().parent
ASKING = HERE / "upstreams" / "asking_server.py"
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
MODERN = "2026-07-28"
GRANTS = (
    "tool:ask_pay, tool:ask_summarize, tool:ask_where, tool:ask_hold, tool:ask_write_file, "
    "tool:ask_written, tool:ask_confirm_slowly, tool:ask_cancelled, tool:ask_arrived, "
    "effect:read, effect:write"
)


def asking_manifest(tmp_path: Path, *, upstream_mode: str, effects: str = "read", binding: str = "") -> Path:
    """A gateway with alice and bob in front of the asking upstream (prefix `ask_`)."""
    text = f"""
kind: Gateway
metadata: {{ name: AskGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Ask
    prefix: ask_
    effects: {effects}
{binding}
{clients_block(("alice", GRANTS), ("bob", GRANTS))}
{policy_doc(durable=True)}{stdio_upstream("Ask", [sys.executable, str(ASKING)], mode=upstream_mode)}"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


class Person:
    """A downstream client's person: answers what they are asked, and remembers it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        schema = getattr(params, "requested_schema", None) or {}
        if "approve" in schema.get("properties", {}):  # the gateway's approval
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"ok": True})

    async def sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        self.asked.append(getattr(content, "text", "?"))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"{self.name}'s model"), model="m"
        )

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{self.name}")])  # type: ignore[arg-type]


@asynccontextmanager
async def connect(url: str, token: str, mode: str, person: Person | None) -> AsyncIterator[Client]:
    callbacks: dict[str, Any] = {}
    if person is not None:
        callbacks = {
            "elicitation_callback": person.elicit,
            "sampling_callback": person.sample,
            "list_roots_callback": person.roots,
        }
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **callbacks) as client,  # type: ignore[arg-type]
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    return " ".join(getattr(b, "text", "") for b in result.content)


async def test_a_handshake_upstream_asks_only_the_caller_and_never_guesses(tmp_path: Path) -> None:
    manifest = asking_manifest(tmp_path, upstream_mode="legacy")
    alice, bob = Person("alice"), Person("bob")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a, connect(url, BOB, "legacy", bob) as b:
            # One call in flight: its own caller is asked, and answers it.
            paid = await a.call_tool("ask_pay", {"who": "alice"})
            assert text_of(paid) == "alice: accept ok=True"
            assert alice.asked == ["transfer 5000 EUR for alice?"]
            sampled = await a.call_tool("ask_summarize", {"who": "alice"})
            assert text_of(sampled) == "alice: alice's model"
            rooted = await b.call_tool("ask_where", {"who": "bob"})
            assert text_of(rooted) == "bob: file:///home/bob"
            assert bob.asked == ["roots"]
            alice.asked.clear()
            bob.asked.clear()

            # Both in flight on the one upstream connection: nobody can tell whose request it is,
            # so it is refused, never sent to the other identity.
            results: dict[str, tuple[bool, str]] = {}

            async def call(client: Client, who: str, tool: str) -> None:
                try:
                    result = await client.call_tool(tool, {"who": who, "meet": 2, "group": tool})
                except MCPError as exc:  # the upstream answered its refusal as a JSON-RPC error
                    results[who] = (True, exc.error.message)
                else:
                    results[who] = (bool(result.is_error), text_of(result))

            for tool in ("ask_pay", "ask_summarize"):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, a, "alice", tool)
                    tg.start_soon(call, b, "bob", tool)
                assert alice.asked == [] and bob.asked == []
                for who in ("alice", "bob"):
                    failed, text = results[who]
                    assert failed, text
                    assert "accept" not in text and "model" not in text
            assert text_of(await a.call_tool("ask_hold", {"who": "alice"})) == "alice: held"


async def test_a_2026_upstream_asks_each_caller_their_own_question_at_once(tmp_path: Path) -> None:
    """With a 2026-07-28 upstream, the question comes back as the call's own answer: both calls in
    flight at once are each asked their own, on both client eras."""
    manifest = asking_manifest(tmp_path, upstream_mode="modern")
    alice, bob = Person("alice"), Person("bob")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a, connect(url, BOB, MODERN, bob) as b:
            got: dict[str, str] = {}

            async def handshake_alice() -> None:
                got["alice"] = text_of(await a.call_tool("ask_pay", {"who": "alice", "meet": 2}))

            async def modern_bob() -> None:
                # The raw SDK client answers the relayed InputRequiredResult itself (its driver).
                got["bob"] = text_of(await b.call_tool("ask_pay", {"who": "bob", "meet": 2}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(handshake_alice)
                tg.start_soon(modern_bob)
            assert got == {"alice": "alice: accept ok=True", "bob": "bob: accept ok=True"}
            assert alice.asked == ["transfer 5000 EUR for alice?"]
            assert bob.asked == ["transfer 5000 EUR for bob?"]
            assert text_of(await b.call_tool("ask_summarize", {"who": "bob"})) == "bob: bob's model"
            assert text_of(await a.call_tool("ask_where", {"who": "alice"})) == "alice: file:///home/alice"


async def test_a_relayed_round_is_bound_to_its_caller_and_used_once(tmp_path: Path) -> None:
    """A 2026 client gets the upstream's InputRequiredResult under the gateway's sealed state;
    the state cannot be used by another identity, nor twice."""
    manifest = asking_manifest(tmp_path, upstream_mode="modern")
    with gateway_http(manifest, env=ENV) as url:
        async with (
            connect(url, ALICE, MODERN, Person("alice")) as a,
            connect(url, BOB, MODERN, Person("bob")) as b,
        ):
            first = await a.session.call_tool("ask_pay", {"who": "alice"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None and len(first.input_requests) == 1
            ((key, request),) = first.input_requests.items()
            assert isinstance(request, types.ElicitRequest)
            assert request.params.message == "transfer 5000 EUR for alice?"
            state = first.request_state
            assert state is not None
            answers: dict[str, Any] = {key: types.ElicitResult(action="accept", content={"ok": True})}

            # bob replays alice's round: refused, the upstream is not resumed for him
            with pytest.raises(MCPError) as stolen:
                await b.session.call_tool(
                    "ask_pay",
                    {"who": "alice"},
                    input_responses=answers,
                    request_state=state,
                    allow_input_required=True,
                )
            assert stolen.value.error.code == types.INVALID_PARAMS
            assert "another call" in stolen.value.error.message

            done = await a.session.call_tool(
                "ask_pay",
                {"who": "alice"},
                input_responses=answers,
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult) and text_of(done) == "alice: accept ok=True"
            with pytest.raises(MCPError) as again:
                await a.session.call_tool(
                    "ask_pay",
                    {"who": "alice"},
                    input_responses=answers,
                    request_state=state,
                    allow_input_required=True,
                )
            assert "already used" in again.value.error.message
            with pytest.raises(MCPError) as forged:
                await a.session.call_tool(
                    "ask_pay",
                    {"who": "alice"},
                    input_responses=answers,
                    request_state=state[:-2] + "00",
                    allow_input_required=True,
                )
            assert forged.value.error.code == types.INVALID_PARAMS


@pytest.mark.parametrize(
    ("upstream_mode", "client_mode"),
    [("legacy", "legacy"), ("modern", MODERN), ("modern", "legacy"), ("legacy", MODERN)],
)
async def test_a_client_without_the_capability_gets_32021(
    tmp_path: Path, upstream_mode: str, client_mode: str
) -> None:
    manifest = asking_manifest(tmp_path, upstream_mode=upstream_mode)
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, client_mode, None) as a:
            with pytest.raises(MCPError) as refused:
                await a.call_tool("ask_pay", {"who": "alice"})
            assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert refused.value.error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
            assert text_of(await a.call_tool("ask_hold", {"who": "alice"})) == "alice: held"


SSH = "home/user/.ssh/authorized_keys"
PADDED = "./" * 2500 + SSH  # 5,000 characters of padding before the path


def assert_shows_the_whole_call(message: str) -> None:
    """The person sees the tool, the server, the effects, the path (not a silent cut), the size
    and digest of the long value."""
    assert message.startswith("Allow `ask_write_file` of server `Ask` (write) with these arguments?")
    head = message.split("\n\nEvery argument in full:\n")[0]
    assert SSH in head and "5,032 characters, SHA-256 " in head
    assert (
        '"content": "ssh-ed25519 AAAA attacker"' in message
        or '- content: "ssh-ed25519 AAAA attacker"' in message
    )
    assert PADDED in message  # the whole value, below


async def test_an_approval_shows_a_padded_path_and_is_bound_to_its_call(tmp_path: Path) -> None:
    """Hostile: a write to ~/.ssh/authorized_keys hidden behind 5,000 characters of padding. The
    person sees the path, its size and digest; a 2026 approval answer replayed for a second
    identical call is asked again and never runs it."""
    manifest = asking_manifest(
        tmp_path, upstream_mode="legacy", effects="write", binding="    approval: write"
    )
    args = {"path": PADDED, "content": "ssh-ed25519 AAAA attacker"}
    alice = Person("alice")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a:
            done = await a.call_tool("ask_write_file", args)
            assert text_of(done) == "wrote 25 characters"
            (message,) = alice.asked
            assert_shows_the_whole_call(message)
        async with connect(url, BOB, MODERN, Person("bob")) as b:
            first = await b.session.call_tool("ask_write_file", args, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
            assert list(first.input_requests) == ["toolbridge/approval"]
            question = first.input_requests["toolbridge/approval"]
            assert isinstance(question, types.ElicitRequest)
            assert_shows_the_whole_call(question.params.message)
            yes: dict[str, Any] = {
                "toolbridge/approval": types.ElicitResult(action="accept", content={"approve": True})
            }
            ran = await b.session.call_tool(
                "ask_write_file",
                args,
                input_responses=yes,
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(ran, types.CallToolResult) and text_of(ran) == "wrote 25 characters"
            replayed = await b.session.call_tool(
                "ask_write_file",
                args,
                input_responses=yes,
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(replayed, types.InputRequiredResult)  # asked again, not run
            assert replayed.request_state != first.request_state
            other = await b.session.call_tool(
                "ask_write_file",
                {**args, "content": "other"},
                input_responses=yes,
                request_state=replayed.request_state,
                allow_input_required=True,
            )
            assert isinstance(other, types.InputRequiredResult)  # bound to those exact arguments
            count = await b.call_tool("ask_written", {})
            assert count.structured_content == {"result": 2}  # alice's and bob's one approved call


async def test_the_approval_and_the_upstream_question_are_rounds_of_one_call(tmp_path: Path) -> None:
    """A 2026 client, a 2026 upstream that elicits, a binding that needs approval: the gateway's
    approval is the first round, the upstream's question the next, each answered once."""
    manifest = asking_manifest(tmp_path, upstream_mode="modern", binding="    approval: always")
    bob = Person("bob")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, BOB, MODERN, bob) as b:
            paid = await b.call_tool("ask_pay", {"who": "bob"})  # the SDK's driver answers each round
            assert text_of(paid) == "bob: accept ok=True"
            assert len(bob.asked) == 2
            assert bob.asked[0].startswith("Allow `ask_pay` of server `Ask` (read)")
            assert bob.asked[1] == "transfer 5000 EUR for bob?"


async def test_cancelling_the_call_while_its_person_is_asked_cancels_it_upstream(tmp_path: Path) -> None:
    manifest = asking_manifest(tmp_path, upstream_mode="legacy")
    asked = anyio.Event()

    class Silent(Person):
        async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            self.asked.append(params.message)
            asked.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    alice = Silent("alice")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a:
            async with anyio.create_task_group() as tg:
                tg.start_soon(a.call_tool, "ask_confirm_slowly", {"who": "alice"})
                with anyio.fail_after(30):
                    await asked.wait()
                tg.cancel_scope.cancel()
            assert alice.asked == ["confirm for alice?"]
            with anyio.fail_after(30):  # hang guard: the upstream hears the cancellation
                while (await a.call_tool("ask_cancelled", {})).structured_content != {"result": ["alice"]}:  # noqa: ASYNC110
                    await anyio.sleep(0.1)


async def test_per_identity_sessions_ask_each_caller_even_with_both_in_flight(tmp_path: Path) -> None:
    """`sessions: perIdentity`: alice and bob each have their own connection to a handshake-era
    upstream, so both are asked while both calls are in flight: each person's answer waits
    until the other was asked too."""
    manifest = asking_manifest(
        tmp_path, upstream_mode="legacy", binding="    sessions: perIdentity\n    maxSessions: 2"
    )
    events = {"alice": anyio.Event(), "bob": anyio.Event()}

    class Meeting(Person):
        async def elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            self.asked.append(params.message)
            events[self.name].set()
            with anyio.fail_after(30):
                await events["bob" if self.name == "alice" else "alice"].wait()
            return types.ElicitResult(action="accept", content={"ok": True})

    alice, bob = Meeting("alice"), Meeting("bob")
    got: dict[str, str] = {}
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a, connect(url, BOB, "legacy", bob) as b:

            async def call(client: Client, who: str) -> None:
                got[who] = text_of(await client.call_tool("ask_pay", {"who": who}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, a, "alice")
                tg.start_soon(call, b, "bob")
    assert got == {"alice": "alice: accept ok=True", "bob": "bob: accept ok=True"}
    assert alice.asked == ["transfer 5000 EUR for alice?"]
    assert bob.asked == ["transfer 5000 EUR for bob?"]


async def test_a_handshake_upstream_question_becomes_a_round_for_a_2026_client(tmp_path: Path) -> None:
    """A 2026-07-28 client cannot be sent a standalone request: the handshake-era upstream's
    question suspends the call and comes back as an input_required round; the answer goes to
    the waiting upstream request. With per-identity sessions, both identities at once, each
    their own question."""
    manifest = asking_manifest(tmp_path, upstream_mode="legacy", binding="    sessions: perIdentity")
    alice, bob = Person("alice"), Person("bob")
    got: dict[str, str] = {}
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, MODERN, alice) as a, connect(url, BOB, MODERN, bob) as b:
            first = await a.session.call_tool("ask_pay", {"who": "alice"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
            ((key, request),) = first.input_requests.items()
            assert key == "toolbridge/upstream/1" and isinstance(request, types.ElicitRequest)
            assert request.params.message == "transfer 5000 EUR for alice?"
            with pytest.raises(MCPError):  # bob cannot answer alice's suspended question
                await b.session.call_tool(
                    "ask_pay",
                    {"who": "alice"},
                    input_responses={key: types.ElicitResult(action="accept", content={"ok": True})},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            done = await a.session.call_tool(
                "ask_pay",
                {"who": "alice"},
                input_responses={key: types.ElicitResult(action="decline")},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult) and text_of(done) == "alice: decline"

            async def call(client: Client, who: str) -> None:  # the SDK's driver answers the rounds
                got[who] = text_of(await client.call_tool("ask_summarize", {"who": who}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, a, "alice")
                tg.start_soon(call, b, "bob")
    assert got == {"alice": "alice: alice's model", "bob": "bob: bob's model"}
    assert alice.asked == ["summarize for alice"] and bob.asked == ["summarize for bob"]


@pytest.mark.parametrize("declares", [False, True])
async def test_a_2026_client_cancelling_its_call_cancels_it_upstream(tmp_path: Path, declares: bool) -> None:
    """A 2026 client gives up while a handshake-era upstream works: the upstream call is
    cancelled (also when the call ran suspendable, in a task of the gateway's)."""
    manifest = asking_manifest(tmp_path, upstream_mode="legacy")
    with gateway_http(manifest, env=ENV) as url:
        async with connect(url, ALICE, MODERN, Person("alice") if declares else None) as a:
            async with anyio.create_task_group() as tg:  # the upstream waits for a caller who never comes
                tg.start_soon(a.call_tool, "ask_hold", {"who": "alice", "meet": 2, "group": "never"})
                with anyio.fail_after(30):  # hang guard: until the call has reached the upstream
                    while (await a.call_tool("ask_arrived", {"group": "never"})).structured_content != {  # noqa: ASYNC110
                        "result": ["alice"]
                    }:
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # alice gives up
            with anyio.fail_after(30):  # hang guard: the upstream hears the cancellation
                while (await a.call_tool("ask_cancelled", {})).structured_content != {"result": ["alice"]}:  # noqa: ASYNC110
                    await anyio.sleep(0.1)


async def test_cancelling_a_suspendable_call_cancels_its_task_and_the_upstream_call(tmp_path: Path) -> None:
    """A 2026 client that declared elicitation calls a handshake-era upstream: the call runs in
    a task of the gateway's (`_suspend`); cancelling the waiting request (no question pending)
    cancels that task and the upstream call, leaving nothing running."""
    from toolbridge.gateway._build import open_gateway
    from toolbridge.gateway._upstream import CallContext

    manifest = asking_manifest(tmp_path, upstream_mode="legacy")
    caps = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    async with open_gateway(manifest, secrets={"aliceToken": ALICE, "bobToken": BOB}) as gateway:
        core = gateway.core
        alice = gateway.identities["alice"]
        await core.call(alice, "ask_hold", {"who": "warm"}, context=CallContext(alice))
        with anyio.move_on_after(2):
            context = CallContext(alice, capabilities=caps, protocol_version=MODERN)
            await core.call(alice, "ask_hold", {"who": "alice", "meet": 2, "group": "never"}, context=context)
        with anyio.fail_after(30):  # hang guard: the upstream hears the cancellation
            while (await core.call(alice, "ask_cancelled", {})).structured_content != {  # noqa: ASYNC110
                "result": ["alice"]
            }:
                await anyio.sleep(0.1)
