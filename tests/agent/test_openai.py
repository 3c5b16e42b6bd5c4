"""`OpenAIModel` on the real `openai` SDK against a loopback OpenAI-compatible server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from agent_fake_openai import FakeOpenAI, Reply, chunk, completion
from provider_checks import REPLY_DELAY_S, cancelled_while_the_model_is_slow

from toolbridge.agent import Agent, Message, ModelPrices, ModelRequest, OpenAIModel, TextDelta, Usage
from toolbridge.agent.models import ModelResponse, estimate_cost_micros, to_strict_schema
from toolbridge.content import ImagePart, TextPart
from toolbridge.errors import ModelError
from toolbridge.functions import FunctionTools
from toolbridge.tools import ToolSpec

SECRET = "sk-test-SECRET-1234567890"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def model(server: FakeOpenAI, **kwargs: object) -> OpenAIModel:
    return OpenAIModel("gpt-test", api_key=SECRET, base_url=server.base_url, retry_backoff_s=0.01, **kwargs)  # type: ignore[arg-type]


WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
)


async def test_text_turn_usage_and_wire_format(server: FakeOpenAI) -> None:
    server.replies.append(Reply(body=completion("Hello!")))
    m = model(server, options={"maxTokens": 50, "topK": 3})
    response = await m.request(
        ModelRequest(
            messages=(Message("system", "be brief"), Message("user", "hi")),
            tools=(WEATHER,),
            options={"temperature": 0},
        )
    )
    assert response == ModelResponse(text="Hello!", usage=Usage(11, 7, 18, 1), finish_reason="stop")
    sent = server.requests[0]
    assert sent["model"] == "gpt-test"
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert sent["max_tokens"] == 50 and sent["temperature"] == 0 and sent["top_k"] == 3
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": dict(WEATHER.parameters),
            "description": "Weather for a city.",
        },
    }
    assert server.auth_headers[0] == f"Bearer {SECRET}"
    assert m.id == "openai:gpt-test"
    assert SECRET not in repr(m)
    await m.aclose()


async def test_tool_call_parsed(server: FakeOpenAI) -> None:
    server.replies.append(
        Reply(
            body=completion(
                None,
                [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
                "tool_calls",
            )
        )
    )
    m = model(server)
    response = await m.request(ModelRequest(messages=(Message("user", "weather?"),), tools=(WEATHER,)))
    assert response.finish_reason == "tool-calls"
    assert [(c.id, c.name, dict(c.arguments)) for c in response.tool_calls] == [
        ("c1", "get_weather", {"city": "Oslo"})
    ]
    await m.aclose()


async def test_streamed_tool_call_split_across_chunks(server: FakeOpenAI) -> None:
    server.replies.append(
        Reply(
            chunks=[
                chunk({"role": "assistant", "content": "Let me "}),
                chunk({"content": "check."}),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "get_", "arguments": ""},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": '{"ci'}}]}),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "call_b",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":'},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]}),
                chunk({"tool_calls": [{"index": 1, "function": {"arguments": ' "Rome", "unit": null}'}}]}),
                chunk({}, finish_reason="tool_calls"),
                chunk({}, usage=(20, 9)),
            ]
        )
    )
    m = model(server)
    items = [
        item
        async for item in m.request_stream(ModelRequest(messages=(Message("user", "w"),), tools=(WEATHER,)))
    ]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["Let me ", "check."]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.text == "Let me check."
    assert [(c.id, c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "get_weather", {"city": "Rome", "unit": None}),
    ]
    assert final.usage == Usage(20, 9, 29, 1)
    assert final.finish_reason == "tool-calls"
    assert server.requests[0]["stream"] is True
    await m.aclose()


async def test_429_then_success_is_retried(server: FakeOpenAI) -> None:
    server.replies.append(Reply(429, {"error": {"message": "slow down", "type": "rate_limit"}}))
    server.replies.append(Reply(503, {"error": {"message": "overloaded"}}))
    server.replies.append(Reply(body=completion("ok")))
    m = model(server)
    start = time.monotonic()
    response = await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert response.text == "ok"
    assert len(server.requests) == 3
    assert time.monotonic() - start < 2
    await m.aclose()


async def test_429_after_retries_is_rate_limit_error(server: FakeOpenAI) -> None:
    for _ in range(3):
        server.replies.append(Reply(429, {"error": {"message": "slow down"}}))
    m = model(server, max_retries=2)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_RATE_LIMIT"
    assert len(server.requests) == 3
    await m.aclose()


async def test_401_is_auth_error_without_the_key(server: FakeOpenAI) -> None:
    server.replies.append(
        Reply(401, {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}})
    )
    m = model(server)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH"
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert len(server.requests) == 1  # not retried
    await m.aclose()


async def test_404_is_not_found(server: FakeOpenAI) -> None:
    server.replies.append(Reply(404, {"error": {"message": "The model `nope` does not exist"}}))
    m = model(server)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_NOT_FOUND"
    await m.aclose()


async def test_unreachable_server_is_unavailable() -> None:
    with FakeOpenAI() as fake:
        url = fake.base_url
    m = OpenAIModel("gpt-test", api_key=SECRET, base_url=url, max_retries=1, retry_backoff_s=0.01)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_UNAVAILABLE"
    await m.aclose()


async def test_missing_key_is_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    m = OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH"


@pytest.mark.parametrize("arguments", ['{"city": "Oslo"', "[1, 2]"])
async def test_malformed_arguments_are_an_error(server: FakeOpenAI, arguments: str) -> None:
    server.replies.append(
        Reply(
            body=completion(
                None,
                [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments},
                    }
                ],
                "tool_calls",
            )
        )
    )
    m = model(server)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER,)))
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE"
    assert "get_weather" in info.value.message
    await m.aclose()


async def test_strict_schemas_and_nulls_dropped(server: FakeOpenAI) -> None:
    server.replies.append(
        Reply(
            body=completion(
                None,
                [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo","unit":null}'},
                    }
                ],
                "tool_calls",
            )
        )
    )
    open_tool = ToolSpec(name="anything", parameters={"type": "object", "additionalProperties": True})
    m = model(server, strict_schemas=True)
    response = await m.request(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER, open_tool)))
    sent = server.requests[0]["tools"]
    assert sent[0]["function"]["strict"] is True
    assert sent[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    }
    assert "strict" not in sent[1]["function"]  # fell back to the original
    assert sent[1]["function"]["parameters"] == {"type": "object", "additionalProperties": True}
    assert dict(response.tool_calls[0].arguments) == {"city": "Oslo"}
    assert dict(WEATHER.parameters)["required"] == ["city"]  # original untouched
    await m.aclose()


def test_strict_schema_resolves_local_refs_and_falls_back() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {"p": {"$ref": "#/$defs/Point", "description": "where"}},
        "required": ["p"],
    }
    strict = to_strict_schema(schema)
    assert strict == {
        "type": "object",
        "properties": {
            "p": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "description": "where",
                "additionalProperties": False,
            }
        },
        "required": ["p"],
        "additionalProperties": False,
    }
    assert "$defs" in schema  # the original is unchanged
    recursive = {
        "$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}},
        "$ref": "#/$defs/N",
    }
    assert to_strict_schema(recursive) is None
    assert to_strict_schema({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}) is None


async def test_image_tool_result_goes_in_a_synthetic_user_message(server: FakeOpenAI) -> None:
    server.replies.append(Reply(body=completion("I see a pixel.")))
    m = model(server)
    messages = (
        Message("user", "look"),
        Message("assistant", "", tool_calls=(__import__("toolbridge").agent.ToolCall("c1", "img", {}),)),
        Message("tool", (TextPart("here"), ImagePart(PNG, "image/png")), tool_call_id="c1", name="img"),
    )
    await m.request(ModelRequest(messages=messages))
    wire = server.requests[0]["messages"]
    assert wire[1]["tool_calls"][0]["function"] == {"name": "img", "arguments": "{}"}
    assert wire[2] == {"role": "tool", "tool_call_id": "c1", "content": "here\n[image: image/png, 70 bytes]"}
    assert wire[3]["role"] == "user"
    assert wire[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    await m.aclose()


async def test_agent_streams_over_openai_and_costs(server: FakeOpenAI) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server.replies.append(
        Reply(
            chunks=[
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "t1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a": 2,'},
                            }
                        ]
                    }
                ),
                chunk(
                    {"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 3}'}}]},
                    finish_reason="tool_calls",
                ),
                chunk({}, usage=(100, 10)),
            ]
        )
    )
    server.replies.append(
        Reply(chunks=[chunk({"content": "5"}), chunk({}, finish_reason="stop"), chunk({}, usage=(120, 1))])
    )
    m = model(server, prices=ModelPrices(150_000, 600_000))
    agent = Agent(m, [FunctionTools([add])])
    events = [e async for e in agent.stream("2+3?")]
    assert [e.type for e in events] == [
        "tool-call-started",
        "tool-call-finished",
        "step-finished",
        "text-delta",
        "step-finished",
        "run-finished",
    ]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.text == "5"
    assert result.usage == Usage(220, 11, 231, 2)
    assert estimate_cost_micros(m, result.usage) == 40  # 220*0.15 + 11*0.6 = 39.6 -> 40
    assert m.estimate_cost_micros(result.usage) == 40
    second = server.requests[1]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "t1", "content": "5"}
    await m.aclose()


async def test_cancelling_a_slow_request_leaves_no_task(server: FakeOpenAI) -> None:
    import openai  # noqa: F401  (imported before the clock starts: the first import is slow)

    server.replies.append(Reply(body=completion("too late"), delay=REPLY_DELAY_S))
    m = model(server)
    await cancelled_while_the_model_is_slow(m)


async def test_model_failure_ends_the_run_with_its_code(server: FakeOpenAI) -> None:
    server.replies.append(Reply(403, {"error": {"message": "forbidden"}}))
    m = model(server)
    with pytest.raises(ModelError) as info:
        await Agent(m).run("hello")
    assert info.value.code == "ERR_MODEL_AUTH"
    events = []
    server.replies.append(Reply(400, {"error": {"message": "bad"}}))
    async for event in Agent(m).stream("hello"):
        events.append(event)
    assert [e.type for e in events] == ["error"] and events[0].code == "ERR_MODEL_BAD_REQUEST"  # type: ignore[union-attr]
    await m.aclose()


async def test_stream_is_retried_before_its_first_chunk(server: FakeOpenAI) -> None:
    server.replies.append(Reply(429, {"error": {"message": "slow down"}}))
    server.replies.append(Reply(chunks=[chunk({"content": "fine"}), chunk({}, finish_reason="stop")]))
    m = model(server)
    items = [i async for i in m.request_stream(ModelRequest(messages=(Message("user", "x"),)))]
    assert isinstance(items[-1], ModelResponse) and items[-1].text == "fine"
    assert items[-1].usage == Usage(requests=1)  # the server sent no usage chunk
    server.replies.append(Reply(401, {"error": {"message": "bad key"}}))
    with pytest.raises(ModelError) as info:
        async for _ in m.request_stream(ModelRequest(messages=(Message("user", "x"),))):
            pass
    assert info.value.code == "ERR_MODEL_AUTH"
    await m.aclose()


WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="


async def test_audio_tool_result_goes_as_input_audio_to_audio_models(server: FakeOpenAI) -> None:
    from toolbridge.content import AudioPart

    def record() -> AudioPart:
        """Record a short clip."""
        return AudioPart(WAV, "audio/wav")

    for name, audio in (("gpt-4o-audio-preview", True), ("gpt-4o-mini", False)):
        server.requests.clear()
        server.replies.append(
            Reply(
                body=completion(
                    None,
                    [{"id": "a1", "type": "function", "function": {"name": "record", "arguments": "{}"}}],
                )
            )
        )
        server.replies.append(Reply(body=completion("heard it")))
        m = OpenAIModel(name, api_key=SECRET, base_url=server.base_url)
        assert m.supports_audio is audio
        await Agent(m, [FunctionTools([record])]).run("listen")
        wire = server.requests[1]["messages"]
        assert wire[2] == {"role": "tool", "tool_call_id": "a1", "content": "[audio: audio/wav, 44 bytes]"}
        if audio:
            assert wire[3]["role"] == "user"
            assert wire[3]["content"][1] == {
                "type": "input_audio",
                "input_audio": {"data": WAV, "format": "wav"},
            }
        else:
            assert len(wire) == 3  # the placeholder only
        await m.aclose()
    user_audio = OpenAIModel("gpt-test", api_key=SECRET, base_url=server.base_url, supports_audio=True)
    server.requests.clear()
    server.replies.append(Reply(body=completion("ok")))

    await user_audio.request(
        ModelRequest(messages=(Message("user", (AudioPart(WAV, "audio/wav"), AudioPart(WAV, "audio/ogg"))),))
    )
    content = server.requests[0]["messages"][0]["content"]
    assert content[0]["type"] == "input_audio"
    assert content[1] == {"type": "text", "text": "[audio: audio/ogg, 44 bytes]"}  # not a format it takes
    await user_audio.aclose()


async def test_cached_prompt_tokens_are_reported(server: FakeOpenAI) -> None:
    body = completion("hi", usage=(2000, 10))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 1536}
    server.replies.append(Reply(body=body))
    m = model(server, prices=ModelPrices(1_000_000, 2_000_000, cache_read_per_million_micros=100_000))
    response = await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert response.usage == Usage(2000, 10, 2010, 1, cache_read_tokens=1536)
    assert m.estimate_cost_micros(response.usage) == 464 + 154 + 20  # 464 plain, 1536 at 0.1, 10 out
    await m.aclose()
