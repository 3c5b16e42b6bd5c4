"""Secrets the redactor must catch in the form they take on the way out: a secret used as a URL
host comes back lower-cased (and, with non-ASCII letters, in IDNA form) in errors and -vv logs;
a key inside a model's `base_url` is registered when the model is constructed, not at its first
request."""

from __future__ import annotations

import logging

import pytest

from toolbridge.agent.models import AnthropicModel, GeminiModel, OpenAIModel
from toolbridge.agent.models._remote import tool_arguments
from toolbridge.clients import HttpClient
from toolbridge.errors import ModelError, ToolbridgeError
from toolbridge.redact import redact, register_secret

PROVIDERS = (OpenAIModel, AnthropicModel, GeminiModel)


@pytest.mark.parametrize("host", ["SecretHostCanary42", "Geheim-Bücher-Canary"])
async def test_a_secret_used_as_a_host_is_scrubbed_however_it_comes_back(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(host, name="HOST")
    caplog.set_level(logging.DEBUG)
    client = HttpClient(f"http://{host}.invalid:9/mcp", connect_timeout=5)
    with pytest.raises(ToolbridgeError) as info:
        async with client:
            await client.list_tools()
    wire = host.lower().encode("idna").decode()
    seen = [info.value.message, str(info.value), repr(client)] + [r.getMessage() for r in caplog.records]
    seen += [r.exc_text or "" for r in caplog.records]
    assert any(".invalid" in text for text in seen)  # the error and the logs did speak of the host
    for text in seen:
        assert host.lower() not in text.lower() and wire not in text.lower()


def test_idna_forms_of_a_non_ascii_secret_are_scrubbed() -> None:
    register_secret("Bücher-Geheimnis.Example", name="HOST")
    assert redact("http://xn--bcher-geheimnis-zvb.example/x") == "http://***/x"
    assert redact("XN--BCHER-GEHEIMNIS-ZVB.EXAMPLE") == "***"


@pytest.mark.parametrize("cls", PROVIDERS)
def test_a_model_registers_its_key_and_base_url_credentials_at_construction(cls: type) -> None:
    url = "https://proxy-user:Proxy-Pass-77@llm.example/v1?key=QueryKey-0123456789&region=eu"
    model = cls("m", api_key="sk-construct-0123456789", base_url=url)
    shown = repr(model)
    assert "Proxy-Pass-77" not in shown and "QueryKey-0123456789" not in shown
    assert "llm.example" in shown and "region=eu" in shown
    scrubbed = redact("sk-construct-0123456789 PROXY-PASS-77 querykey-0123456789")
    assert scrubbed == "*** *** ***"


@pytest.mark.parametrize("cls", PROVIDERS)
def test_a_base_url_from_the_environment_is_registered_too(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cls.base_url_env, "https://llm.example/v1?api_key=EnvUrlKey-0123456789")
    cls("m", api_key="sk-env-0123456789")
    assert redact("EnvUrlKey-0123456789") == "***"


def test_a_model_refuses_a_base_url_or_key_that_is_no_string() -> None:
    for kwargs in ({"base_url": 42}, {"api_key": b"sk-bytes-0123456789"}):
        with pytest.raises(ToolbridgeError) as info:
            OpenAIModel("m", **kwargs)  # type: ignore[arg-type]
        assert info.value.code == "ERR_CONFIG"


@pytest.mark.parametrize("depth", [101, 5_000, 100_000])
def test_deep_tool_arguments_are_a_bad_response_not_a_recursion_error(depth: int) -> None:
    text = '{"a": ' * depth + "1" + "}" * depth
    with pytest.raises(ModelError) as info:
        tool_arguments("m", "t", text)
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and "deeper than 100" in info.value.message
    nested: dict[str, object] = {}
    for _ in range(depth):
        nested = {"a": nested}
    with pytest.raises(ModelError) as info:
        tool_arguments("m", "t", nested)
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE"
    assert tool_arguments("m", "t", '{"a": ' * 99 + "1" + "}" * 99)["a"]
