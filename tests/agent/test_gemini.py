"""`GeminiModel` on the real `google-genai` SDK against a loopback server speaking the Gemini API."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pytest
from agent_fake_http import FakeApi, Reply, sse_gemini
from provider_checks import REPLY_DELAY_S, cancelled_while_the_model_is_slow, stream_closed_after_two_deltas

from toolbridge.agent import Agent, GeminiModel, Message, ModelRequest, TextDelta, ToolCall, Usage
from toolbridge.agent.models import ModelResponse, to_gemini_schema
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.content import AudioPart, ImagePart, TextPart
from toolbridge.errors import ModelError
from toolbridge.functions import FunctionTools
from toolbridge.tools import ToolSpec

SECRET = "AIza-test-SECRET-1234567890"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with FakeApi() as fake:
        yield fake


def get(obj: dict[str, Any], camel: str) -> Any:
    """A field in either JSON spelling (the API takes both; the SDK sends some nested ones in snake_case)."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return obj[camel] if camel in obj else obj[snake]


def model(api: FakeApi, **kwargs: Any) -> GeminiModel:
    return GeminiModel("gemini-test", api_key=SECRET, base_url=api.url, retry_backoff_s=0.01, **kwargs)


def usage_metadata(prompt: int = 12, out: int = 5, cached: int | None = None) -> dict[str, int]:
    meta = {"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out}
    if cached is not None:
        meta["cachedContentTokenCount"] = cached
    return meta


def candidate_body(parts: list[dict[str, Any]], finish: str | None = "STOP", **usage: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage_metadata(**usage),
        "modelVersion": "gemini-test",
        "responseId": "resp-1",
    }


def reply(parts: list[dict[str, Any]], finish: str = "STOP", **usage: Any) -> Reply:
    return Reply(body=candidate_body(parts, finish, **usage))


def error(status: int, state: str, text: str, reason: str | None = None) -> Reply:
    body: dict[str, Any] = {"error": {"code": status, "message": text, "status": state}}
    if reason:
        body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason}]
    return Reply(status, body)


async def test_text_turn_wire_format_and_usage(api: FakeApi) -> None:
    api.replies.append(reply([{"text": "Hello"}, {"text": "!"}], prompt=40, out=3, cached=32))
    m = model(api, options={"temperature": 0.1, "maxTokens": 64, "topK": 3})
    response = await m.request(
        ModelRequest(
            messages=(Message("system", "be brief"), Message("user", "hi")),
            tools=(WEATHER, ToolSpec(name="noop", parameters={"type": "object"})),
        )
    )
    assert response == ModelResponse(
        text="Hello!", usage=Usage(40, 3, 43, 1, cache_read_tokens=32), finish_reason="stop"
    )
    seen = api.seen[0]
    assert seen.path.endswith("/models/gemini-test:generateContent")
    assert seen.headers["x-goog-api-key"] == SECRET
    body = seen.body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "be brief"}]
    assert body["generationConfig"]["temperature"] == 0.1
    assert body["generationConfig"]["maxOutputTokens"] == 64 and body["generationConfig"]["topK"] == 3
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {
                            "city": {"type": "STRING"},
                            "unit": {"type": "STRING", "nullable": True},
                        },
                        "required": ["city"],
                    },
                },
                {"name": "noop"},
            ]
        }
    ]
    assert m.id == "google:gemini-test" and SECRET not in repr(m)
    await m.aclose()


async def test_schema_conversion_falls_back_to_the_original(api: FakeApi) -> None:
    recursive = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    open_object = {"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": True}}}
    api.replies.append(reply([{"text": "ok"}]))
    m = model(api)
    tools = (ToolSpec(name="tree", parameters=recursive), ToolSpec(name="meta", parameters=open_object))
    await m.request(ModelRequest(messages=(Message("user", "x"),), tools=tools))
    declared = api.seen[0].body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["tree", "meta"]
    assert get(declared[0], "parametersJsonSchema") == recursive and "parameters" not in declared[0]
    assert get(declared[1], "parametersJsonSchema") == open_object and "parameters" not in declared[1]
    assert "$defs" in recursive  # the originals are untouched
    await m.aclose()


def test_to_gemini_schema_conversions() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"Unit": {"type": "string", "enum": ["C", "F"]}},
        "properties": {
            "unit": {"$ref": "#/$defs/Unit", "description": "which"},
            "days": {"type": ["integer", "null"], "minimum": 1, "default": 3},
            "mode": {"const": "fast"},
            "tags": {"type": "array", "items": {"type": "string", "format": "uri"}, "examples": [["a"]]},
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["unit", "ghost"],
    }
    assert to_gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "unit": {"type": "STRING", "enum": ["C", "F"], "description": "which"},
            "days": {"type": "INTEGER", "minimum": 1, "default": 3, "nullable": True},
            "mode": {"type": "STRING", "enum": ["fast"]},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            "when": {"type": "STRING", "format": "date-time"},
        },
        "required": ["unit"],
    }
    assert to_gemini_schema({"type": "object", "properties": {}}) == {}
    assert to_gemini_schema({"type": "object", "properties": {"n": {"enum": [1, 2]}}}) is None
    assert (
        to_gemini_schema({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}}) is None
    )
    assert to_gemini_schema({"type": "object", "properties": {"n": {"$ref": "http://x/y"}}}) is None


async def test_tool_round_trip_through_the_agent(api: FakeApi) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city.

        Args:
            city: the city.
        """
        return f"sunny in {city}"

    api.replies.append(
        reply(
            [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"}]
        )
    )
    api.replies.append(reply([{"text": "It is sunny."}]))
    m = model(api)
    result = await Agent(m, [FunctionTools([get_weather])]).run("Weather in Oslo?")
    assert result.text == "It is sunny."
    assert result.steps[0].finish_reason == "tool-calls"
    call_id = result.steps[0].tool_calls[0].tool_call_id
    assert call_id.startswith("gcall_")
    turns = api.seen[1].body["contents"]
    assert turns[1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"}
        ],
    }
    assert turns[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny in Oslo"}}}],
    }
    await m.aclose()


async def test_call_ids_from_the_model_are_sent_back(api: FakeApi) -> None:
    api.replies.append(
        reply(
            [
                {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Oslo"}}},
                {"functionCall": {"id": "fc-2", "name": "get_weather", "args": {"city": "Rome"}}},
            ]
        )
    )
    api.replies.append(reply([{"text": "done"}]))

    def get_weather(city: str) -> str:
        """Weather."""
        return city.upper()

    m = model(api)
    await Agent(m, [FunctionTools([get_weather])]).run("both")
    responses = api.seen[1].body["contents"][2]["parts"]
    assert [r["functionResponse"]["id"] for r in responses] == ["fc-1", "fc-2"]
    assert [r["functionResponse"]["response"] for r in responses] == [{"output": "OSLO"}, {"output": "ROME"}]
    await m.aclose()


async def test_mcp_image_goes_inside_the_function_response(
    api: FakeApi, everything_client: StdioClient
) -> None:
    api.replies.append(reply([{"functionCall": {"name": "get-tiny-image", "args": {}}}]))
    api.replies.append(reply([{"text": "A tiny image."}]))
    m = model(api)
    result = await Agent(m, [McpToolProvider(everything_client)]).run("show me")
    assert result.text == "A tiny image."
    turns = api.seen[1].body["contents"]
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    (part,) = turns[2]["parts"]  # only the function response: no image in a user part of its own
    response = part["functionResponse"]
    assert response["name"] == "get-tiny-image" and "output" in response["response"]
    (image,) = response["parts"]
    blob = get(image, "inlineData")
    assert get(blob, "mimeType") == "image/png"
    data = blob["data"]  # bytes are sent URL-safe, as proto JSON allows
    assert base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).startswith(b"\x89PNG")
    await m.aclose()


async def test_failed_tool_is_an_error_response(api: FakeApi) -> None:
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the fuse blew")

    api.replies.append(reply([{"functionCall": {"name": "explode", "args": {}}}]))
    api.replies.append(reply([{"text": "sorry"}]))
    m = model(api)
    await Agent(m, [FunctionTools([explode])]).run("go")
    (part,) = api.seen[1].body["contents"][-1]["parts"]
    error_text = part["functionResponse"]["response"]["error"]
    assert error_text.startswith("Error: ") and "the fuse blew" in error_text
    await m.aclose()


def test_media_translation_without_a_server() -> None:
    from toolbridge.agent.models._gemini import to_gemini_contents

    system, contents = to_gemini_contents(
        (
            Message("system", "sys"),
            Message(
                "user", (TextPart("hear"), AudioPart("UklGRg==", "audio/wav"), ImagePart(PNG, "image/bmp"))
            ),
            Message("assistant", "calling", tool_calls=(ToolCall("a", "t", {}),)),
            Message(
                "tool", (AudioPart("UklGRg==", "audio/wav"), ImagePart("!!!", "image/png")), tool_call_id="a"
            ),
        ),
        images=True,
    )
    assert system == "sys"
    assert contents[0]["parts"][1] == {"inline_data": {"mime_type": "audio/wav", "data": b"RIFF"}}
    assert contents[0]["parts"][2] == {"text": "[image: image/bmp, 70 bytes]"}
    assert contents[1]["parts"][0] == {"text": "calling"}
    response = contents[2]["parts"][0]["function_response"]
    assert response["name"] == "t" and "parts" not in response  # audio and a bad image: placeholders
    assert response["response"]["output"].startswith("[audio: audio/wav, 4 bytes]\n[image: image/png")


async def test_streaming_text_and_calls(api: FakeApi) -> None:
    api.replies.append(
        sse_gemini(
            [
                candidate_body([{"text": "Let me "}], None),
                candidate_body([{"text": "check."}], None),
                candidate_body(
                    [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}],
                    "STOP",
                    prompt=20,
                    out=9,
                ),
            ]
        )
    )
    m = model(api)
    items = [
        i async for i in m.request_stream(ModelRequest(messages=(Message("user", "w"),), tools=(WEATHER,)))
    ]
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["Let me ", "check."]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert final.text == "Let me check." and final.finish_reason == "tool-calls"
    assert [(c.name, dict(c.arguments)) for c in final.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert final.usage == Usage(20, 9, 29, 1)
    assert api.seen[0].path.endswith(":streamGenerateContent?alt=sse")
    await m.aclose()


async def test_agent_streams_over_gemini(api: FakeApi) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    api.replies.append(
        sse_gemini([candidate_body([{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}}])])
    )
    api.replies.append(sse_gemini([candidate_body([{"text": "5"}])]))
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
    await m.aclose()


async def test_429_then_success_is_retried(api: FakeApi) -> None:
    api.replies.append(error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"))
    api.replies.append(error(503, "UNAVAILABLE", "The model is overloaded."))
    api.replies.append(reply([{"text": "ok"}]))
    m = model(api)
    start = time.monotonic()
    response = await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert response.text == "ok" and len(api.seen) == 3
    assert time.monotonic() - start < 3
    await m.aclose()


async def test_retries_are_bounded_and_streams_retried_before_the_first_chunk(api: FakeApi) -> None:
    for _ in range(2):
        api.replies.append(error(429, "RESOURCE_EXHAUSTED", "quota"))
    m = model(api, max_retries=1)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_RATE_LIMIT" and len(api.seen) == 2
    api.replies.append(error(500, "INTERNAL", "boom"))
    api.replies.append(sse_gemini([candidate_body([{"text": "fine"}])]))
    items = [i async for i in m.request_stream(ModelRequest(messages=(Message("user", "x"),)))]
    assert isinstance(items[-1], ModelResponse) and items[-1].text == "fine" and len(api.seen) == 4
    await m.aclose()


@pytest.mark.parametrize(
    "bad",
    [
        error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID"),
        error(401, "UNAUTHENTICATED", f"bad key {SECRET}"),
        error(403, "PERMISSION_DENIED", "Permission denied"),
    ],
)
async def test_bad_key_is_auth_error(api: FakeApi, bad: Reply) -> None:
    api.replies.append(bad)
    m = model(api)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH"
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert len(api.seen) == 1
    await m.aclose()


async def test_other_errors_keep_their_codes(api: FakeApi) -> None:
    api.replies.append(error(404, "NOT_FOUND", "models/gemini-nope is not found"))
    api.replies.append(error(400, "INVALID_ARGUMENT", "contents is not specified"))
    api.replies.append(Reply(body={"candidates": []}))
    m = model(api)
    codes = []
    for _ in range(3):
        with pytest.raises(ModelError) as info:
            await m.request(ModelRequest(messages=(Message("user", "x"),)))
        codes.append(info.value.code)
    assert codes == ["ERR_MODEL_NOT_FOUND", "ERR_MODEL_BAD_REQUEST", "ERR_MODEL_BAD_RESPONSE"]
    await m.aclose()


async def test_malformed_function_calls_are_errors(api: FakeApi) -> None:
    api.replies.append(
        Reply(
            body={
                "candidates": [
                    {
                        "finishReason": "MALFORMED_FUNCTION_CALL",
                        "finishMessage": "Malformed function call: x(",
                        "index": 0,
                    }
                ],
                "usageMetadata": usage_metadata(),
            }
        )
    )
    api.replies.append(reply([{"functionCall": {"name": "get_weather", "args": ["Oslo"]}}]))
    api.replies.append(sse_gemini([candidate_body([], "MALFORMED_FUNCTION_CALL")]))
    m = model(api)
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            await m.request(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER,)))
        assert info.value.code == "ERR_MODEL_BAD_RESPONSE"
    with pytest.raises(ModelError) as info:
        async for _ in m.request_stream(ModelRequest(messages=(Message("user", "x"),), tools=(WEATHER,))):
            pass
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and "malformed function call" in info.value.message
    await m.aclose()


async def test_finish_reasons_and_a_blocked_prompt(api: FakeApi) -> None:
    expected = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content-filter", "OTHER": "other"}
    for finish in expected:
        api.replies.append(reply([{"text": "t"}], finish))
    api.replies.append(
        Reply(body={"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage_metadata()})
    )
    m = model(api)
    got = [(await m.request(ModelRequest(messages=(Message("user", "x"),)))).finish_reason for _ in expected]
    assert got == list(expected.values())
    blocked = await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert blocked.finish_reason == "content-filter" and blocked.text == "" and not blocked.tool_calls
    await m.aclose()


async def test_missing_key_is_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    m = GeminiModel("gemini-test", base_url="http://127.0.0.1:9")
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_AUTH" and "GEMINI_API_KEY" in info.value.message


async def test_unreachable_server_is_unavailable() -> None:
    with FakeApi() as fake:
        url = fake.url
    m = GeminiModel("g", api_key=SECRET, base_url=url, max_retries=1, retry_backoff_s=0.01)
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_UNAVAILABLE"
    await m.aclose()


async def test_cancelling_a_slow_request_leaves_no_task(api: FakeApi) -> None:
    api.replies.append(Reply(body=candidate_body([{"text": "late"}]), delay=REPLY_DELAY_S))
    m = model(api)
    from google import genai  # noqa: F401  (imported before the clock starts: the first import is slow)

    await cancelled_while_the_model_is_slow(m)


async def test_closing_a_stream_early_cancels_the_request(api: FakeApi) -> None:
    pieces = [f"word{i} " for i in range(40)]
    reply = sse_gemini([candidate_body([{"text": p}], None) for p in pieces])
    reply.gap = 0.05
    api.replies.append(reply)
    m = model(api)
    await stream_closed_after_two_deltas(api, m, pieces)


async def test_a_slow_answer_times_out_as_unavailable(api: FakeApi) -> None:
    from google import genai  # noqa: F401  (imported before the clock starts: the first import is slow)

    api.replies.append(Reply(body=candidate_body([{"text": "late"}]), delay=2))
    m = model(api, max_retries=0, timeout_s=0.3)
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await m.request(ModelRequest(messages=(Message("user", "x"),)))
    assert info.value.code == "ERR_MODEL_UNAVAILABLE" and "timed out" in info.value.message
    assert time.monotonic() - start < 1.8
    await m.aclose()
