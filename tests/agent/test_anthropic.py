"""`AnthropicModel` on the real `anthropic` SDK against a loopback server speaking the Messages API."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agent_fake_http import FakeApi, Reply, sse_anthropic
from provider_checks import REPLY_DELAY_S, cancelled_while_the_model_is_slow, stream_closed_after_two_deltas

from toolbridge.agent import (
    Agent,
    AnthropicModel,
    Message,
    ModelPrices,
    ModelRequest,
    TextDelta,
    ToolCall,
    Usage,
)
from toolbridge.agent.models import ModelResponse
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.content import AudioPart, ImagePart, TextPart
from toolbridge.errors import ModelError
from toolbridge.functions import FunctionTools
from toolbridge.tools import ToolSpec

SECRET = "sk-ant-test-SECRET-1234567890"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with FakeApi() as fake:
        yield fake


def model(api: FakeApi, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key=SECRET, base_url=api.url, retry_backoff_s=0.01, **kwargs)


def message(
    content: list[dict[str, Any]], stop_reason: str = "end_turn", usage: dict[str, int] | None = None
) -> Reply:
    """A recorded Messages API response body."""
    return Reply(
        body={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 12, "output_tokens": 5},
        }
    )


def error(status: int, kind: str, text: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": text}})


def stream_events(
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]], stop_reason: str, usage_out: int = 9
) -> Reply:
    """The event stream of one message: each block's start, deltas and stop, as the API sends them."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_02",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 30,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 100,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "ping"},
    ]
    for index, (start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": usage_out},
        }
    )
    events.append({"type": "message_stop"})
    return sse_anthropic(events)


def text_block(*pieces: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]


def tool_block(call_id: str, name: str, *json_pieces: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return (
        {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        [{"type": "input_json_delta", "partial_json": p} for p in json_pieces],
    )


async def test_text_turn_wire_format_caching_and_usage(api: FakeApi) -> None:
    api.replies.append(
        message(
            [{"type": "text", "text": "Hello!"}],
            usage={
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_creation_input_tokens": 200,
                "cache_read_input_tokens": 1000,
            },
        )
    )
    m = model(api, options={"temperature": 0.2, "stopSequences": ["END"]})
    response = await m.request(
        ModelRequest(
            messages=(Message("system", "be brief"), Message("user", "hi")),
            tools=(WEATHER, ToolSpec(name="noop", parameters={})),
        )
    )
    assert response == ModelResponse(
        text="Hello!",
        usage=Usage(1210, 5, 1215, 1, cache_read_tokens=1000, cache_write_tokens=200),
        finish_reason="stop",
    )
    seen = api.seen[0]
    assert seen.path == "/v1/messages"
    assert SECRET in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    body = seen.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 4096
    assert body["temperature"] == 0.2 and body["stop_sequences"] == ["END"]
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "input_schema": dict(WEATHER.parameters),
            "description": "Weather for a city.",
        },
        {"name": "noop", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
    ]
    assert "stream" not in body
    assert m.id == "anthropic:claude-test" and SECRET not in repr(m)
    prices = ModelPrices(3_000_000, 15_000_000, cache_read_per_million_micros=300_000)
    # 10 plain + 200 written at the input price, 1000 read at the cache price, 5 out
    assert prices.cost_micros(response.usage) == 10 * 3 + 200 * 3 + 1000 * 0.3 + 5 * 15
    await m.aclose()


async def test_prompt_caching_off(api: FakeApi) -> None:
    api.replies.append(message([{"type": "text", "text": "ok"}]))
    m = model(api, prompt_caching=False, options={"max_tokens": 77})
    await m.request(ModelRequest(messages=(Message("system", "s"), Message("user", "u")), tools=(WEATHER,)))
    body = api.seen[0].body
    assert body["max_tokens"] == 77
    assert "cache_control" not in str(body)
    await m.aclose()


async def test_tool_round_trip_through_the_agent(api: FakeApi) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city.

        Args:
            city: the city.
        """
        return f"sunny in {city}"

    api.replies.append(
        message(
            [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
            stop_reason="tool_use",
        )
    )
    api.replies.append(message([{"type": "text", "text": "It is sunny."}]))
    m = model(api)
    result = await Agent(m, [FunctionTools([get_weather])], system="weather bot").run("Weather in Oslo?")
    assert result.text == "It is sunny."
    assert result.steps[0].finish_reason == "tool-calls"
    assert result.usage == Usage(24, 10, 34, 2)
    second = api.seen[1].body
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "sunny in Oslo"}],
                }
            ],
        },
    ]
    assert second["system"][0]["text"] == "weather bot"
    await m.aclose()


async def test_mcp_image_goes_inside_the_tool_result(api: FakeApi, everything_client: StdioClient) -> None:
    api.replies.append(
        message([{"type": "tool_use", "id": "toolu_img", "name": "get-tiny-image", "input": {}}], "tool_use")
    )
    api.replies.append(message([{"type": "text", "text": "A tiny image."}]))
    m = model(api)
    result = await Agent(m, [McpToolProvider(everything_client)]).run("show me")
    assert result.text == "A tiny image."
    turns = api.seen[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    (tool_result,) = turns[2]["content"]  # nothing but the tool result: no synthetic image message
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_img"
    images = [b for b in tool_result["content"] if b["type"] == "image"]
    assert len(images) == 1
    assert images[0]["source"]["type"] == "base64" and images[0]["source"]["media_type"] == "image/png"
    assert base64.b64decode(images[0]["source"]["data"]).startswith(b"\x89PNG")
    assert any(b["type"] == "text" for b in tool_result["content"])
    assert "is_error" not in tool_result
    await m.aclose()


async def test_failed_tool_is_an_error_result(api: FakeApi) -> None:
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the fuse blew")

    api.replies.append(
        message([{"type": "tool_use", "id": "t1", "name": "explode", "input": {}}], "tool_use")
    )
    api.replies.append(message([{"type": "text", "text": "sorry"}]))
    m = model(api)
    await Agent(m, [FunctionTools([explode])]).run("go")
    (tool_result,) = api.seen[1].body["messages"][-1]["content"]
    assert tool_result["is_error"] is True
    assert tool_result["content"][0]["text"].startswith("Error: ") and "the fuse blew" in str(tool_result)
    await m.aclose()


def test_media_translation_without_a_server() -> None:
    from toolbridge.agent.models._anthropic import to_anthropic_messages

    system, wire = to_anthropic_messages(
        (
            Message("system", "one"),
            Message(
                "user", (TextPart("look"), ImagePart(PNG, "image/png"), AudioPart("UklGRg==", "audio/wav"))
            ),
            Message("assistant", "", tool_calls=(ToolCall("a", "t", {}), ToolCall("b", "t", {"x": 1}))),
            Message("tool", (ImagePart(PNG, "image/tiff"),), tool_call_id="a"),
            Message("tool", "", tool_call_id="b"),
            Message("user", "and?"),
            Message("system", "two"),
        ),
        images=True,
    )
    assert system == "one\n\ntwo"
    assert wire[0]["content"][1]["type"] == "image"
    assert wire[0]["content"][2] == {"type": "text", "text": "[audio: audio/wav, 4 bytes]"}
    assert [b["type"] for b in wire[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert wire[2]["content"][0]["content"] == [{"type": "text", "text": "[image: image/tiff, 70 bytes]"}]
    assert "content" not in wire[2]["content"][1]  # an empty result has no empty text block
    _, blind = to_anthropic_messages((Message("user", (ImagePart(PNG, "image/png"),)),), images=False)
    assert blind[0]["content"] == [{"type": "text", "text": "[image: image/png, 70 bytes]"}]


async def test_streaming_text_and_tool_input_assembled(api: FakeApi) -> None:
    api.replies.append(
        stream_events(
            [
                text_block("Let me ", "check."),
                tool_block("toolu_a", "get_weather", "", '{"ci', 'ty": "Os', 'lo"}'),
                tool_block("toolu_b", "get_weather", '{"city": "Rome"}'),
            ],
            "tool_use",
        )
    )
    m = model(api)
    items = [
        i async for i in m.request_stream(ModelRequest(messages=(Message("user", "w"),), tools=(WEATHER,)))
    ]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["Let me ", "check."]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.text == "Let me check."
    assert [(c.id, c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("toolu_a", "get_weather", {"city": "Oslo"}),
        ("toolu_b", "get_weather", {"city": "Rome"}),
    ]
    assert final.finish_reason == "tool-calls"
    assert final.usage == Usage(130, 9, 139, 1, cache_read_tokens=100)
    assert api.seen[0].body["stream"] is True
    await m.aclose()


async def test_agent_streams_over_anthropic(api: FakeApi) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    api.replies.append(stream_events([tool_block("t1", "add", '{"a": 2,', ' "b": 3}')], "tool_use"))
    api.replies.append(stream_events([text_block("5")], "end_turn"))
    m = model(api)
    events = [e async for e in Agent(m, [FunctionTools([add])]).stream("2+3?")]
    assert [e.type for e in events] == [
        "tool-call-started",
        "tool-call-finished",
        "step-finished",
        "text-delta",
        "step-finished",
        "run-finished",
    ]
    assert events[-1].result.text == "5"  # type: ignore[union-attr]
    assert api.seen[1].body["messages"][-1]["content"][0]["content"] == [{"type": "text", "text": "5"}]
    await m.aclose()


async def test_429_and_529_then_success_are_retried(api: FakeApi) -> None:
    api.replies.append(error(429, "rate_limit_error", "slow down"))
    api.replies.append(error(529, "overloaded_error", "Overloaded"))
    api.replies.append(error(500, "api_error", "oops"))
    api.replies.append(message([{"type": "text", "text": "ok"}]))
    m = model(api)
    start = time.monotonic()
    response = await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert response.text == "ok" and len(api.seen) == 4
    assert time.monotonic() - start < 3
    await m.aclose()


async def test_retries_are_bounded(api: FakeApi) -> None:
    for _ in range(3):
        api.replies.append(error(429, "rate_limit_error", "slow down"))
    m = model(api, max_retries=2)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_RATE_LIMIT" and len(api.seen) == 3
    api.replies.append(error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(ModelError) as info:
        await AnthropicModel("c", api_key=SECRET, base_url=api.url, max_retries=0).request(
            ModelRequest(messages=(Message("user", "x"),))
        )
    assert info.value.code == "ERR_MODEL_UNAVAILABLE" and "529" in info.value.message
    await m.aclose()


async def test_stream_retried_before_its_first_event(api: FakeApi) -> None:
    api.replies.append(error(529, "overloaded_error", "Overloaded"))
    api.replies.append(stream_events([text_block("fine")], "end_turn"))
    m = model(api)
    items = [i async for i in m.request_stream(ModelRequest(messages=(Message("user", "x"),)))]
    assert isinstance(items[-1], ModelResponse) and items[-1].text == "fine" and len(api.seen) == 2
    await m.aclose()


async def test_bad_key_is_auth_error_without_the_key(api: FakeApi) -> None:
    api.replies.append(error(401, "authentication_error", f"invalid x-api-key {SECRET}"))
    m = model(api)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH"
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert len(api.seen) == 1
    api.replies.append(error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ModelError) as info:
        async for _ in m.request_stream(ModelRequest(messages=(Message("user", "x"),))):
            pass
    assert info.value.code == "ERR_MODEL_AUTH"
    await m.aclose()


async def test_other_errors_keep_their_codes(api: FakeApi) -> None:
    api.replies.append(error(404, "not_found_error", "model: claude-nope"))
    api.replies.append(error(400, "invalid_request_error", "messages: empty"))
    api.replies.append(Reply(raw=b"<html>not json</html>", content_type="text/html"))
    m = model(api)
    codes = []
    for _ in range(3):
        with pytest.raises(ModelError) as info:
            await m.request(ModelRequest(messages=(Message("user", "x"),)))
        codes.append(info.value.code)
    assert codes == ["ERR_MODEL_NOT_FOUND", "ERR_MODEL_BAD_REQUEST", "ERR_MODEL_BAD_RESPONSE"]
    await m.aclose()


async def test_error_event_inside_a_stream(api: FakeApi) -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    api.replies.append(sse_anthropic(events))
    m = model(api)
    with pytest.raises(ModelError) as info:
        async for _ in m.request_stream(ModelRequest(messages=(Message("user", "x"),))):
            pass
    assert info.value.code == "ERR_MODEL_UNAVAILABLE"
    await m.aclose()


@pytest.mark.parametrize("pieces", [('{"city": "Oslo"',), ("[1, 2]",), ('{"city": ', "}")])
async def test_malformed_streamed_tool_input_is_an_error(api: FakeApi, pieces: tuple[str, ...]) -> None:
    api.replies.append(stream_events([tool_block("t1", "get_weather", *pieces)], "tool_use"))
    m = model(api)
    with pytest.raises(ModelError) as info:
        async for _ in m.request_stream(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER,))):
            pass
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and "get_weather" in info.value.message
    await m.aclose()


async def test_tool_input_that_is_not_an_object_is_an_error(api: FakeApi) -> None:
    api.replies.append(
        message([{"type": "tool_use", "id": "t1", "name": "get_weather", "input": ["Oslo"]}], "tool_use")
    )
    m = model(api)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER,)))
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and "get_weather" in info.value.message
    await m.aclose()


async def test_stop_reasons_map_to_finish_reasons(api: FakeApi) -> None:
    m = model(api)
    expected = {
        "end_turn": "stop",
        "max_tokens": "length",
        "stop_sequence": "stop",
        "refusal": "content-filter",
        "pause_turn": "paused",
        "model_context_window_exceeded": "length",
    }
    for stop in expected:
        api.replies.append(message([{"type": "text", "text": "t"}], stop))
    got = {}
    for stop in expected:
        got[stop] = (await m.request(ModelRequest(messages=(Message("user", "x"),)))).finish_reason
    assert got == expected
    await m.aclose()


async def test_thinking_blocks_go_back_with_their_tool_calls(api: FakeApi) -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    api.replies.append(
        message(
            [
                {"type": "thinking", "thinking": "I should ping.", "signature": "c2lnbmF0dXJl"},
                {"type": "tool_use", "id": "toolu_t", "name": "ping", "input": {}},
            ],
            "tool_use",
        )
    )
    api.replies.append(message([{"type": "text", "text": "pong it is"}]))
    m = model(api, options={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    await Agent(m, [FunctionTools([ping])]).run("ping?")
    assert api.seen[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assistant = api.seen[1].body["messages"][1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "I should ping.",
        "signature": "c2lnbmF0dXJl",
    }
    assert assistant["content"][1]["type"] == "tool_use"
    await m.aclose()


async def test_missing_key_is_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    m = AnthropicModel("claude-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH" and "ANTHROPIC_API_KEY" in info.value.message


async def test_unreachable_server_is_unavailable() -> None:
    with FakeApi() as fake:
        url = fake.url
    m = AnthropicModel("c", api_key=SECRET, base_url=url, max_retries=1, retry_backoff_s=0.01)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_UNAVAILABLE"
    await m.aclose()


async def test_cancelling_a_slow_request_leaves_no_task(api: FakeApi) -> None:
    api.replies.append(Reply(body={"never": "read"}, delay=REPLY_DELAY_S))
    m = model(api)
    import anthropic  # noqa: F401  (imported before the clock starts: the first import is slow)

    await cancelled_while_the_model_is_slow(m)


async def test_closing_a_stream_early_cancels_the_request(api: FakeApi) -> None:
    pieces = [f"word{i} " for i in range(40)]
    reply = stream_events([text_block(*pieces)], "end_turn")
    reply.gap = 0.05  # one event every 50 ms: about 2 s in all
    api.replies.append(reply)
    m = model(api)
    await stream_closed_after_two_deltas(api, m, pieces)


async def test_a_slow_answer_times_out_as_unavailable(api: FakeApi) -> None:
    import anthropic  # noqa: F401  (imported before the clock starts: the first import is slow)

    api.replies.append(Reply(body={"late": True}, delay=2))
    m = model(api, max_retries=0, timeout_s=0.3)
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_UNAVAILABLE" and "timed out" in info.value.message
    assert time.monotonic() - start < 1.8
    await m.aclose()
