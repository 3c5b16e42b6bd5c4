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
- `strict_schemas=True` sends each tool's schema in strict form when `to_strict_schema` can
  convert it (on a copy; local `$ref`s inlined), and the original otherwise. Optional
  top-level properties that strict mode made nullable come back as `null`; such nulls are
  dropped from the arguments so the tool sees them absent, as its own schema says.
- Streaming accumulates tool calls per index across chunks and yields them in the final
  `ModelResponse`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio

from ...content import ImagePart, Part, TextPart, media_placeholder
from ...errors import ConfigError, ModelError, bounded
from ...tools import ToolSpec
from ._base import (
    Message,
    ModelBase,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    TextDelta,
    ToolCall,
    Usage,
    normalize_finish_reason,
)
from ._schema import optional_top_level, to_strict_schema

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
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}


def _user_content(content: str | tuple[Part, ...], images: bool) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart) and images:
            out.append(_image_url(part))
        else:
            out.append({"type": "text", "text": media_placeholder(part)})
    return out


def _text_of(content: str | tuple[Part, ...]) -> tuple[str, list[ImagePart]]:
    if isinstance(content, str):
        return content, []
    lines: list[str] = []
    images: list[ImagePart] = []
    for part in content:
        if isinstance(part, TextPart):
            lines.append(part.text)
        else:
            lines.append(media_placeholder(part))
            if isinstance(part, ImagePart):
                images.append(part)
    return "\n".join(lines), images


def to_wire_messages(messages: Sequence[Message], *, images: bool) -> list[dict[str, Any]]:
    """Translate neutral messages to Chat Completions messages.

    Images in tool results become a placeholder in the tool message and, when `images` is
    true, image parts of one synthetic user message placed after the run of tool messages.
    """
    wire: list[dict[str, Any]] = []
    pending: list[tuple[str, ImagePart]] = []

    def flush() -> None:
        if not pending:
            return
        content: list[dict[str, Any]] = []
        for call_id, image in pending:
            content.append({"type": "text", "text": f"Image from tool call {call_id}:"})
            content.append(_image_url(image))
        wire.append({"role": "user", "content": content})
        pending.clear()

    for message in messages:
        if message.role != "tool":
            flush()
        if message.role == "system":
            wire.append({"role": "system", "content": _text_of(message.content)[0]})
        elif message.role == "user":
            wire.append({"role": "user", "content": _user_content(message.content, images)})
        elif message.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": _text_of(message.content)[0] or None}
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
            if images:
                pending.extend((message.tool_call_id or "", image) for image in found)
    flush()
    return wire


class _ToolPlan:
    """Wire tool definitions plus what is needed to read the model's arguments back."""

    def __init__(self, tools: Sequence[ToolSpec], strict: bool) -> None:
        self.wire: list[dict[str, Any]] = []
        self.nullable: dict[str, frozenset[str]] = {}
        for spec in tools:
            function: dict[str, Any] = {"name": spec.name, "parameters": dict(spec.parameters)}
            if spec.description:
                function["description"] = spec.description
            if strict:
                converted = to_strict_schema(spec.parameters)
                if converted is not None:
                    function["parameters"] = converted
                    function["strict"] = True
                    self.nullable[spec.name] = optional_top_level(spec.parameters)
            self.wire.append({"type": "function", "function": function})

    def arguments(self, name: str, raw: str | None) -> dict[str, Any]:
        text = (raw or "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelError(
                f"the model sent malformed JSON arguments for tool {name!r}: {exc.msg} at position {exc.pos}",
                code="ERR_MODEL_BAD_RESPONSE",
            ) from None
        if not isinstance(value, dict):
            raise ModelError(
                f"the model sent arguments for tool {name!r} that are not a JSON object "
                f"({type(value).__name__})",
                code="ERR_MODEL_BAD_RESPONSE",
            )
        for key in self.nullable.get(name, frozenset()):
            if key in value and value[key] is None:
                del value[key]
        return value


class OpenAIModel(ModelBase):
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
        timeout_s: per-request timeout.
        retry_backoff_s: first retry delay; doubles each retry (with jitter), capped at 20 s.

    Raises:
        ConfigError: `ERR_CONFIG` for an empty model name or negative retry settings.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        options: Mapping[str, Any] | None = None,
        prices: ModelPrices | None = None,
        max_retries: int = 3,
        strict_schemas: bool = False,
        *,
        supports_images: bool = True,
        timeout_s: float = 120.0,
        retry_backoff_s: float = 0.5,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError("OpenAIModel needs a model name", code="ERR_CONFIG")
        if max_retries < 0 or retry_backoff_s < 0:
            raise ConfigError("max_retries and retry_backoff_s must be >= 0", code="ERR_CONFIG")
        self.model = model
        self.id = f"openai:{model}"
        self.supports_images = supports_images
        self.prices = prices
        self.base_url = base_url
        self.options: dict[str, Any] = {_snake(k): v for k, v in (options or {}).items()}
        self.max_retries = max_retries
        self.strict_schemas = strict_schemas
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.__api_key = api_key
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self.model!r}, base_url={self.base_url!r})"

    # -- client and errors -------------------------------------------------------------------

    def _secret(self) -> str | None:
        return self.__api_key or os.environ.get("OPENAI_API_KEY") or None

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                from openai import AsyncOpenAI
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ConfigError(
                    "OpenAIModel needs the openai package: pip install 'toolbridge[openai]'",
                    code="ERR_CONFIG",
                ) from exc
            key = self._secret()
            if not key:
                raise ModelError("no API key: pass api_key= or set OPENAI_API_KEY", code="ERR_MODEL_AUTH")
            self._client = AsyncOpenAI(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (a later request opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _scrub(self, text: str) -> str:
        key = self._secret()
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return bounded(text, 500)

    def _translate(self, exc: Exception) -> tuple[ModelError, bool]:
        """The `ModelError` for `exc`, and whether the failure may be retried."""
        import openai

        where = f"model {self.model!r}"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = self._scrub(str(getattr(exc, "message", "") or exc))
            if status in (401, 403):
                return ModelError(
                    f"{where}: authentication failed ({status}): {detail}", code="ERR_MODEL_AUTH"
                ), False
            if status == 404:
                return ModelError(f"{where}: not found (404): {detail}", code="ERR_MODEL_NOT_FOUND"), False
            if status == 429:
                return ModelError(f"{where}: rate limited (429): {detail}", code="ERR_MODEL_RATE_LIMIT"), True
            if status >= 500:
                return ModelError(
                    f"{where}: server error ({status}): {detail}", code="ERR_MODEL_UNAVAILABLE"
                ), True
            return ModelError(
                f"{where}: request rejected ({status}): {detail}", code="ERR_MODEL_BAD_REQUEST"
            ), False
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"{where}: request timed out", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(f"{where}: cannot connect to the API", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return ModelError(f"{where}: malformed response", code="ERR_MODEL_BAD_RESPONSE"), False
        return ModelError(f"{where}: {type(exc).__name__}: {self._scrub(str(exc))}", code="ERR_MODEL"), False

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = self.retry_backoff_s * (2**attempt) * (0.5 + random.random() / 2)
        response = getattr(exc, "response", None)
        header = getattr(response, "headers", {}).get("retry-after") if response is not None else None
        if header:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(header), 20.0))
        return float(min(delay, 20.0))

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        import openai

        client = self._get_client()
        attempt = 0
        while True:
            try:
                return await client.chat.completions.create(**kwargs)
            except openai.OpenAIError as exc:
                error, retryable = self._translate(exc)
                if not retryable or attempt >= self.max_retries:
                    raise error from None
                await anyio.sleep(self._delay(attempt, exc))
                attempt += 1

    def _kwargs(self, request: ModelRequest, plan: _ToolPlan, stream: bool) -> dict[str, Any]:
        merged = {**self.options, **{_snake(k): v for k, v in request.options.items()}}
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_wire_messages(request.messages, images=self.supports_images),
        }
        extra: dict[str, Any] = {}
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
    def _usage(raw: Any) -> Usage:
        if raw is None:
            return Usage(requests=1)
        i_tok = int(getattr(raw, "prompt_tokens", 0) or 0)
        o_tok = int(getattr(raw, "completion_tokens", 0) or 0)
        total = int(getattr(raw, "total_tokens", 0) or (i_tok + o_tok))
        return Usage(i_tok, o_tok, total, 1)

    # -- the Model protocol ------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Take one turn (non-streaming).

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        plan = _ToolPlan(request.tools, self.strict_schemas)
        completion = await self._call(self._kwargs(request, plan, stream=False))
        choices = getattr(completion, "choices", None)
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
            if getattr(call, "function", None) is not None
        )
        return ModelResponse(
            text=message.content or "",
            tool_calls=calls,
            usage=self._usage(completion.usage),
            finish_reason=normalize_finish_reason(choice.finish_reason, has_tool_calls=bool(calls)),
        )

    async def request_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Take one turn, streaming text deltas; tool calls arrive in the final response.

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        import openai

        plan = _ToolPlan(request.tools, self.strict_schemas)
        stream = await self._call(self._kwargs(request, plan, stream=True))
        text: list[str] = []
        pending: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage = Usage(requests=1)
        try:
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage = self._usage(chunk.usage)
                for choice in chunk.choices or []:
                    if choice.index not in (0, None):
                        continue
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        slot = pending.setdefault(call.index, {"id": "", "name": "", "arguments": []})
                        if call.id:
                            slot["id"] = call.id
                        if call.function is not None:
                            if call.function.name:
                                slot["name"] += call.function.name
                            if call.function.arguments:
                                slot["arguments"].append(call.function.arguments)
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
            close = getattr(stream, "close", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await close()
        calls = tuple(
            ToolCall(
                id=slot["id"],
                name=slot["name"],
                arguments=plan.arguments(slot["name"], "".join(slot["arguments"])),
            )
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
