"""`ModelSamplingHandler`: serve an MCP server's sampling requests with a toolbridge `Model`.

An MCP server may ask its client for a model completion (`sampling/createMessage`). Give a
client `sampling_handler=ModelSamplingHandler(model)` and the agent's own model answers: the
request's messages (text, images, audio) become `Message`s, `systemPrompt` a system message,
`maxTokens` / `temperature` / `stopSequences` model options; the model's text comes back as
an assistant text message with a stop reason (`endTurn`, or `maxTokens` when cut).

The handler fits both calling conventions: toolbridge clients call `handler(params)`, the SDK's
`sampling_callback` calls `handler(context, params)`. A model failure is answered with a
JSON-RPC error (`ErrorData`, code -32603) naming the error code, never raised into the session.
Sampling with tools is not offered: tools in the request are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..content import AudioPart, ImagePart, Part, TextPart
from ..errors import ToolbridgeError, bounded
from .models._base import Message, Model, ModelRequest

__all__ = ["ModelSamplingHandler"]

if TYPE_CHECKING:
    import mcp_types as types

_log = logging.getLogger("toolbridge.agent.sampling")


def _parts(
    content: types.SamplingMessageContentBlock | list[types.SamplingMessageContentBlock],
) -> tuple[Part, ...]:
    import mcp_types as types

    blocks = content if isinstance(content, list) else [content]
    parts: list[Part] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(TextPart(block.text))
        elif isinstance(block, types.ImageContent):
            parts.append(ImagePart(block.data, block.mime_type))
        elif isinstance(block, types.AudioContent):
            parts.append(AudioPart(block.data, block.mime_type))
        else:
            parts.append(TextPart(f"[{block.type} block omitted]"))
    return tuple(parts)


class ModelSamplingHandler:
    """Answers `sampling/createMessage` with a toolbridge `Model`.

    Args:
        model: any `Model`.
        options: default model options (the request's `maxTokens` etc. override them).
        system: a system prompt used when the server sends none.
    """

    def __init__(
        self, model: Model, *, options: Mapping[str, object] | None = None, system: str | None = None
    ) -> None:
        self.model = model
        self.options = dict(options or {})
        self.system = system

    def __repr__(self) -> str:
        return f"ModelSamplingHandler(model={self.model.id!r})"

    def to_request(self, params: types.CreateMessageRequestParams) -> ModelRequest:
        """The `ModelRequest` for a sampling request."""
        messages: list[Message] = []
        system = params.system_prompt or self.system
        if system:
            messages.append(Message("system", system))
        for item in params.messages:
            parts = _parts(item.content)
            content: str | tuple[Part, ...] = (
                parts[0].text if len(parts) == 1 and isinstance(parts[0], TextPart) else parts
            )
            messages.append(Message("assistant" if item.role == "assistant" else "user", content))
        options = dict(self.options)
        if params.max_tokens:
            options["max_tokens"] = params.max_tokens
        if params.temperature is not None:
            options["temperature"] = params.temperature
        if params.stop_sequences:
            options["stop"] = list(params.stop_sequences)
        return ModelRequest(messages=tuple(messages), tools=(), options=options)

    async def __call__(
        self, context: object, params: types.CreateMessageRequestParams | None = None
    ) -> types.CreateMessageResult | types.ErrorData:
        """Answer one sampling request: `handler(params)` or `handler(context, params)`.

        Returns:
            The assistant's message, or `ErrorData` when the model failed.
        """
        import mcp_types as types

        asked = context if params is None else params  # `handler(params)`: the one argument is it
        assert isinstance(asked, types.CreateMessageRequestParams)
        params = asked
        try:
            response = await self.model.request(self.to_request(params))
        except ToolbridgeError as exc:
            _log.warning("sampling with %s failed: %s", self.model.id, exc.code)
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=bounded(f"{exc.code}: {exc.message}", 500)
            )
        stop = "maxTokens" if response.finish_reason == "length" else "endTurn"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=response.text),
            model=str(self.model.id),
            stop_reason=stop,
        )
