"""`OpenAIModel`: Chat Completions on the official `openai` SDK (any OpenAI-compatible server).

Design:

- The SDK client (`AsyncOpenAI`) is created lazily on the first request, with the SDK's own
  retries turned off: this module retries 429 and 5xx answers and connection failures itself,
  `max_retries` times with exponential backoff (`retry_backoff_s` is the first delay; tests set
  it near zero), honouring a short `Retry-After`. A streamed turn is retried only before its
  first chunk arrives.
- Failures become `ModelError` with a stable code: `ERR_MODEL_AUTH` (401/403, or no key),
  `ERR_MODEL_NOT_FOUND` (404), `ERR_MODEL_RATE_LIMIT` (429 after retries),
  `ERR_MODEL_UNAVAILABLE` (5xx after retries, connection failures, timeouts),
  `ERR_MODEL_BAD_REQUEST` (other 4xx), `ERR_MODEL_BAD_RESPONSE` (no choices, or tool-call
  arguments that are not a JSON object: an error, never silently `{}`). The API key never
  appears in a message or `repr`.
- Messages are translated to the wire format here. A tool result that holds images is sent as
  a tool message with a text placeholder, and the images follow in one synthetic `user`
  message after the run of tool messages (Chat Completions accepts images only from users).
  Audio goes the same way as `input_audio` (wav or mp3) when `supports_audio` is true (by
  default, for models whose name says `audio`); otherwise it stays a placeholder.
- The key, the retry loop and the error mapping are shared with the other providers
  (`RemoteModel`).
- `strict_schemas=True` sends each tool's schema in strict form when `to_strict_schema` can
  convert it (on a copy; local `$ref`s inlined), and the original otherwise. Optional
  top-level properties that strict mode made nullable come back as `null`; such nulls are
  dropped from the arguments so the tool sees them absent, as its own schema says.
- Streaming accumulates tool calls per index across chunks and yields them in the final
  `ModelResponse`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ...content import AudioPart, ImagePart, Part, TextPart, media_placeholder
from ...errors import ModelError
from ...tools import ToolSpec
from ._base import (
    Message,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    TextDelta,
    ToolCall,
    Usage,
    normalize_finish_reason,
)
from ._remote import RemoteModel, snake_case, tool_arguments
from ._schema import optional_top_level, to_strict_schema

if TYPE_CHECKING:  # the SDK is the optional `openai` extra: imported when the first request is made
    from openai import AsyncOpenAI, AsyncStream
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

__all__ = ["OpenAIModel"]

_KNOWN_OPTIONS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "parallel_tool_calls",
        "tool_choice",
        "response_format",
        "user",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "n",
        "reasoning_effort",
        "service_tier",
        "metadata",
        "store",
        "prediction",
        "modalities",
        "verbosity",
        "timeout",
    }
)
# Chat Completions `input_audio` takes these two formats only.
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


def _image_url(part: ImagePart) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}


def _media(part: ImagePart | AudioPart, images: bool, audio: bool) -> dict[str, object] | None:
    """The wire part for an image or audio part the model can take, else `None`."""
    if isinstance(part, ImagePart):
        return _image_url(part) if images else None
    fmt = _AUDIO_FORMATS.get(part.media_type.lower())
    if audio and fmt:
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": fmt}}
    return None


def _user_content(
    content: str | tuple[Part, ...], images: bool, audio: bool = False
) -> str | list[dict[str, object]]:
    if isinstance(content, str):
        return content
    out: list[dict[str, object]] = []
    for part in content:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
            continue
        wire = _media(part, images, audio)
        out.append(wire if wire is not None else {"type": "text", "text": media_placeholder(part)})
    return out


def _text_of(content: str | tuple[Part, ...]) -> tuple[str, list[ImagePart | AudioPart]]:
    if isinstance(content, str):
        return content, []
    lines: list[str] = []
    media: list[ImagePart | AudioPart] = []
    for part in content:
        if isinstance(part, TextPart):
            lines.append(part.text)
        else:
            lines.append(media_placeholder(part))
            media.append(part)
    return "\n".join(lines), media


def to_wire_messages(
    messages: Sequence[Message], *, images: bool, audio: bool = False
) -> list[dict[str, object]]:
    """Translate neutral messages to Chat Completions messages.

    Images (and, when `audio` is true, wav/mp3 audio) in tool results become a placeholder in
    the tool message and parts of one synthetic user message placed after the run of tool
    messages: Chat Completions accepts media only from users.
    """
    wire: list[dict[str, object]] = []
    pending: list[tuple[str, dict[str, object]]] = []

    def flush() -> None:
        if not pending:
            return
        content: list[dict[str, object]] = []
        for call_id, part in pending:
            what = "Image" if part["type"] == "image_url" else "Audio"
            content.append({"type": "text", "text": f"{what} from tool call {call_id}:"})
            content.append(part)
        wire.append({"role": "user", "content": content})
        pending.clear()

    for message in messages:
        if message.role != "tool":
            flush()
        if message.role == "system":
            wire.append({"role": "system", "content": _text_of(message.content)[0]})
        elif message.role == "user":
            wire.append({"role": "user", "content": _user_content(message.content, images, audio)})
        elif message.role == "assistant":
            item: dict[str, object] = {"role": "assistant", "content": _text_of(message.content)[0] or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                    }
                    for call in message.tool_calls
                ]
            wire.append(item)
        else:
            text, found = _text_of(message.content)
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": text})
            for part in found:
                media = _media(part, images, audio)
                if media is not None:
                    pending.append((message.tool_call_id or "", media))
    flush()
    return wire


@dataclass
class _StreamedCall:
    """One tool call of a streamed turn, as its deltas built it."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolPlan:
    """Wire tool definitions plus what is needed to read the model's arguments back."""

    def __init__(self, model: str, tools: Sequence[ToolSpec], strict: bool) -> None:
        self.model = model
        self.wire: list[dict[str, object]] = []
        self.nullable: dict[str, frozenset[str]] = {}
        for spec in tools:
            function: dict[str, object] = {"name": spec.name, "parameters": dict(spec.parameters)}
            if spec.description:
                function["description"] = spec.description
            if strict:
                converted = to_strict_schema(spec.parameters)
                if converted is not None:
                    function["parameters"] = converted
                    function["strict"] = True
                    self.nullable[spec.name] = optional_top_level(spec.parameters)
            self.wire.append({"type": "function", "function": function})

    def arguments(self, name: str, raw: str | None) -> dict[str, object]:
        value = tool_arguments(self.model, name, raw)
        for key in self.nullable.get(name, frozenset()):
            if key in value and value[key] is None:
                del value[key]
        return value


class OpenAIModel(RemoteModel["AsyncOpenAI"]):
    """A model served over the OpenAI Chat Completions API.

    Args:
        model: the model name (`gpt-4o-mini`, or whatever a compatible server calls it).
        api_key: the key; default `OPENAI_API_KEY` from the environment.
        base_url: the API root (default the SDK's: OpenAI; `OPENAI_BASE_URL` is honoured).
        options: default request options (`temperature`, `max_tokens`, ...; camelCase keys are
            converted to snake_case; keys the SDK does not know go in the request body).
        prices: micro-USD per million tokens, for cost accounting.
        max_retries: retries after a 429, a 5xx or a connection failure.
        strict_schemas: send tool schemas in strict form when they convert.
        supports_images: whether the model accepts image input.
        supports_audio: whether the model accepts `input_audio` (wav or mp3); `None` (default):
            when its name says so (`gpt-4o-audio-preview`, `gpt-audio`, ...).
        timeout_s: per-request timeout.
        retry_backoff_s: first retry delay; doubles each retry (with jitter), capped at 20 s.

    Raises:
        ConfigError: `ERR_CONFIG` for an empty model name or negative retry settings.
    """

    provider = "openai"
    key_env = ("OPENAI_API_KEY",)
    base_url_env = "OPENAI_BASE_URL"
    extra = "openai"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        options: Mapping[str, object] | None = None,
        prices: ModelPrices | None = None,
        max_retries: int = 3,
        strict_schemas: bool = False,
        *,
        supports_images: bool = True,
        supports_audio: bool | None = None,
        timeout_s: float = 120.0,
        retry_backoff_s: float = 0.5,
    ) -> None:
        super().__init__(
            model,
            api_key,
            base_url,
            options,
            prices,
            max_retries,
            supports_images=supports_images,
            timeout_s=timeout_s,
            retry_backoff_s=retry_backoff_s,
        )
        self.strict_schemas = strict_schemas
        self.supports_audio = "audio" in model.lower() if supports_audio is None else supports_audio

    # -- client and errors -------------------------------------------------------------------

    def _new_client(self, key: str) -> AsyncOpenAI:
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise self._missing_package(exc) from exc
        return AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s)

    async def _close_client(self, client: AsyncOpenAI) -> None:
        await client.close()

    def _translate(self, exc: Exception) -> tuple[ModelError, bool]:
        """The `ModelError` for `exc`, and whether the failure may be retried."""
        import openai

        where = f"model {self.model!r}"
        if isinstance(exc, openai.APIStatusError):
            return self._status_error(exc.status_code, self._scrub(str(exc.message or exc)))
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"{where}: request timed out", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(f"{where}: cannot connect to the API", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return ModelError(f"{where}: malformed response", code="ERR_MODEL_BAD_RESPONSE"), False
        return self._unknown_error(exc), False

    def _kwargs(self, request: ModelRequest, plan: _ToolPlan, stream: bool) -> dict[str, Any]:
        """The keyword arguments of `client.chat.completions.create`.

        Typed `Any`: the caller's options (any value, under the SDK's own keyword names) are
        passed through as they are, so no static type can check the call."""
        merged = {**self.options, **{snake_case(k): v for k, v in request.options.items()}}
        kwargs: dict[str, object] = {
            "model": self.model,
            "messages": to_wire_messages(
                request.messages, images=self.supports_images, audio=self.supports_audio
            ),
        }
        extra: dict[str, object] = {}
        for key, value in merged.items():
            (kwargs if key in _KNOWN_OPTIONS else extra)[key] = value
        if extra:
            kwargs["extra_body"] = extra
        if plan.wire:
            kwargs["tools"] = plan.wire
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    @staticmethod
    def _usage(raw: CompletionUsage | None) -> Usage:
        from openai.types import CompletionUsage
        from openai.types.completion_usage import PromptTokensDetails

        if not isinstance(raw, CompletionUsage):  # none, or not what the API says it sends
            return Usage(requests=1)
        i_tok = int(raw.prompt_tokens or 0)
        o_tok = int(raw.completion_tokens or 0)
        total = int(raw.total_tokens or (i_tok + o_tok))
        details = raw.prompt_tokens_details
        cached = int(details.cached_tokens or 0) if isinstance(details, PromptTokensDetails) else 0
        return Usage(i_tok, o_tok, total, 1, cache_read_tokens=cached)

    # -- the Model protocol ------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Take one turn (non-streaming).

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        plan = _ToolPlan(self.model, request.tools, self.strict_schemas)
        client = self._get_client()  # first: without the SDK installed, the missing extra is named
        from openai.types.chat import ChatCompletionMessageFunctionToolCall as FunctionCall

        kwargs = self._kwargs(request, plan, stream=False)

        async def create() -> ChatCompletion:
            completion: ChatCompletion = await client.chat.completions.create(**kwargs)
            return completion

        completion = await self._retrying(create)
        choices = completion.choices
        if not choices:
            raise ModelError(
                f"model {self.model!r}: the response has no choices", code="ERR_MODEL_BAD_RESPONSE"
            )
        choice = choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(
                id=call.id or "",
                name=call.function.name,
                arguments=plan.arguments(call.function.name, call.function.arguments),
            )
            for call in (message.tool_calls or [])
            if isinstance(call, FunctionCall) and call.function is not None  # not a custom tool's
        )
        return ModelResponse(
            text=message.content or "",
            tool_calls=calls,
            usage=self._usage(completion.usage),
            finish_reason=normalize_finish_reason(choice.finish_reason, has_tool_calls=bool(calls)),
        )

    async def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Take one turn, streaming text deltas; tool calls arrive in the final response.

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        import openai

        plan = _ToolPlan(self.model, request.tools, self.strict_schemas)
        client = self._get_client()
        kwargs = self._kwargs(request, plan, stream=True)

        async def create() -> AsyncStream[ChatCompletionChunk]:
            chunks: AsyncStream[ChatCompletionChunk] = await client.chat.completions.create(**kwargs)
            return chunks

        stream = await self._retrying(create)
        text: list[str] = []
        pending: dict[int, _StreamedCall] = {}
        finish: str | None = None
        usage = Usage(requests=1)
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = self._usage(chunk.usage)
                for choice in chunk.choices or []:
                    if choice.index not in (0, None):
                        continue
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        slot = pending.setdefault(call.index, _StreamedCall())
                        if call.id:
                            slot.id = call.id
                        if call.function is not None:
                            if call.function.name:
                                slot.name += call.function.name
                            if call.function.arguments:
                                slot.arguments.append(call.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.OpenAIError as exc:
            raise self._translate(exc)[0] from None
        except Exception as exc:  # the HTTP stream broke under the SDK
            raise ModelError(
                f"model {self.model!r}: the response stream broke ({type(exc).__name__})",
                code="ERR_MODEL_UNAVAILABLE",
            ) from None
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        calls = tuple(
            ToolCall(id=slot.id, name=slot.name, arguments=plan.arguments(slot.name, "".join(slot.arguments)))
            for _, slot in sorted(pending.items())
        )
        if any(not call.name for call in calls):
            raise ModelError(
                f"model {self.model!r}: a streamed tool call has no name", code="ERR_MODEL_BAD_RESPONSE"
            )
        yield ModelResponse(
            text="".join(text),
            tool_calls=calls,
            usage=usage,
            finish_reason=normalize_finish_reason(finish, has_tool_calls=bool(calls)),
        )
