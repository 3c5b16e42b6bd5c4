"""Public constructors given values of the wrong type: one library error with a stable code each,
never a raw `TypeError` or `AttributeError` at construction or later."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolbridge.agent.models import AnthropicModel, GeminiModel, OpenAIModel, ScriptedModel
from toolbridge.clients import HttpClient, StdioClient
from toolbridge.errors import ToolbridgeError

CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("http headers a list", lambda: HttpClient("http://127.0.0.1:9/mcp", headers=[1]), "ERR_INVALID_INPUT"),  # type: ignore[arg-type]
    (
        "http header an int",
        lambda: HttpClient("http://127.0.0.1:9/mcp", headers={"a": 5}),
        "ERR_INVALID_INPUT",
    ),  # type: ignore[dict-item]
    ("stdio env a nested value", lambda: StdioClient("true", [], env={"a": {"b": 1}}), "ERR_INVALID_INPUT"),  # type: ignore[dict-item]
    ("stdio env a list", lambda: StdioClient("true", [], env=["A=1"]), "ERR_INVALID_INPUT"),  # type: ignore[arg-type]
    ("openai timeout a string", lambda: OpenAIModel("m", timeout_s="5"), "ERR_CONFIG"),  # type: ignore[arg-type]
    ("anthropic retries a bool", lambda: AnthropicModel("m", max_retries=True), "ERR_CONFIG"),
    ("gemini backoff a string", lambda: GeminiModel("m", retry_backoff_s="1"), "ERR_CONFIG"),  # type: ignore[arg-type]
    ("scripted turns an int", lambda: ScriptedModel(5), "ERR_CONFIG"),  # type: ignore[arg-type]
    ("scripted turns a string", lambda: ScriptedModel("hello"), "ERR_CONFIG"),
]


@pytest.mark.parametrize(("what", "build", "code"), CASES, ids=[c[0] for c in CASES])
def test_a_wrong_type_is_one_library_error(what: str, build: Callable[[], Any], code: str) -> None:
    with pytest.raises(ToolbridgeError) as info:
        build()
    assert info.value.code == code and "\n" not in info.value.message
