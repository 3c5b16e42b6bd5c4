"""`AnthropicModel`: Claude over the Messages API, on the official `anthropic` SDK.

Design:

- The SDK (`AsyncAnthropic`) is imported and its client made on the first request, with the
  SDK's own retries off: `RemoteModel` retries 429, 529 (overloaded), other 5xx answers and
  connection failures `max_retries` times with backoff. A streamed turn is retried only before
  its first event arrives. Failures are `ModelError`s with the `ERR_MODEL_*` codes of
  `OpenAIModel`; an error event inside a stream is mapped by its error type.
- Messages: system messages become the `system` parameter; a tool result is a `tool_result`
  block (in a `user` turn, consecutive results in one turn) whose content holds the result's
  text **and its images** as image blocks, natively, with `is_error` set on a failed call.
  Consecutive messages of one role are merged into one turn, as the API expects. Audio, and
  image types the API does not take, become the placeholder text.
- Tools are sent with their JSON Schema as `input_schema` (on a copy; `type: object` is added
  when a schema lacks it).
- Prompt caching (`prompt_caching=True`, the default) puts a `cache_control` breakpoint on the
  last tool definition and on the system prompt, so an agent loop re-reads both from the cache;
  `Usage.cache_read_tokens` / `cache_write_tokens` report what the API counted, and
  `Usage.input_tokens` includes them.
- Thinking blocks that precede a turn's tool calls are remembered (bounded, by the first
  tool-use id) and sent back with that turn, as the API requires when thinking is on.
- Tool input that is not a JSON object (or, streamed, JSON that does not parse) is
  `ERR_MODEL_BAD_RESPONSE`, never silently `{}`.
- Native tool search (`native_tool_search = True`): a request with `tool_search` sends the
  API's tool search tool (`tool_search_tool_bm25_20251119` or `..._regex_20251119`) first, the
  deferred tools with `defer_loading: true` (the cache breakpoint goes on the last tool that is
  not deferred). The API runs the search on its side (`server_tool_use`, then a
  `tool_search_tool_result` whose `tool_reference` blocks load the found tools); those blocks are
  remembered like thinking blocks and sent back, in their order, with the turn's tool calls, so
  the next request still has the tools the search loaded.
- A turn holding such blocks, or paused (`stop_reason: "pause_turn"`: the API stopped a long
  run of its own tools), comes back with its whole content as the API sent it
  (`ModelResponse.native`, finish reason `paused` for a pause); an assistant message carrying
  it is sent back verbatim (when its tool calls are the blocks' `tool_use`s), which is how a
  paused turn is continued and how a conversation continued elsewhere keeps what a search
  loaded. `ModelResponse.native_searches` says what each search looked for and loaded.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import anyio

from ...content import ImagePart, Part, TextPart, media_placeholder
from ...errors import ModelError
from ...tools import ToolSpec
from ._base import (
    Message,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    NativeBlocks,
    NativeSearch,
    NativeToolSearch,
    TextDelta,
    ToolCall,
    Usage,
)
from ._remote import RemoteModel, _LruMemory, snake_case, tool_arguments

if TYPE_CHECKING:  # the SDK is the optional `anthropic` extra: imported when the first request is made
    from anthropic import AsyncAnthropic, AsyncStream
    from anthropic.types import ContentBlock as ApiContentBlock
    from anthropic.types import Message as ApiMessage
    from anthropic.types import RawMessageStreamEvent

__all__ = ["AnthropicModel", "to_anthropic_messages"]

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
    "pause_turn": "paused",
}
_ERROR_TYPES = {  # error `type` of an error event inside a stream -> (status it stands for)
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "request_too_large": 413,
}
_EPHEMERAL = {"type": "ephemeral"}
_KEPT = frozenset({"thinking", "redacted_thinking", "server_tool_use", "tool_search_tool_result"})
"""Blocks of a turn sent back before its tool calls (thinking; the API's own tool search)."""
DEFAULT_MAX_TOKENS = 4096
_PROVIDER = "anthropic"
_MAX_QUERY = 500
_MAX_LOADED = 50


class AnthropicTurn(TypedDict):
    """One turn of the Messages API's `messages`: a role and its content blocks."""

    role: str
    content: list[dict[str, object]]


def _block(part: Part, images: bool) -> dict[str, object] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImagePart) and images and part.media_type.lower() in IMAGE_TYPES:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type.lower(), "data": part.data},
        }
    return {"type": "text", "text": media_placeholder(part)}


def _blocks(content: str | tuple[Part, ...], images: bool) -> list[dict[str, object]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in (_block(p, images) for p in content) if b is not None]


def _text(content: str | tuple[Part, ...]) -> str:
    return "\n".join(str(b["text"]) for b in _blocks(content, False))


def to_anthropic_messages(
    messages: Sequence[Message],
    *,
    images: bool,
    thinking: Callable[[str], list[dict[str, object]] | None] | None = None,
) -> tuple[str, list[AnthropicTurn]]:
    """The `system` text and the Messages API turns for neutral messages.

    `thinking` gives, for the first tool-use id of an assistant turn, the blocks to send back
    before its tool calls (thinking, and the API's own tool search with its results).
    """
    system: list[str] = []
    wire: list[AnthropicTurn] = []

    def add(role: str, blocks: list[dict[str, object]]) -> None:
        if not blocks:
            return
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append(AnthropicTurn(role=role, content=blocks))

    for message in messages:
        if message.role == "system":
            text = _text(message.content)
            if text:
                system.append(text)
        elif message.role == "user":
            add("user", _blocks(message.content, images))
        elif message.role == "assistant":
            native = _native_blocks(message)
            if native is not None:  # as the API sent it: thinking, searches, a paused turn
                add("assistant", native)
                continue
            blocks: list[dict[str, object]] = []
            if message.tool_calls and thinking is not None:
                blocks.extend(thinking(message.tool_calls[0].id) or [])
            blocks.extend(_blocks(message.content, False))
            blocks.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
                for call in message.tool_calls
            )
            add("assistant", blocks)
        else:
            result: dict[str, object] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
            content = _blocks(message.content, images)
            if content:
                result["content"] = content
            if message.is_error:
                result["is_error"] = True
            add("user", [result])
    return "\n\n".join(system), wire


def _native_blocks(message: Message) -> list[dict[str, object]] | None:
    """A message's own API blocks, when it has them and its tool calls are their `tool_use`s."""
    native = message.native
    if native is None or native.provider != _PROVIDER or not native.blocks:
        return None
    uses = [b.get("id") for b in native.blocks if b.get("type") == "tool_use"]
    if uses != [call.id for call in message.tool_calls]:
        return None  # the calls were changed after the turn: rebuild it from them
    return [dict(b) for b in native.blocks]


def _searches(blocks: Sequence[Mapping[str, object]], before: Sequence[Message]) -> tuple[NativeSearch, ...]:
    """What the turn's tool searches looked for and loaded (bounded: see `NativeSearch`).

    A search is reported in the turn its result came in; its query may be in a turn paused
    before it (the trailing assistant messages of the request, sent back as they came)."""
    asked: dict[object, object] = {}
    for message in before:
        for block in message.native.blocks if message.native is not None else ():
            if block.get("type") == "server_tool_use":
                asked[block.get("id")] = block.get("input")
    out: list[NativeSearch] = []
    for block in blocks:
        if block.get("type") == "server_tool_use":
            asked[block.get("id")] = block.get("input")
        if block.get("type") != "tool_search_tool_result":
            continue
        given = asked.get(block.get("tool_use_id"))
        query = given.get("query", given.get("pattern", "")) if isinstance(given, Mapping) else ""
        content = block.get("content")
        loaded: list[str] = []
        error: str | None = None
        if isinstance(content, Mapping):
            if str(content.get("type", "")).endswith("_error"):
                error = str(content.get("error_code") or "error")[:64]
            references = content.get("tool_references")
            for ref in references if isinstance(references, list | tuple) else ():
                name = ref.get("tool_name") if isinstance(ref, Mapping) else None
                if isinstance(name, str) and len(loaded) < _MAX_LOADED:
                    loaded.append(name[:256])
        out.append(NativeSearch(str(query)[:_MAX_QUERY], tuple(loaded), error))
    return tuple(out)


def _paused_before(messages: Sequence[Message]) -> list[Message]:
    """The assistant messages at the end of a request (a paused turn sent back to go on)."""
    tail: list[Message] = []
    for message in reversed(messages):
        if message.role != "assistant":
            break
        tail.append(message)
    return tail


def _turn(
    text: str,
    calls: list[ToolCall],
    usage: Usage,
    finish: str,
    blocks: list[dict[str, object]] | None,
    request: ModelRequest,
) -> ModelResponse:
    if blocks is None:
        return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage, finish_reason=finish)
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=usage,
        finish_reason=finish,
        native=NativeBlocks(_PROVIDER, tuple(blocks)),
        native_searches=_searches(blocks, _paused_before(request.messages)),
    )


def _tools(
    tools: Sequence[ToolSpec], cache: bool, search: NativeToolSearch | None = None
) -> list[dict[str, object]]:
    wire: list[dict[str, object]] = []
    deferred = search.deferred if search is not None else frozenset()
    if search is not None:
        name = f"tool_search_tool_{search.variant}"
        wire.append({"type": f"{name}_20251119", "name": name})
    for spec in tools:
        schema = dict(spec.parameters)
        if "type" not in schema:
            schema["type"] = "object"
        item: dict[str, object] = {"name": spec.name, "input_schema": schema}
        if spec.description:
            item["description"] = spec.description
        if spec.name in deferred:
            item["defer_loading"] = True
        wire.append(item)
    if cache:
        shown = [item for item in wire if not item.get("defer_loading")]
        if shown:
            shown[-1]["cache_control"] = dict(_EPHEMERAL)
    return wire


def _usage(raw: object, previous: Usage | None = None) -> Usage:
    """Usage from an API usage object; fields it lacks keep `previous`'s values (streaming).

    `raw` is what the reply held: a usage object, or (from a hostile server) anything else."""
    from anthropic.types import MessageDeltaUsage
    from anthropic.types import Usage as ApiUsage

    before = previous or Usage(requests=1)
    usage = raw if isinstance(raw, ApiUsage | MessageDeltaUsage) else None

    def field(value: object, old: int) -> int:
        return int(value) if isinstance(value, int) else old

    read = field(usage and usage.cache_read_input_tokens, before.cache_read_tokens)
    write = field(usage and usage.cache_creation_input_tokens, before.cache_write_tokens)
    plain = field(
        usage and usage.input_tokens,
        before.input_tokens - before.cache_read_tokens - before.cache_write_tokens,
    )
    out = field(usage and usage.output_tokens, before.output_tokens)
    total_in = plain + read + write
    return Usage(total_in, out, total_in + out, 1, cache_read_tokens=read, cache_write_tokens=write)


@dataclass
class _StreamedBlock:
    """One content block of a streamed turn, as its start and delta events built it."""

    type: object = None
    id: object = ""
    name: object = ""
    json: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    signature: str = ""
    data: object = None
    text: list[str] = field(default_factory=list)
    raw: dict[str, object] | None = None
    """The start event's block as the API sent it (for the kinds sent back: `_KEPT`)."""


class AnthropicModel(RemoteModel["AsyncAnthropic"]):
    """Claude over the Anthropic Messages API.

    Args:
        model: the model name (`claude-sonnet-4-5`, ...).
        api_key: the key; default `ANTHROPIC_API_KEY` from the environment.
        base_url: the API root (default the SDK's; `ANTHROPIC_BASE_URL` is honoured by it).
        options: default request options (`max_tokens`, `temperature`, `stop_sequences`,
            `thinking`, `tool_choice`, ...; camelCase keys are converted to snake_case; keys the
            SDK does not know go in the request body). `max_tokens` defaults to 4096.
        prices: micro-USD per million tokens (cache prices optional), for cost accounting.
        max_retries: retries after a 429, a 529, a 5xx or a connection failure.
        prompt_caching: put `cache_control` on the tool list and the system prompt.
        supports_images: whether images are sent as image blocks (else placeholders).
        timeout_s: per-request timeout.
        retry_backoff_s: first retry delay; doubles each retry (with jitter), capped at 20 s.

    Raises:
        ConfigError: `ERR_CONFIG` for an empty model name or negative retry settings.
    """

    provider = "anthropic"
    native_tool_search = True
    key_env = ("ANTHROPIC_API_KEY",)
    base_url_env = "ANTHROPIC_BASE_URL"
    extra = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        options: Mapping[str, object] | None = None,
        prices: ModelPrices | None = None,
        max_retries: int = 3,
        *,
        prompt_caching: bool = True,
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
        self.prompt_caching = prompt_caching
        self._thinking: _LruMemory[list[dict[str, object]]] = _LruMemory(512)
        self._known: frozenset[str] | None = None

    # -- client and errors -------------------------------------------------------------------

    def _new_client(self, key: str) -> AsyncAnthropic:
        try:
            from anthropic import AsyncAnthropic
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise self._missing_package(exc) from exc
        return AsyncAnthropic(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s)

    async def _close_client(self, client: AsyncAnthropic) -> None:
        await client.close()

    def _translate(self, exc: Exception) -> tuple[ModelError, bool]:
        import anthropic

        where = f"model {self.model!r}"
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            body = exc.body
            error = body.get("error") if isinstance(body, dict) else None
            kind = error.get("type") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            if status < 400:  # an error event inside a 200 stream: its type says what it was
                status = _ERROR_TYPES.get(str(kind), 500)
            detail = self._scrub(str(message or exc.message or exc))
            if status == 529:
                return ModelError(f"{where}: overloaded (529): {detail}", code="ERR_MODEL_UNAVAILABLE"), True
            return self._status_error(status, detail)
        if isinstance(exc, anthropic.APITimeoutError):
            return ModelError(f"{where}: request timed out", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, anthropic.APIConnectionError):
            return ModelError(f"{where}: cannot connect to the API", code="ERR_MODEL_UNAVAILABLE"), True
        if isinstance(exc, anthropic.APIResponseValidationError | ValueError):
            return ModelError(f"{where}: malformed response", code="ERR_MODEL_BAD_RESPONSE"), False
        return self._unknown_error(exc), False

    # -- requests ------------------------------------------------------------------------------

    def _known_options(self, client: AsyncAnthropic) -> frozenset[str]:
        if self._known is None:
            try:
                names = set(inspect.signature(client.messages.create).parameters)
            except (TypeError, ValueError):  # pragma: no cover - a very different SDK
                names = set()
            self._known = frozenset(names - {"messages", "model", "system", "tools", "stream", "extra_body"})
        return self._known

    def _kwargs(self, client: AsyncAnthropic, request: ModelRequest, stream: bool) -> dict[str, Any]:
        """The keyword arguments of `client.messages.create`.

        Typed `Any`: which of the caller's options are the SDK's own keywords is decided at run
        time from the SDK's signature (`_known_options`), so no static type can check the call."""
        merged = {**self.options, **{snake_case(k): v for k, v in request.options.items()}}
        if "max_completion_tokens" in merged and "max_tokens" not in merged:
            merged["max_tokens"] = merged.pop("max_completion_tokens")
        merged.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        system, messages = to_anthropic_messages(
            request.messages, images=self.supports_images, thinking=self._thinking.get
        )
        kwargs: dict[str, object] = {"model": self.model, "messages": messages}
        if system:
            block: dict[str, object] = {"type": "text", "text": system}
            if self.prompt_caching:
                block["cache_control"] = dict(_EPHEMERAL)
            kwargs["system"] = [block]
        tools = _tools(request.tools, self.prompt_caching, request.tool_search)
        if tools:
            kwargs["tools"] = tools
        known = self._known_options(client)
        extra: dict[str, object] = {}
        for key, value in merged.items():
            (kwargs if key in known else extra)[key] = value
        if extra:
            kwargs["extra_body"] = extra
        if stream:
            kwargs["stream"] = True
        return kwargs

    def _remember(self, thinking: list[dict[str, object]], calls: Sequence[ToolCall]) -> None:
        if thinking and calls and calls[0].id:
            self._thinking.put(calls[0].id, thinking)

    def _finish(self, stop_reason: object, calls: Sequence[ToolCall]) -> str:
        if calls:
            return "tool-calls"
        return _STOP.get(str(stop_reason), "stop" if stop_reason in (None, "") else "other")

    # -- the Model protocol ----------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Take one turn (non-streaming).

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        client = self._get_client()  # first: without the SDK installed, the missing extra is named
        from anthropic import BaseModel
        from anthropic import types as api

        kwargs = self._kwargs(client, request, stream=False)

        async def create() -> ApiMessage:
            message: ApiMessage = await client.messages.create(**kwargs)
            return message

        message = await self._retrying(create)
        content: object = message.content if isinstance(message, api.Message) else None
        if not isinstance(content, list):
            raise ModelError(
                f"model {self.model!r}: the response has no content", code="ERR_MODEL_BAD_RESPONSE"
            )
        # a hostile server's content may hold anything: only the SDK's blocks are read
        received = [b for b in message.content if isinstance(b, BaseModel)]
        text: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, object]] = []
        stop_reason = message.stop_reason
        whole = stop_reason == "pause_turn" or any(b.type in _KEPT for b in received)
        for block in received:
            if isinstance(block, api.TextBlock) and block.type == "text":
                text.append(str(block.text or ""))
            elif isinstance(block, api.ToolUseBlock) and block.type == "tool_use":
                name = str(block.name or "")
                calls.append(
                    ToolCall(
                        id=str(block.id or ""),
                        name=name,
                        arguments=tool_arguments(self.model, name, block.input),
                    )
                )
            elif block.type in _KEPT:
                thinking.append(block.model_dump(mode="json", exclude_none=True))
        self._remember(thinking, calls)
        blocks: list[dict[str, object]] | None = None
        if whole:
            blocks = [b.model_dump(mode="json", exclude_none=True) for b in received]
        return _turn(
            "".join(text), calls, _usage(message.usage), self._finish(stop_reason, calls), blocks, request
        )

    async def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Take one turn, streaming text deltas; tool calls arrive in the final response.

        Raises:
            ModelError: with the codes listed in the module docstring.
        """
        client = self._get_client()  # first: without the SDK installed, the missing extra is named
        from anthropic import types as api
        from anthropic.types.raw_message_delta_event import Delta as MessageDelta

        kwargs = self._kwargs(client, request, stream=True)

        async def open_stream() -> tuple[
            AsyncStream[RawMessageStreamEvent],
            AsyncIterator[RawMessageStreamEvent],
            RawMessageStreamEvent | None,
        ]:
            stream: AsyncStream[RawMessageStreamEvent] = await client.messages.create(**kwargs)
            iterator = stream.__aiter__()
            try:
                first: RawMessageStreamEvent | None = await iterator.__anext__()
            except StopAsyncIteration:
                first = None
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await stream.close()
                raise
            return stream, iterator, first

        stream, iterator, first = await self._retrying(open_stream)
        text: list[str] = []
        blocks: dict[int, _StreamedBlock] = {}
        usage = Usage(requests=1)
        stop_reason: object = None
        try:
            event = first
            while event is not None:
                # each event is checked to be the SDK's class it says it is: a hostile stream
                # may send anything (a block of None, a delta of another kind)
                if isinstance(event, api.RawMessageStartEvent) and event.type == "message_start":
                    started = event.message
                    usage = _usage(started.usage if isinstance(started, api.Message) else None, usage)
                elif isinstance(event, api.RawContentBlockStartEvent) and event.type == "content_block_start":
                    blocks[int(event.index)] = _started(event.content_block)
                elif isinstance(event, api.RawContentBlockDeltaEvent) and event.type == "content_block_delta":
                    slot = blocks.setdefault(int(event.index), _StreamedBlock())
                    delta = event.delta
                    if isinstance(delta, api.TextDelta) and delta.type == "text_delta":
                        if delta.text:
                            text.append(delta.text)
                            slot.text.append(delta.text)
                            yield TextDelta(delta.text)
                    elif isinstance(delta, api.InputJSONDelta) and delta.type == "input_json_delta":
                        slot.json.append(delta.partial_json or "")
                    elif isinstance(delta, api.ThinkingDelta) and delta.type == "thinking_delta":
                        slot.thinking.append(delta.thinking or "")
                    elif isinstance(delta, api.SignatureDelta) and delta.type == "signature_delta":
                        slot.signature += delta.signature or ""
                elif isinstance(event, api.RawMessageDeltaEvent) and event.type == "message_delta":
                    ended = event.delta
                    stop_reason = (
                        ended.stop_reason if isinstance(ended, MessageDelta) else None
                    ) or stop_reason
                    usage = _usage(event.usage, usage)
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    event = None
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
                await stream.close()
        calls: list[ToolCall] = []
        thinking: list[dict[str, object]] = []
        whole: list[dict[str, object]] = []  # the turn's blocks as the API sent them
        for _, slot in sorted(blocks.items()):
            if slot.type == "text":
                whole.append({"type": "text", "text": "".join(slot.text)})
            elif slot.type == "tool_use":
                name = str(slot.name or "")
                if not name:
                    raise ModelError(
                        f"model {self.model!r}: a streamed tool call has no name",
                        code="ERR_MODEL_BAD_RESPONSE",
                    )
                call = ToolCall(
                    id=str(slot.id or ""),
                    name=name,
                    arguments=tool_arguments(self.model, name, "".join(slot.json)),
                )
                calls.append(call)
                whole.append({"type": "tool_use", "id": call.id, "name": name, "input": dict(call.arguments)})
            elif slot.type == "thinking":
                thinking.append(
                    {"type": "thinking", "thinking": "".join(slot.thinking), "signature": slot.signature}
                )
                whole.append(thinking[-1])
            elif slot.type == "redacted_thinking":
                thinking.append({"type": "redacted_thinking", "data": slot.data})
                whole.append(thinking[-1])
            elif slot.type == "server_tool_use":  # the API's own tool search: its input streamed
                raw = dict(slot.raw or {})
                if slot.json:
                    raw["input"] = tool_arguments(self.model, str(raw.get("name", "")), "".join(slot.json))
                thinking.append(raw)
                whole.append(raw)
            elif slot.type == "tool_search_tool_result":  # whole in its start event
                thinking.append(dict(slot.raw or {}))
                whole.append(thinking[-1])
        self._remember(thinking, calls)
        keep = stop_reason == "pause_turn" or any(b["type"] in _KEPT for b in whole)
        yield _turn(
            "".join(text), calls, usage, self._finish(stop_reason, calls), whole if keep else None, request
        )


def _started(block: ApiContentBlock) -> _StreamedBlock:
    """The slot a `content_block_start` event opens (`block` may be anything from a hostile server)."""
    from anthropic import BaseModel
    from anthropic import types as api

    if not isinstance(block, BaseModel):
        return _StreamedBlock()
    slot = _StreamedBlock(type=block.type)
    if isinstance(block, api.ToolUseBlock | api.ServerToolUseBlock):
        slot.id, slot.name = block.id, block.name
    elif isinstance(block, api.RedactedThinkingBlock):
        slot.data = block.data
    elif isinstance(block, api.TextBlock):
        slot.text.append(str(block.text or ""))
    if block.type in _KEPT:
        slot.raw = block.model_dump(mode="json", exclude_none=True)
    return slot
