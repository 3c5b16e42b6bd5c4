"""What a model reads of an MCP server's tools is cleaned, for every provider and adapter.

A real MCP server (`hostile_schema_server.py`, official SDK) lists a tool whose title,
description and parameter-schema titles, descriptions, enum and const strings (at several
depths) hold ESC sequences, BEL, zero-width and bidi characters. Each provider talks to its
loopback API server, which records what the SDK put on the wire: none of those characters may
be in it, while the visible text is, and the caller still gets the raw definition.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fake_http import FakeApi, Reply
from agent_fake_openai import FakeOpenAI, completion
from agent_fake_openai import Reply as OpenAIReply
from hostile_schema_server import BEL, BIDI, ESC, ZW
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.agent import Agent, AnthropicModel, GeminiModel, OpenAIModel
from toolbridge.bridge import McpToolProvider
from toolbridge.clients import StdioClient
from toolbridge.runtime import create_runtime
from toolbridge.sanitize import clean_schema, clean_text
from toolbridge.tools import ToolSpec

SERVER = Path(__file__).with_name("hostile_schema_server.py")
HIDDEN_CHARS = {"\x1b", BEL, *ZW, *BIDI}
assert "\x1b" in ESC
SEEN = ["Weather in a city", "City name", "The city to look up", "Deeply nested level", "One tag here"]
"""Visible text of the definition (cleaned) that the model must still get."""


def hidden_in(value: Any) -> set[str]:
    text = json.dumps(value, ensure_ascii=False)  # escapes ESC/BEL as \\u001b, so look at both forms
    found = {ch for ch in text if ch in HIDDEN_CHARS}
    found |= {ch for ch in "\x1b\x07" if json.dumps(ch)[1:-1] in text}
    return found


def assert_clean_and_complete(value: Any) -> None:
    assert hidden_in(value) == set()
    text = json.dumps(value, ensure_ascii=False)
    for visible in SEEN:
        assert visible in text
    assert "celsius" in text  # the enum string, cleaned


@pytest.fixture
async def provider() -> AsyncIterator[McpToolProvider]:
    async with McpToolProvider(StdioClient(sys.executable, [str(SERVER)])) as p:
        yield p


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with FakeApi() as fake:
        yield fake


@pytest.fixture
def openai_api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


async def test_the_raw_definition_stays_with_the_caller(provider: McpToolProvider) -> None:
    (spec,) = await provider.list_tools()
    assert hidden_in(spec.parameters) == HIDDEN_CHARS  # parameters as the server sent them
    assert spec.mcp is not None and hidden_in(spec.mcp) == HIDDEN_CHARS
    assert hidden_in(clean_schema(spec.parameters)) == set()


async def test_openai_is_sent_clean_text(provider: McpToolProvider, openai_api: FakeOpenAI) -> None:
    openai_api.replies.append(OpenAIReply(body=completion("done")))
    model = OpenAIModel("gpt-test", api_key="sk-test", base_url=openai_api.base_url, retry_backoff_s=0.01)
    assert (await Agent(model, [provider]).run("hi")).text == "done"
    (tool,) = openai_api.requests[0]["tools"]
    assert tool["function"]["name"] == "lookup"
    assert_clean_and_complete(openai_api.requests[0])


async def test_anthropic_is_sent_clean_text(provider: McpToolProvider, api: FakeApi) -> None:
    api.replies.append(
        Reply(
            body={
                "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
    )  # fmt: skip
    model = AnthropicModel("claude-test", api_key="sk-ant-test", base_url=api.url, retry_backoff_s=0.01)
    assert (await Agent(model, [provider]).run("hi")).text == "done"
    body = api.seen[0].body
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    assert_clean_and_complete(body)


async def test_gemini_is_sent_clean_text(provider: McpToolProvider, api: FakeApi) -> None:
    api.replies.append(
        Reply(
            body={
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "done"}]},
                        "index": 0,
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            }
        )
    )
    model = GeminiModel("gemini-test", api_key="AIza-test", base_url=api.url, retry_backoff_s=0.01)
    assert (await Agent(model, [provider]).run("hi")).text == "done"
    body = api.seen[0].body
    assert "lookup" in json.dumps(body["tools"])
    assert_clean_and_complete(body)


async def test_a_governed_session_lists_clean_text(provider: McpToolProvider) -> None:
    runtime = create_runtime(permissions={"allow": ["tool:lookup", "effect:write"]})
    async with runtime.session(tool_providers=[provider]) as session:
        (spec,) = await session.list_tools()
        assert_clean_and_complete([spec.description, spec.parameters])
        # the call still goes through under the model-facing name
        assert (await session.call_tool("lookup", {"city": "Paris"})).parts[0].text == "ok"  # type: ignore[union-attr]


async def test_framework_adapters_get_clean_text(provider: McpToolProvider) -> None:
    from toolbridge.integrations import langchain, openai_agents

    (agents_tool,) = await openai_agents.as_tools(provider)
    assert_clean_and_complete([agents_tool.description, agents_tool.params_json_schema])
    (lc_tool,) = await langchain.as_tools(provider)
    schema = lc_tool.args_schema if isinstance(lc_tool.args_schema, dict) else lc_tool.args
    assert_clean_and_complete([lc_tool.description, schema])


async def test_a_schema_too_deep_to_walk_leaves_that_tool_out(caplog: pytest.LogCaptureFixture) -> None:
    from toolbridge.functions import FunctionTools

    deep: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        deep = {"type": "object", "properties": {"a": deep}}

    class Deep(FunctionTools):
        async def list_tools(self) -> list[ToolSpec]:
            return [ToolSpec("deep", "too deep", deep), ToolSpec("flat", f"flat{ESC}")]

    from toolbridge.agent import ScriptedModel

    model = ScriptedModel(["done"])
    result = await Agent(model, [Deep([])]).run("hi")
    assert result.text == "done"
    assert [t.name for t in model.requests[0].tools] == ["flat"]
    assert model.requests[0].tools[0].description == "flat"
    assert "nests too deep" in caplog.text


_TEXT = st.text(
    alphabet=st.sampled_from(["a", " ", "é", "\x1b", "\x07", "\u200b", "\u202e", "\u2066", "\x9b", "\r"])
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["description", "title", "enum", "const", "type", "x"]), inner, max_size=4
        )
    ),
    max_leaves=30,
)


def _walk(raw: Any, clean: Any, literal: bool = False) -> None:
    """`clean` is `raw` with exactly the model-visible strings cleaned, and nothing else changed."""
    if isinstance(raw, str):
        assert clean == (clean_text(raw) if literal else raw)
    elif isinstance(raw, dict):
        assert list(clean) == list(raw)
        for key, value in raw.items():
            if key in ("description", "title") and isinstance(value, str):
                assert clean[key] == clean_text(value) and hidden_in(clean[key]) == set()
            else:
                _walk(value, clean[key], literal or key in ("enum", "const", "default", "examples"))
    elif isinstance(raw, list):
        assert len(clean) == len(raw)
        for a, b in zip(raw, clean, strict=True):
            _walk(a, b, literal)
    else:
        assert clean == raw


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_clean_schema_cleans_only_what_a_model_reads(value: Any) -> None:
    before = json.dumps(value)
    _walk(value, clean_schema(value))
    assert json.dumps(value) == before  # the raw value is left as it was
