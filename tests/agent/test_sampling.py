"""`ModelSamplingHandler` serving server-everything's sampling request with a toolbridge model."""

from __future__ import annotations

import mcp_types as types
from mcp import StdioServerParameters
from mcp.client.client import Client

from toolbridge.agent import Message, ModelSamplingHandler, ScriptedModel
from toolbridge.clients import StdioClient


async def test_sampling_through_a_toolbridge_client(everything_cmd: list[str]) -> None:
    model = ScriptedModel([{"text": "a sampled answer"}])
    async with StdioClient(
        everything_cmd[0], everything_cmd[1:], sampling_handler=ModelSamplingHandler(model)
    ) as client:
        result = await client.call_tool("trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 40})
    text = result["content"][0]["text"]
    assert "a sampled answer" in text and '"model": "scripted"' in text
    (request,) = model.requests
    assert request.messages[-1].role == "user" and "Say hi" in str(request.messages[-1].content)
    assert request.options["max_tokens"] == 40


async def test_handler_is_directly_an_sdk_sampling_callback(everything_cmd: list[str]) -> None:
    model = ScriptedModel([{"text": "from the sdk path"}])
    params = StdioServerParameters(command=everything_cmd[0], args=everything_cmd[1:])
    async with Client(params, sampling_callback=ModelSamplingHandler(model)) as client:
        result = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
    assert any("from the sdk path" in getattr(block, "text", "") for block in result.content)


async def test_model_failure_becomes_error_data() -> None:
    handler = ModelSamplingHandler(ScriptedModel([]), system="be nice")
    params = types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="x"))],
        max_tokens=10,
    )
    assert handler.to_request(params).messages[0] == Message("system", "be nice")
    answer = await handler(params)
    assert isinstance(answer, types.ErrorData) and "ERR_MODEL_SCRIPT_EXHAUSTED" in answer.message
