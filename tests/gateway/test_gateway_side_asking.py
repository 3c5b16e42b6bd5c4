"""A question an upstream asks during a prompt, a resource read or a completion never reaches the
person of a tool call that happens to be in flight beside it (another identity).

The gateway's side door (prompts, resources, completions) sends its requests through
`ConnectionClient.sdk_request()`, which counts them among the connection's requests in flight:
while bob's `prompts/get` runs beside alice's tool call, a handshake-era `elicitation/create`
cannot be attributed to either, so it is refused. Before, only tool calls were counted, and the
question asked during bob's prompt went to alice, the one tool call in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from gw_helpers import clients_block, gateway_http, policy_doc, stdio_upstream
from test_gateway_calls import ALICE, BOB, ENV, Person, connect, text_of

HERE = Path(__file__).resolve().parent
PROMPT_ASKING = HERE / "upstreams" / "prompt_asking_server.py"


def manifest(tmp_path: Path) -> Path:
    grants = "tool:pa_wait_for, prompts:pa_, effect:read"
    text = f"""
kind: Gateway
metadata: {{ name: PromptAskGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref PromptAsk
    prefix: pa_
    effects: read
{clients_block(("alice", grants), ("bob", grants))}
{policy_doc()}{stdio_upstream("PromptAsk", [sys.executable, str(PROMPT_ASKING)])}"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_question_asked_during_a_prompt_never_reaches_the_tool_caller_beside_it(
    tmp_path: Path,
) -> None:
    alice, bob = Person("alice"), Person("bob")
    with gateway_http(manifest(tmp_path), env=ENV) as url:
        async with connect(url, ALICE, "legacy", alice) as a, connect(url, BOB, "legacy", bob) as b:
            done: dict[str, str] = {}

            async def alice_calls() -> None:
                done["alice"] = text_of(await a.call_tool("pa_wait_for", {"who": "alice"}))

            async def bob_gets() -> None:
                result = await b.get_prompt("pa_confirm", {"who": "bob"})
                done["bob"] = " ".join(getattr(m.content, "text", "") for m in result.messages)

            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(alice_calls)
                    tg.start_soon(bob_gets)
    assert alice.asked == [], "bob's prompt asked alice"
    assert bob.asked == []  # two requests in flight: nobody can tell whose it is, so nobody is asked
    assert done["alice"] == "alice: done"
    assert done["bob"].startswith("bob: refused"), done["bob"]
