"""`GeminiModel`: Gemini over the Gemini API, on the official `google-genai` SDK.

Design:

- The SDK is imported and its client made on the first request (`vertexai=False`; the base URL
  goes in `http_options`, so a compatible or loopback server can stand in), with the SDK's own
  retries off: `RemoteModel` retries 429, 5xx and connection failures with backoff; a streamed
  turn only before its first chunk. Failures are `ModelError`s with the `ERR_MODEL_*` codes of
  `OpenAIModel`. Gemini answers a bad key with 400 `API_KEY_INVALID`: that is `ERR_MODEL_AUTH`.
- Tools become function declarations. Each schema is converted on a copy by `to_gemini_schema`
  to the OpenAPI subset `parameters` take; when that cannot be done faithfully the original goes
  as `parametersJsonSchema` instead (as `OpenAIModel` falls back from strict schemas).
- Messages: system messages become `system_instruction`; a tool result is a `function_response`
  part (in a `user` turn, consecutive results in one turn) whose `response` is `{"output": text}`
  (`{"error": text}` for a failed call) and whose own `parts` carry the result's images as inline
  data, natively. Audio is sent as inline data in user turns; in tool results, and for image
  types the API does not take, the placeholder text stands in.
- Function calls without an id get one (`gcall_...`), which is not sent back; the thought
  signature that came with a call is remembered (bounded) and returned with it, as Gemini 3
  models require.
- `MALFORMED_FUNCTION_CALL`, or call arguments that are not an object, is
  `ERR_MODEL_BAD_RESPONSE`. A prompt the API blocked gives an empty turn with
  `finish_reason="content-filter"`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, TypedDict

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
)
from ._remote import RemoteModel, _LruMemory, snake_case, tool_arguments
from ._schema import to_gemini_schema

if TYPE_CHECKING:  # the SDK is the optional `google` extra: imported when the first request is made
    from google.genai import Client
    from google.genai.types import (
        Candidate,
        GenerateContentResponse,
        GenerateContentResponseUsageMetadata,
    )
    from google.genai.types import (
        Part as ApiPart,
    )

__all__ = ["GeminiModel", "to_gemini_contents"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
RESPONSE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})
AUDIO_TYPES = frozenset(
    {
        "audio/wav",
        "audio/x-wav",
        "audio/mp3",
        "audio/mpeg",
        "audio/aiff",
        "audio/aac",
        "audio/ogg",
        "audio/flac",
    }
)
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_GENERATED = "gcall_"


class GeminiTurn(TypedDict):
    """One item of the Gemini API's `contents` (the SDK's dict form): a role and its parts."""

    role: str
    parts: list[dict[str, object]]


def _inline(part: ImagePart | AudioPart, name: str | None = None) -> dict[str, object] | None:
    try:
        data = base64.b64decode(part.data, validate=True)
    except (binascii.Error, ValueError):
        return None
    blob: dict[str, object] = {"mime_type": part.media_type.lower(), "data": data}
    if name:
        blob["display_name"] = name
    return {"inline_data": blob}


def _user_parts(content: str | tuple[Part, ...], images: bool) -> list[dict[str, object]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    out: list[dict[str, object]] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"text": part.text})
            continue
        wire = None
        if (isinstance(part, ImagePart) and images and part.media_type.lower() in IMAGE_TYPES) or (
            isinstance(part, AudioPart) and part.media_type.lower() in AUDIO_TYPES
        ):
            wire = _inline(part)
        out.append(wire if wire is not None else {"text": media_placeholder(part)})
    return out


def _function_response(message: Message, name: str, call_id: str | None, images: bool) -> dict[str, object]:
    lines: list[str] = []
    media: list[dict[str, object]] = []
    content = message.content if not isinstance(message.content, str) else (TextPart(message.content),)
    for part in content:
        if isinstance(part, TextPart):
            lines.append(part.text)
            continue
        wire = None
        if isinstance(part, ImagePart) and images and part.media_type.lower() in RESPONSE_IMAGE_TYPES:
            extension = part.media_type.lower().split("/")[-1]
            wire = _inline(part, f"{call_id or name}-{len(media) + 1}.{extension}")
        if wire is None:
            lines.append(media_placeholder(part))
        else:
            media.append(wire)
    response: dict[str, object] = {
        "name": name,
        "response": {"error" if message.is_error else "output": "\n".join(lines)},
    }
    if call_id:
        response["id"] = call_id
    if media:
        response["parts"] = media
    return {"function_response": response}


def to_gemini_contents(
    messages: Sequence[Message],
    *,
    images: bool,
    signature: Callable[[str], bytes | None] | None = None,
    generated: Callable[[str], bool] | None = None,
) -> tuple[str, list[GeminiTurn]]:
    """The system instruction and the `contents` for neutral messages (SDK dict form).

    `signature` gives the thought signature remembered for a call id; `generated` says whether
    an id was made up by toolbridge (such ids are not sent to the API).
    """
    system: list[str] = []
    contents: list[GeminiTurn] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[dict[str, object]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append(GeminiTurn(role=role, parts=parts))

    def wire_id(call_id: str | None) -> str | None:
        if not call_id or (generated is not None and generated(call_id)):
            return None
        return call_id

    for message in messages:
        if message.role == "system":
            text = "\n".join(str(p["text"]) for p in _user_parts(message.content, False) if "text" in p)
            if text:
                system.append(text)
        elif message.role == "user":
            add("user", _user_parts(message.content, images))
        elif message.role == "assistant":
            parts = [p for p in _user_parts(message.content, False) if "text" in p]
            for call in message.tool_calls:
                names[call.id] = call.name
                function_call: dict[str, object] = {"name": call.name, "args": dict(call.arguments)}
                if wire_id(call.id):
                    function_call["id"] = call.id
                item: dict[str, object] = {"function_call": function_call}
                sig = signature(call.id) if signature is not None and call.id else None
                if sig:
                    item["thought_signature"] = sig
                parts.append(item)
            add("model", parts)
        else:
            call_id = message.tool_call_id or ""
            name = message.name or names.get(call_id) or "tool"
            add("user", [_function_response(message, name, wire_id(call_id), images)])
    return "\n\n".join(system), contents


def _declarations(tools: Sequence[ToolSpec]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for spec in tools:
        item: dict[str, object] = {"name": spec.name}
        if spec.description:
            item["description"] = spec.description
        converted = to_gemini_schema(spec.parameters)
        if converted is None:
            item["parameters_json_schema"] = dict(spec.parameters)
        elif converted:
            item["parameters"] = converted
        out.append(item)
    return out


def _enum_name(value: Enum | str | None) -> str | None:
    """An SDK enum's wire name (the SDK passes values it does not know through as strings)."""
    if value is None:
        return None
    return str(value.value if isinstance(value, Enum) else value)


def _usage(raw: GenerateContentResponseUsageMetadata | None) -> Usage:
    if raw is None:
        return Usage(requests=1)

    def count(value: int | None) -> int:
        return int(value) if isinstance(value, int) else 0

    i_tok = count(raw.prompt_token_count) + count(raw.tool_use_prompt_token_count)
    o_tok = count(raw.candidates_token_count) + count(raw.thoughts_token_count)
    total = count(raw.total_token_count) or i_tok + o_tok
    return Usage(i_tok, o_tok, total, 1, cache_read_tokens=count(raw.cached_content_token_count))


class GeminiModel(RemoteModel["Client"]):
    """Gemini over the Gemini API.

    Args:
        model: the model name (`gemini-2.5-flash`, ...).
        api_key: the key; default `GEMINI_API_KEY`, else `GOOGLE_API_KEY`, from the environment.
        options: default request options: any `GenerateContentConfig` field (`temperature`,
            `max_output_tokens` (or `max_tokens`), `stop_sequences`, `thinking_config`,
            `tool_config`, ...; camelCase keys are converted); other keys go in the request body.
        prices: micro-USD per million tokens, for cost accounting.
        max_retries: retries after a 429, a 5xx or a connection failure.
        base_url: the API root (default the SDK's; `GOOGLE_GEMINI_BASE_URL` is honoured by it).
        supports_images: whether images are sent as inline data (else placeholders).
        timeout_s: per-request timeout.
        retry_backoff_s: first retry delay; doubles each retry (with jitter), capped at 20 s.

    Raises:
        ConfigError: `ERR_CONFIG` for an empty model name or negative retry settings.
    """

    provider = "google"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    extra = "google"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        options: Mapping[str, object] | None = None,
        prices: ModelPrices | None = None,
        max_retries: int = 3,
        *,
        base_url: str | None = None,
        supports_images: bool = True,
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
        self._signatures: _LruMemory[bytes] = _LruMemory(1024)
        self._generated: _LruMemory[bool] = _LruMemory(4096)

    # -- client and errors -------------------------------------------------------------------

    def _new_client(self, key: str) -> Client:
        try:
            from google import genai
            from google.genai import types
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise self._missing_package(exc) from exc
        options = types.HttpOptions(base_url=self.base_url, timeout=max(1, int(self.timeout_s * 1000)))
        return genai.Client(vertexai=False, api_key=key, http_options=options)

    async def _close_client(self, client: Client) -> None:
        await client.aio.aclose()

    def _translate(self, exc: Exception) -> tuple[ModelError, bool]:
        from google.genai import errors

        where = f"model {self.model!r}"
        if isinstance(exc, errors.APIError):
            status = int(exc.code or 0)
            detail = self._scrub(str(exc.message or exc.status or exc))
            if status == 400 and "API_KEY_INVALID" in self._scrub(str(exc.details)):
                status = 401
            if status < 400:  # an error inside a 200 stream
                status = 500
            return self._status_error(status, detail)
        name = type(exc).__name__
        if "Timeout" in name:
            return ModelError(f"{where}: request timed out", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, OSError) or name in (
            "ConnectError",
            "RemoteProtocolError",
            "ReadError",
            "NetworkError",
        ):
            return ModelError(f"{where}: cannot connect to the API", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, ValueError):  # pydantic's ValidationError, bad JSON
            return ModelError(f"{where}: malformed response", code="ERR_MODEL_BAD_RESPONSE"), False
        return self._unknown_error(exc), False

    # -- requests ------------------------------------------------------------------------------

    def _config(self, request: ModelRequest, system: str) -> dict[str, object]:
        from google.genai import types

        fields = set(types.GenerateContentConfig.model_fields)
        merged = {**self.options, **{snake_case(k): v for k, v in request.options.items()}}
        for alias in ("max_tokens", "max_completion_tokens"):
            if alias in merged:
                merged.setdefault("max_output_tokens", merged.pop(alias))
        config: dict[str, object] = {}
        extra: dict[str, object] = {}
        for key, value in merged.items():
            (config if key in fields and key not in ("http_options", "tools") else extra)[key] = value
        if system:
            config["system_instruction"] = system
        declarations = _declarations(request.tools)
        if declarations:
            config["tools"] = [{"function_declarations": declarations}]
            config["automatic_function_calling"] = {"disable": True}
        if extra:
            config["http_options"] = {"extra_body": extra}
        return config

    def _prepare(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `generate_content`: the contents and config in the SDK's dict form.

        Typed `Any`: the config holds the caller's options as they are (any value, under the
        SDK's field names), so no static type can check the call."""
        system, contents = to_gemini_contents(
            request.messages,
            images=self.supports_images,
            signature=self._signatures.get,
            generated=lambda call_id: self._generated.get(call_id) is not None,
        )
        return {"model": self.model, "contents": contents, "config": self._config(request, system)}

    def _calls(self, parts: Sequence[ApiPart]) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for part in parts:
            call = part.function_call
            if call is None:
                continue
            name = str(call.name or "")
            if not name:
                raise ModelError(
                    f"model {self.model!r}: a function call has no name", code="ERR_MODEL_BAD_RESPONSE"
                )
            call_id = str(call.id or "")
            if not call_id:
                call_id = f"{_GENERATED}{uuid.uuid4().hex[:16]}"
                self._generated.put(call_id, True)
            sig = part.thought_signature
            if isinstance(sig, bytes) and sig:
                self._signatures.put(call_id, sig)
            calls.append(ToolCall(call_id, name, tool_arguments(self.model, name, call.args)))
        return calls

    @staticmethod
    def _text(parts: Sequence[ApiPart]) -> str:
        return "".join(str(p.text) for p in parts if p.text and not p.thought and not p.function_call)

    def _finish(self, reason: str | None, message: str | None, calls: Sequence[ToolCall]) -> str:
        if reason in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
            detail = self._scrub(str(message)) if message else reason
            raise ModelError(
                f"model {self.model!r} produced a malformed function call: {detail}",
                code="ERR_MODEL_BAD_RESPONSE",
            )
        if calls:
            return "tool-calls"
        if reason in (None, "", "STOP", "FINISH_REASON_UNSPECIFIED"):
            return "stop"
        if reason == "MAX_TOKENS":
            return "length"
        return "content-filter" if reason in _FILTERED else "other"

    def _candidate(self, response: GenerateContentResponse) -> Candidate | None:
        candidates = response.candidates or []
        return candidates[0] if candidates else None

    # -- the Model protocol ----------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Take one turn (non-streaming).

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        client = self._get_client()
        kwargs = self._prepare(request)
        response = await self._retrying(lambda: client.aio.models.generate_content(**kwargs))
        usage = _usage(response.usage_metadata)
        candidate = self._candidate(response)
        if candidate is None:
            feedback = response.prompt_feedback
            if feedback is not None and _enum_name(feedback.block_reason):
                return ModelResponse(usage=usage, finish_reason="content-filter")
            raise ModelError(
                f"model {self.model!r}: the response has no candidates", code="ERR_MODEL_BAD_RESPONSE"
            )
        parts = _parts(candidate)
        calls = self._calls(parts)
        reason = _enum_name(candidate.finish_reason)
        return ModelResponse(
            text=self._text(parts),
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason=self._finish(reason, candidate.finish_message, calls),
        )

    async def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Take one turn, streaming text deltas; function calls arrive in the final response.

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        client = self._get_client()
        kwargs = self._prepare(request)

        async def open_stream() -> tuple[
            AsyncIterator[GenerateContentResponse], GenerateContentResponse | None
        ]:
            stream = await client.aio.models.generate_content_stream(**kwargs)
            try:
                first = await _next(stream)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _close(stream)
                raise
            return stream, first

        stream, first = await self._retrying(open_stream)
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage(requests=1)
        reason: str | None = None
        message: str | None = None
        blocked = False
        try:
            chunk = first
            while chunk is not None:
                if chunk.usage_metadata is not None:
                    usage = _usage(chunk.usage_metadata)
                candidate = self._candidate(chunk)
                if candidate is None:
                    feedback = chunk.prompt_feedback
                    blocked = blocked or (feedback is not None and bool(_enum_name(feedback.block_reason)))
                else:
                    parts = _parts(candidate)
                    piece = self._text(parts)
                    if piece:
                        text.append(piece)
                        yield TextDelta(piece)
                    calls.extend(self._calls(parts))
                    reason = _enum_name(candidate.finish_reason) or reason
                    message = candidate.finish_message or message
                chunk = await _next(stream)
        except ModelError:
            raise
        except Exception as exc:
            error, _ = self._translate(exc)
            if error.code == "ERR_MODEL":
                error = ModelError(
                    f"model {self.model!r}: the response stream broke ({type(exc).__name__})",
                    code="ERR_MODEL_UNAVAILABLE",
                )
            raise error from None
        finally:
            with anyio.CancelScope(shield=True):
                await _close(stream)
        if blocked and not text and not calls:
            yield ModelResponse(usage=usage, finish_reason="content-filter")
            return
        yield ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=usage,
            finish_reason=self._finish(reason, message, calls),
        )


def _parts(candidate: Candidate) -> list[ApiPart]:
    return list(candidate.content.parts or []) if candidate.content is not None else []


async def _pull(stream: AsyncIterator[GenerateContentResponse]) -> GenerateContentResponse | None:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


async def _next(stream: AsyncIterator[GenerateContentResponse]) -> GenerateContentResponse | None:
    """The next chunk of an SDK stream (`None` at its end), read in an asyncio task of its own.

    The SDK's stream is a chain of async generators whose cleanup (closing the HTTP response)
    awaits in `finally` blocks. A cancellation must reach them once, as asyncio delivers it, and
    then let that cleanup finish; an anyio cancel scope would cancel the cleanup too and leave
    the response open. So the read runs in its own task, which a cancellation of this one
    cancels and waits for (shielded).
    """
    task = asyncio.ensure_future(_pull(stream))
    try:
        return await asyncio.shield(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved; the caller's own exception is the one raised
        raise


async def _close(stream: AsyncIterator[GenerateContentResponse]) -> None:
    """Close an SDK stream now, HTTP response included.

    Closing the SDK's outer generator would leave its inner generators (and the response they
    hold) to the garbage collector. Instead a read is started and cancelled while it waits for
    the network, so the cancellation unwinds the whole chain and each `finally` closes what it
    holds; then the outer generator is closed. Bounded: at most 64 chunks already buffered are
    read and dropped first.
    """
    for _ in range(64):
        task = asyncio.ensure_future(_pull(stream))
        await asyncio.sleep(0)  # the read runs until it waits for the network, or finishes
        if not task.done():
            task.cancel()
            await asyncio.wait([task])
            break
        if task.exception() is not None or task.result() is None:
            break
    if isinstance(stream, AsyncGenerator):  # the SDK's stream is one; an iterator has nothing to close
        await stream.aclose()
