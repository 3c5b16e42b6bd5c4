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
from hypothesis import given, settings
from hypothesis import strategies as st
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
    """The API's side of the exchange: search, check and answer. Like the API, any request whose
    conversation calls a deferred tool no search result loaded is refused. With `pauses`, a new
    turn is first paused that many times (`pause_turn`, the search asked but not yet answered);
    a paused turn sent back (the conversation ends with it) goes on where it stopped."""

    def __init__(self, pauses: int = 0) -> None:
        self.query = "create a new calendar meeting event"
        self.pauses = pauses
        self.left = 0
        self.continued: list[list[dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        tools = body.get("tools", [])
        deferred = {t["name"]: t for t in tools if t.get("defer_loading")}
        messages = body["messages"]
        for turn in messages:  # the API: a deferred tool is callable only once a search loaded it
            for block in turn["content"]:
                name = block.get("name")
                if block.get("type") == "tool_use" and name in deferred and name not in _loaded(messages):
                    return error(400, "invalid_request_error", "tool reference not loaded")
        last = messages[-1]
        if last["role"] == "user" and last["content"][0].get("type") == "tool_result":
            return self._reply(body, [{"type": "text", "text": "booked"}], "end_turn")
        asked = _words(self.query)
        ranked = sorted(
            deferred.values(),
            key=lambda t: (-len(asked & _words(t["name"] + " " + t.get("description", ""))), t["name"]),
        )
        found = [t["name"] for t in ranked[:3]]
        search = {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": SEARCH_TOOL["name"],
            "input": {"query": self.query},
        }
        result = {
            "type": RESULT,
            "tool_use_id": "srvtoolu_1",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found],
            },
        }
        call = {"type": "tool_use", "id": "toolu_1", "name": found[0], "input": {"text": "standup"}}
        if last["role"] == "user":
            self.left = self.pauses
        else:  # a paused turn sent back as it came
            self.continued.append(last["content"])
        if self.left:
            self.left -= 1
            if last["role"] == "user":
                return self._reply(body, [{"type": "text", "text": "Let me look."}, search], "pause_turn")
            return self._reply(body, [{"type": "text", "text": "Still looking."}], "pause_turn")
        if last["role"] == "assistant":
            return self._reply(body, [result, call], "tool_use")
        return self._reply(body, [{"type": "text", "text": "Let me look."}, search, result, call], "tool_use")

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
    # the turn goes back as the API sent it (it was [search, result, text, call] before it went
    # back verbatim: the API asks for a turn's content as it came)
    assert [b["type"] for b in assistant["content"]] == ["text", "server_tool_use", RESULT, "tool_use"]
    assert assistant["content"][1]["input"] == {"query": "create a new calendar meeting event"}
    assert assistant["content"][2]["content"]["tool_references"][0] == {
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


async def test_a_paused_turn_goes_back_as_it_came_bounded_and_counted(tmp_path: Path) -> None:
    from toolbridge.agent import MAX_PAUSES
    from toolbridge.agent.models import NativeSearch
    from toolbridge.errors import AgentError
    from toolbridge.runtime import create_runtime

    (tmp_path / "state").mkdir()
    responder = MessagesApi(pauses=1)
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "tool_search_tool_bm25",
        "input": {"query": responder.query},
    }
    paused = {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, search]}
    grants = ["model:anthropic:claude-test", "effect:write", "tool:cal_create_event"]
    runtime = create_runtime(permissions=grants)
    tight = create_runtime(permissions=grants, limits={"max_model_calls": 2})
    events: list[Any] = []
    runtime.subscribe(events.append)
    try:
        with FakeApi(responder) as api:
            async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state"), "200"]) as client:
                agent = Agent(_model(api), [McpToolProvider(client)], tool_search=50)
                for streamed in (False, True):
                    api.seen.clear()
                    if streamed:
                        done = [e async for e in agent.stream("book the standup")][-1]
                        assert done.type == "run-finished", done
                        result = done.result
                    else:
                        result = await agent.run("book the standup")
                    assert result.output == "booked"
                    first, second, third = api.bodies
                    # the paused turn goes back as it came, and nothing else: no user message after it
                    assert second["messages"] == [first["messages"][0], paused]
                    assert [b["type"] for b in third["messages"][1]["content"]] == [
                        "text",
                        "server_tool_use",
                        RESULT,
                        "tool_use",
                    ]
                    assert [s.finish_reason for s in result.steps] == ["paused", "tool-calls", "stop"]
                    # the search is shown in the step its result came in, with the query of the paused turn
                    (found,) = result.steps[1].native_searches
                    assert found == NativeSearch(responder.query, found.loaded)
                    assert found.loaded[0] == "cal_create_event" and len(found.loaded) == 3
                    assert responder.continued == [paused["content"]]
                    responder.continued.clear()
                # governed: each continuation is a model call; the search's loaded tools are an event
                result = await runtime.run(agent, "book the standup")
                assert result.outcome == "succeeded", result.error_code
                assert result.usage["model_calls"] == 3
                searched = [e for e in events if e.type == "model.tool_search"]
                assert [e.data for e in searched] == [
                    {"call": 2, "searches": 1, "loaded": sorted(found.loaded)}
                ]
                assert responder.query not in json.dumps([e.to_dict() for e in events])  # never the query
                refused = await tight.run(agent, "book the standup")
                assert (refused.outcome, refused.error_code) == ("failed", "LIMIT_EXCEEDED")
                # bounded: a turn paused again and again ends the run, one clear code
                responder.pauses = 100
                api.seen.clear()
                with pytest.raises(AgentError) as caught:
                    await agent.run("book the standup")
                assert caught.value.code == "ERR_AGENT_MAX_PAUSES"
                assert len(api.seen) == 1 + MAX_PAUSES
                stopped = await runtime.run(agent, "book the standup")
                assert stopped.error_code == "LIMIT_EXCEEDED"
    finally:
        runtime.close()
        tight.close()


async def test_a_run_continued_in_another_process_keeps_what_the_search_loaded(tmp_path: Path) -> None:
    """The conversation is written out as JSON and read back by a fresh model (what a new process
    has): the search's blocks travel in the messages, so the API still finds the tools they loaded.
    Without them (a conversation written out before `native` existed) the API refuses it."""
    from toolbridge.agent import message_to_dict
    from toolbridge.errors import ConfigError

    (tmp_path / "state").mkdir()
    with FakeApi(MessagesApi()) as api:
        async with StdioClient(sys.executable, [str(CATALOG), str(tmp_path / "state"), "200"]) as client:
            first = await Agent(_model(api), [McpToolProvider(client)], tool_search=50).run("book it")
            saved = json.dumps([message_to_dict(m) for m in first.messages])
            assert json.loads(saved)[1]["native"]["blocks"][2]["type"] == RESULT
            history = [*json.loads(saved), {"role": "user", "content": "and again"}]
            fresh = Agent(_model(api), [McpToolProvider(client)], tool_search=50)
            again = await fresh.run(history)
            assert again.output == "booked"
            sent = api.bodies[-2]["messages"][1]["content"]  # the first run's turn, as the API sent it
            assert [b["type"] for b in sent] == ["text", "server_tool_use", RESULT, "tool_use"]
            assert [message_to_dict(m) for m in again.messages[: len(history)]] == history
            stripped = [{k: v for k, v in m.items() if k != "native"} for m in history]
            with pytest.raises(ModelError):
                await Agent(_model(api), [McpToolProvider(client)], tool_search=50).run(stripped)
    for bad in ({"provider": "anthropic", "blocks": "x"}, {"blocks": []}, {"provider": "a", "blocks": [1]}):
        with pytest.raises(ConfigError) as caught:
            await fresh.run([{"role": "user", "content": "x"}, {"role": "assistant", "native": bad}])
        assert caught.value.code == "ERR_INVALID_INPUT"
    with pytest.raises(ConfigError):
        await fresh.run([{"role": "user", "content": "x", "native": {"provider": "a", "blocks": []}}])


async def test_the_manifest_sets_native_and_check_reports_bad_values(tmp_path: Path) -> None:
    """`Ai.Agent`'s `toolSearch` object: `native: regex` reaches the wire, `native: none` gives the
    meta tools; `toolbridge check` reports bad values with stable codes."""
    from toolbridge.manifest import check_manifest, load_manifest

    (tmp_path / "state").mkdir()
    args = json.dumps([str(CATALOG), str(tmp_path / "state"), "60"])

    def write(search: str, url: str = "http://127.0.0.1:9") -> Path:
        path = tmp_path / "agent.yaml"
        path.write_text(
            f"""
kind: AiAnthropic.AnthropicModel
metadata: {{ name: Claude }}
model: claude-test
apiKey: "${{{{ secrets.anthropicApiKey }}}}"
baseUrl: {url}
---
kind: Mcp.StdioClient
metadata: {{ name: Catalog }}
command: {sys.executable}
args: {args}
---
kind: AiMcp.ToolProvider
metadata: {{ name: CatalogTools }}
client: !ref Catalog
---
kind: Ai.Agent
metadata: {{ name: Finder }}
model: !ref Claude
toolProviders: [ {{ provider: !ref CatalogTools }} ]
toolSearch: {search}
""",
            encoding="utf-8",
        )
        return path

    with FakeApi() as api:
        for _ in range(2):
            api.replies.append(message([{"type": "text", "text": "ok"}]))
        for search in (
            "{ threshold: 10, native: regex, pinned: [mail_get_message] }",
            "{ threshold: 10, native: none }",
        ):
            manifest = load_manifest(write(search, api.url), secrets={"anthropicApiKey": "sk-ant-test"})
            async with manifest.open() as live:
                agent = await live.agent()
                assert (await agent.run("hi")).output == "ok"
    regex, meta = (b["tools"] for b in api.bodies)
    assert regex[0]["name"] == "tool_search_tool_regex"
    assert [t["name"] for t in regex if not t.get("defer_loading")] == [
        "tool_search_tool_regex",
        "mail_get_message",
    ]
    assert [t["name"] for t in meta] == ["find_tools", "use_tools"]
    for search, code, where in (
        ("{ native: bm26 }", "ERR_MANIFEST_INVALID_VALUE", "toolSearch.native"),
        ("{ threshold: -1 }", "ERR_MANIFEST_INVALID_VALUE", "toolSearch.threshold"),
        ("{ maxResults: 51 }", "ERR_MANIFEST_INVALID_VALUE", "toolSearch.maxResults"),
        ("{ nativ: bm25 }", "ERR_MANIFEST_UNKNOWN_FIELD", "toolSearch.nativ"),
        ("many", "ERR_MANIFEST_WRONG_TYPE", "toolSearch"),
        ("{ native: true }", "ERR_MANIFEST_INVALID_VALUE", "toolSearch.native"),
    ):
        report = check_manifest(write(search), secrets={"anthropicApiKey": "sk-ant-test-0123456789"})
        assert [(d.code, f"`{where}`" in d.message) for d in report.diagnostics] == [(code, True)], search


async def test_the_context_limit_counts_a_turns_native_blocks() -> None:
    """Blocks carried back on a message are sent: the runtime's `max_context_bytes` counts them
    (a conversation read from a file cannot slip a huge one past it)."""
    from toolbridge.runtime import create_runtime

    big = {"type": "thinking", "thinking": "x" * 6000, "signature": "s"}
    turn = {
        "role": "assistant",
        "content": "hm",
        "native": {"provider": "anthropic", "blocks": [big, {"type": "text", "text": "hm"}]},
    }
    history = [{"role": "user", "content": "a"}, turn, {"role": "user", "content": "b"}]
    runtime = create_runtime(permissions=["model:anthropic:claude-test"], limits={"max_context_bytes": 4000})
    try:
        with FakeApi() as api:
            api.replies.append(message([{"type": "text", "text": "ok"}]))
            agent = Agent(_model(api), [])
            plain = [{k: v for k, v in m.items() if k != "native"} for m in history]
            assert (await runtime.run(agent, plain)).outcome == "succeeded"
            refused = await runtime.run(agent, history)
            assert (refused.outcome, refused.error_code) == ("failed", "LIMIT_EXCEEDED")
            assert len(api.seen) == 1  # the refused request was never sent
    finally:
        runtime.close()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(native=_JSON | st.fixed_dictionaries({"provider": _JSON, "blocks": _JSON}))
def test_any_native_value_is_a_message_or_one_input_error(native: Any) -> None:
    """A conversation read from a file is untrusted: its `native` is taken or refused, never more."""
    from toolbridge.agent import build_messages, message_to_dict
    from toolbridge.errors import ConfigError

    raw = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "native": native}]
    try:
        messages = build_messages(raw, None)
    except ConfigError as exc:
        assert exc.code == "ERR_INVALID_INPUT"
        return
    back = message_to_dict(messages[1])
    assert build_messages([raw[0], back], None)[1] == messages[1]
