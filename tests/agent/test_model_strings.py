"""`Agent("provider:model")`: each prefix builds its provider from the environment (loopback servers)."""

from __future__ import annotations

import pytest
from agent_fake_http import FakeApi, Reply
from agent_fake_openai import FakeOpenAI, completion

from toolbridge.agent import Agent, AnthropicModel, GeminiModel, OpenAIModel, model_from_string
from toolbridge.errors import ConfigError

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
URLS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEYS, *URLS):
        monkeypatch.delenv(name, raising=False)


async def test_openai_prefix_uses_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        fake.replies.append(Reply_openai("from openai"))
        agent = Agent("openai:gpt-4o-mini")
        assert isinstance(agent.model, OpenAIModel) and agent.model.id == "openai:gpt-4o-mini"
        result = await agent.run("hi")
        assert result.text == "from openai"
        assert fake.auth_headers == ["Bearer sk-from-env-123"]
        assert fake.requests[0]["model"] == "gpt-4o-mini"
        await agent.model.aclose()


def Reply_openai(text: str) -> object:
    from agent_fake_openai import Reply as OpenAIReply

    return OpenAIReply(body=completion(text))


async def test_anthropic_prefix_uses_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeApi() as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        api.replies.append(
            Reply(
                body={
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5",
                    "content": [{"type": "text", "text": "from claude"}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            )
        )
        agent = Agent("anthropic:claude-sonnet-5")
        assert isinstance(agent.model, AnthropicModel) and agent.model.id == "anthropic:claude-sonnet-5"
        assert (await agent.run("hi")).text == "from claude"
        headers = api.seen[0].headers
        assert "sk-ant-from-env" in headers.get("x-api-key", "") + headers.get("authorization", "")
        assert api.seen[0].body["model"] == "claude-sonnet-5"
        await agent.model.aclose()


@pytest.mark.parametrize(("prefix", "variable"), [("google", "GEMINI_API_KEY"), ("gemini", "GOOGLE_API_KEY")])
async def test_google_prefix_uses_either_key(
    monkeypatch: pytest.MonkeyPatch, prefix: str, variable: str
) -> None:
    with FakeApi() as api:
        monkeypatch.setenv(variable, "AIza-from-env")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", api.url)
        api.replies.append(
            Reply(body={"candidates": [{"content": {"role": "model", "parts": [{"text": "from gemini"}]}}]})
        )
        agent = Agent(f"{prefix}:gemini-2.5-flash")
        assert isinstance(agent.model, GeminiModel) and agent.model.id == "google:gemini-2.5-flash"
        assert (await agent.run("hi")).text == "from gemini"
        assert api.seen[0].headers["x-goog-api-key"] == "AIza-from-env"
        assert api.seen[0].path.endswith("/models/gemini-2.5-flash:generateContent")
        await agent.model.aclose()


def test_gemini_key_wins_over_google_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "first-key")
    monkeypatch.setenv("GOOGLE_API_KEY", "second-key")
    model = model_from_string("google:gemini-2.5-flash")
    assert model._secret() == "first-key"


@pytest.mark.parametrize(
    ("spec", "variables"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-5", "ANTHROPIC_API_KEY"),
        ("google:gemini-2.5-flash", "GEMINI_API_KEY or GOOGLE_API_KEY"),
    ],
)
def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch, spec: str, variables: str) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/should-not-matter")
    with pytest.raises(ConfigError) as info:
        Agent(spec)
    assert info.value.code == "ERR_CONFIG"
    assert f"set {variables}" in info.value.message


def test_a_key_for_another_provider_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-VALUE-42")
    with pytest.raises(ConfigError) as info:
        Agent("anthropic:claude-sonnet-5")
    assert "ANTHROPIC_API_KEY" in info.value.message and "sk-SECRET-VALUE-42" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("mistral:large", "unknown provider 'mistral'"),
        ("gpt-4o-mini", "no provider prefix"),
        ("openai:", "names no model"),
        ("", "no provider prefix"),
        ("x" * 5000 + ":y", "unknown provider"),
    ],
)
def test_bad_model_strings(monkeypatch: pytest.MonkeyPatch, spec: str, words: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    with pytest.raises(ConfigError) as info:
        Agent(spec)
    assert info.value.code == "ERR_CONFIG" and words in info.value.message
    assert len(info.value.message) < 400
    assert "openai:, anthropic:, google:" in info.value.message or "names no model" in info.value.message


def test_providers_import_their_sdk_only_when_they_make_a_request() -> None:
    import subprocess
    import sys

    code = (
        "import os, sys, toolbridge\n"
        "from toolbridge.agent import Agent, AnthropicModel, GeminiModel, OpenAIModel\n"
        "os.environ.update(OPENAI_API_KEY='k1', ANTHROPIC_API_KEY='k2', GEMINI_API_KEY='k3')\n"
        "models = [Agent(s).model for s in ('openai:a', 'anthropic:b', 'google:c')]\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
