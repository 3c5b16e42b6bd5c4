"""Result acceptance of declared MCP tools, and the no-leakage rule.

Uses a small server built with the official SDK (`rt_server.py`), reached in-process through the
official `mcp.Client`, and a crafted client object for envelopes no SDK server would send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from mcp import Client
from rt_helpers import CraftedClient, Empty, Message, call, read_bytes_of, scripted
from rt_server import SERVER_MARKER, server

from toolbridge.agent import Agent
from toolbridge.agent.models import FunctionModel
from toolbridge.runtime import Event, create_runtime, define_mcp_tool

MARKER = "SECRET-MARKER-7f3a91"


class OkIn(pydantic.BaseModel):
    message: str


def tool(client: Any, remote: str, effects: str, input: Any = Empty, output: Any = Message) -> Any:
    return define_mcp_tool(
        id=f"t.{remote}",
        version="1",
        description="test tool",
        input=input,
        output=output,
        effects=effects,
        capabilities=[],
        remote_name=remote,
        client=client,
        timeout_ms=5_000,
    )


def grants(remote: str, effects: str) -> list[str]:
    out = ["model:scripted", f"tool:t.{remote}"]
    if effects != "none":
        out.append(f"effect:{effects}")
    return out


async def run_one(client: Any, remote: str, effects: str, args: dict[str, Any], **kw: Any) -> Any:
    runtime = create_runtime(permissions={"allow": grants(remote, effects)})
    model = scripted(call(f"t_{remote}", **args), {"text": "done"})
    result = await runtime.run(Agent(model, tools=[tool(client, remote, effects, **kw)]), "go")
    return result, runtime, model


async def test_official_client_structured_result_is_accepted() -> None:
    async with Client(server) as client:
        result, _runtime, model = await run_one(client, "ok", "read", {"message": "hi"}, input=OkIn)
    assert result.outcome == "succeeded"
    assert model.requests[1].messages[-1].content[0].text == '{"content":"hi"}'


@pytest.mark.parametrize(
    ("effects", "outcome", "code"),
    [("write", "outcome_unknown", "OUTCOME_UNKNOWN"), ("none", "failed", "TOOL_FAILED")],
)
@pytest.mark.parametrize("remote", ["big", "text_only"])
async def test_official_client_rejected_results(remote: str, effects: str, outcome: str, code: str) -> None:
    async with Client(server) as client:
        result, runtime, model = await run_one(client, remote, effects, {})
    assert (result.outcome, result.error_code) == (outcome, code)
    (evidence,) = runtime.inspect(result.run_id).calls
    assert evidence.request_sent and evidence.response_received
    assert len(model.requests) == 1  # the model never saw the result


ENVELOPES: dict[str, Any] = {
    "extra_key": {"structuredContent": {"content": "x"}, "content": [], "extra": 1},
    "is_error": {"structuredContent": {"content": "x"}, "isError": True},
    "is_error_not_bool": {"structuredContent": {"content": "x"}, "isError": "no"},
    "text_only": {"content": [{"type": "text", "text": '{"content": "x"}'}]},
    "too_big": {"structuredContent": {"content": "y" * (1024 * 1024)}},
    "not_an_object": ["structuredContent"],
    "schema_mismatch": {"structuredContent": {"other": 1}},
}


@pytest.mark.parametrize("case", sorted(ENVELOPES))
@pytest.mark.parametrize("effects", ["none", "write"])
async def test_crafted_envelopes_fail(case: str, effects: str) -> None:
    client = CraftedClient(ENVELOPES[case])
    result, _runtime, _ = await run_one(client, "crafted", effects, {})
    assert len(client.calls) == 1
    if case == "is_error":  # an answer: known whatever the effects (issue 21)
        assert (result.outcome, result.error_code) == ("failed", "TOOL_ERROR")
    elif effects == "write":
        assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    else:
        expected = "INVALID_OUTPUT" if case == "schema_mismatch" else "TOOL_FAILED"
        assert (result.outcome, result.error_code) == ("failed", expected)


async def test_meta_is_dropped_and_accepted() -> None:
    client = CraftedClient({"structuredContent": {"content": "x"}, "_meta": {"a": 1}, "isError": False})
    result, _, model = await run_one(client, "crafted", "write", {})
    assert result.outcome == "succeeded"
    assert "_meta" not in model.requests[1].messages[-1].content[0].text


async def test_invalid_input_is_refused_before_any_call() -> None:
    client = CraftedClient({"structuredContent": {"content": "x"}})
    result, runtime, _ = await run_one(client, "crafted", "write", {"message": 3}, input=OkIn)
    assert (result.outcome, result.error_code) == ("failed", "INVALID_INPUT")
    assert client.calls == []
    (refused,) = runtime.inspect(result.run_id).calls  # a refused call has its row (issue 21)
    assert (refused.tool_id, refused.outcome) == ("t.crafted", "not_started")
    assert refused.error_code == "INVALID_INPUT"
    assert not refused.request_sent


async def test_client_exception_is_outcome_unknown_for_write() -> None:
    client = CraftedClient(error=ConnectionError(f"lost {MARKER}"))
    result, _, _model = await run_one(client, "crafted", "write", {})
    assert (result.outcome, result.error_code) == ("outcome_unknown", "OUTCOME_UNKNOWN")
    assert MARKER not in repr(result)


@pytest.mark.parametrize("effects", ["none", "write"])
async def test_server_error_text_never_leaks(effects: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    allow = ["model:function", "tool:t.fail"] + ([f"effect:{effects}"] if effects != "none" else [])
    runtime = create_runtime("durable", permissions={"allow": allow}, journal=journal)
    events: list[Event] = []
    runtime.subscribe(events.append)
    requests: list[Any] = []

    def decide(messages: list[Any], request: Any) -> Any:
        requests.append(request)
        if len(requests) == 1:
            return [{"name": "t_fail", "arguments": {}}]
        return "done"

    async with Client(server) as client:
        agent = Agent(FunctionModel(decide), tools=[tool(client, "fail", effects)])
        result = await runtime.run(agent, "go")
        # the raw SDK call does carry the marker: the test would be vacuous otherwise
        raw = await client.call_tool("fail", {})
        assert SERVER_MARKER in str(raw.content)
    assert (result.outcome, result.error_code) == ("failed", "TOOL_ERROR")  # the server answered
    runtime.close()
    assert SERVER_MARKER not in "".join(repr(r) for r in requests)
    assert SERVER_MARKER not in json.dumps([e.to_dict() for e in events])
    assert SERVER_MARKER not in repr(result) and SERVER_MARKER not in json.dumps(result.to_dict())
    stored = read_bytes_of(tmp_path, "journal")
    assert stored and SERVER_MARKER.encode() not in stored
    record = create_runtime("durable", journal=journal).inspect(result.run_id)
    assert SERVER_MARKER not in json.dumps(record.to_dict())
    assert record.calls[0].request_sent and record.calls[0].response_received
