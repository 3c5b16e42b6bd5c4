"""`Agent(tool_search=...)` on Anthropic's own tool search: the tools go deferred, the API's search
tool is sent, and the turn's `server_tool_use` / `tool_search_tool_result` blocks go back with its
tool calls. The loopback server plays the Messages API: it searches the deferred tools it was sent
(a word-overlap ranking of its own) and, like the API, refuses a call to a deferred tool that no
`tool_reference` in the conversation loaded. The catalog server serves 200 tools (+ its rug-pull tool)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fake_http import FakeApi, Reply
from test_anthropic import error, message, stream_events, text_block, tool_block

from toolbridge.agent import Agent, AnthropicModel, ToolSearch
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.errors import ModelError

CATALOG = Path(__file__).resolve().parent.parent / "gateway" / "upstreams" / "catalog_server.py"
SEARCH_TOOL = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
RESULT = "tool_search_tool_result"


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _loaded(messages: list[dict[str, Any]]) -> set[str]:
    """The tool names the conversation's search results loaded."""
    names: set[str] = set()
    for turn in messages:
        for block in turn["content"] if isinstance(turn["content"], list) else ():
            if block.get("type") == RESULT:
                names.update(r["tool_name"] for r in block["content"].get("tool_references", ()))
    return names


class MessagesApi:
    """The API's side of the exchange: search on the first turn, check and answer on the next."""

    def __init__(self) -> None:
        self.query = "create a new calendar meeting event"

    def __call__(self, body: dict[str, Any]) -> Reply:
        tools = body.get("tools", [])
        deferred = {t["name"]: t for t in tools if t.get("defer_loading")}
        messages = body["messages"]
        last = messages[-1]["content"]
        if last and last[0].get("type") == "tool_result":
            for turn in messages:  # the API: a deferred tool is callable only once a search loaded it
                for block in turn["content"]:
                    name = block.get("name")
                    if block.get("type") == "tool_use" and name in deferred and name not in _loaded(messages):
                        return error(400, "invalid_request_error", "tool reference not loaded")
            return self._reply(body, [{"type": "text", "text": "booked"}], "end_turn")
        asked = _words(self.query)
        ranked = sorted(
            deferred.values(),
            key=lambda t: (-len(asked & _words(t["name"] + " " + t.get("description", ""))), t["name"]),
        )
        found = [t["name"] for t in ranked[:3]]
        blocks = [
            {"type": "text", "text": "Let me look."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": SEARCH_TOOL["name"],
                "input": {"query": self.query},
            },
            {
                "type": RESULT,
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found],
                },
            },
            {"type": "tool_use", "id": "toolu_1", "name": found[0], "input": {"text": "standup"}},
        ]
        return self._reply(body, blocks, "tool_use")

    @staticmethod
    def _reply(body: dict[str, Any], blocks: list[dict[str, Any]], stop: str) -> Reply:
        if not body.get("stream"):
            return message(blocks, stop_reason=stop)
        events: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        for block in blocks:
            if block["type"] == "text":
                events.append(text_block(block["text"]))
            elif block["type"] == "tool_use":
                events.append(tool_block(block["id"], block["name"], json.dumps(block["input"])))
            elif block["type"] == "server_tool_use":  # its input streams like a tool call's
                start = {**block, "input": {}}
                events.append(
                    (start, [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}])
                )
            else:
                events.append((block, []))
        return stream_events(events, stop)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with FakeApi(MessagesApi()) as fake:
        yield fake


def _model(api: FakeApi) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key="sk-ant-test", base_url=api.url, retry_backoff_s=0.01)


def _check_wire(api: FakeApi) -> None:
    first, second = api.bodies
    tools = first["tools"]
    assert tools[0] == {**SEARCH_TOOL, "cache_control": {"type": "ephemeral"}}  # the only tool shown
    assert len(tools) == 1 + 201 and all(t.get("defer_loading") is True for t in tools[1:])
    assert not {"find_tools", "use_tools"} & {t["name"] for t in tools}
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["server_tool_use", RESULT, "text", "tool_use"]
    assert assistant["content"][0]["input"] == {"query": "create a new calendar meeting event"}
    assert assistant["content"][1]["content"]["tool_references"][0] == {
        "type": "tool_reference",
        "tool_name": "cal_create_event",
    }
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    assert second["tools"] == first["tools"]  # the same prefix: the prompt cache holds


async def test_the_api_searches_loads_and_the_agent_calls(api: FakeApi, tmp_path: Path) -> None:
    from toolbridge.runtime import create_runtime

    (tmp_path / "state").mkdir()
    log = tmp_path / "state" / "calls.log"
    base = ["model:anthropic:claude-test", "effect:write"]
    runtime = create_runtime(permissions=[*base, "tool:cal_create_event"])
    strict = create_runtime(permissions=base)
    try:
        async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state"), "200"]) as client:
            agent = Agent(_model(api), [McpToolProvider(client)], tool_search=ToolSearch(threshold=50))
            result = await agent.run("book the standup")
            assert result.output == "booked"
            _check_wire(api)
            assert log.read_text(encoding="utf-8") == "cal_create_event standup\n"
            # streamed, the search's blocks are assembled from their events and go back the same way
            api.seen.clear()
            events = [e async for e in agent.stream("book the standup")]
            assert events[-1].type == "run-finished", events[-1]
            _check_wire(api)
            # governed: no grants for meta tools; the tool the search loaded is checked and journaled
            governed = Agent(_model(api), [McpToolProvider(client)], tool_search=50)
            result = await runtime.run(governed, "book the standup")
            assert result.outcome == "succeeded", result.error_code
            assert [c.tool_id for c in runtime.inspect(result.run_id).calls] == ["cal_create_event"]
            refused = await strict.run(Agent(_model(api), [McpToolProvider(client)], tool_search=50), "x")
            assert refused.error_code == "PERMISSION_DENIED"
    finally:
        runtime.close()
        strict.close()
    assert log.read_text(encoding="utf-8").count("cal_create_event") == 3


async def test_pinned_regex_meta_and_under_the_threshold(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    with FakeApi() as api:
        for _ in range(4):
            api.replies.append(message([{"type": "text", "text": "ok"}]))
        async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state"), "60"]) as client:
            provider = McpToolProvider(client)
            pinned = ToolSearch(threshold=10, pinned=("mail_get_message",), native="regex")
            await Agent(_model(api), [provider], tool_search=pinned).run("hi")
            await Agent(_model(api), [provider], tool_search=ToolSearch(threshold=10, native=None)).run("hi")
            await Agent(_model(api), [provider], tool_search=100).run("hi")
    regex, meta, under = (b["tools"] for b in api.bodies)
    assert regex[0] == {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    shown = [t["name"] for t in regex if not t.get("defer_loading")]
    assert shown == ["tool_search_tool_regex", "mail_get_message"]
    assert "cache_control" in next(t for t in regex if t["name"] == "mail_get_message")
    assert [t["name"] for t in meta] == ["find_tools", "use_tools"]  # native=None: the meta tools
    assert len(under) == 61 and "defer_loading" not in str(under) and "tool_search" not in str(under)


async def test_a_search_error_goes_back_and_a_broken_streamed_query_is_one_error() -> None:
    from toolbridge.agent.models import Message, ModelRequest, NativeToolSearch
    from toolbridge.tools import ToolSpec

    failed = {
        "type": RESULT,
        "tool_use_id": "srvtoolu_9",
        "content": {"type": "tool_search_tool_result_error", "error_code": "too_many_requests"},
    }
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_9",
        "name": "tool_search_tool_bm25",
        "input": {"query": "x"},
    }
    spec = ToolSpec(name="mail_get_message", parameters={"type": "object"})
    with FakeApi() as api:
        api.replies.append(
            message(
                [
                    search,
                    failed,
                    {"type": "tool_use", "id": "toolu_9", "name": "mail_get_message", "input": {}},
                ],
                "tool_use",
            )
        )
        api.replies.append(message([{"type": "text", "text": "ok"}]))
        api.replies.append(
            stream_events(
                [({**search, "input": {}}, [{"type": "input_json_delta", "partial_json": '{"query": '}])],
                "tool_use",
            )
        )
        model = _model(api)
        native = NativeToolSearch(frozenset({"mail_get_message"}))
        first = await model.request(ModelRequest((Message("user", "send"),), (spec,), tool_search=native))
        assert first.tool_calls[0].name == "mail_get_message"
        turn = Message("assistant", tool_calls=first.tool_calls)
        answer = Message("tool", "sent", tool_call_id="toolu_9", name="mail_get_message")
        await model.request(
            ModelRequest((Message("user", "send"), turn, answer), (spec,), tool_search=native)
        )
        assert api.bodies[1]["messages"][1]["content"][:2] == [
            search,
            failed,
        ]  # the error block as the API sent it
        with pytest.raises(ModelError) as caught:
            async for _ in model.request_stream(
                ModelRequest((Message("user", "x"),), (spec,), tool_search=native)
            ):
                pass
        assert caught.value.code == "ERR_MODEL_BAD_RESPONSE"
        await model.aclose()
