"""The model contract: one turn in, one turn out.

A `Model` takes a `ModelRequest` (the conversation so far as `Message`s, the tools on offer
as `ToolSpec`s under their model-facing names, and free-form options) and returns a
`ModelResponse` (text and/or `ToolCall`s, the token `Usage` of that call, and a normalized
finish reason). `request_stream` is the streaming variant: it yields `TextDelta`s as text
arrives and ends with exactly one `ModelResponse`. `ModelBase` gives every model a
`request_stream` that wraps `request`, so a provider only has to write one of the two.

Messages are provider-neutral dataclasses; each provider translates them to its own wire
format (see `OpenAIModel`). Content is either a plain string or a tuple of content parts
(`TextPart`, `ImagePart`, `AudioPart` from `toolbridge.content`).

Prices are in micro-USD per million tokens, so cost arithmetic stays in integers:
`estimate_cost_micros(model, usage)` rounds up, and a model without prices costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, TypeGuard, runtime_checkable

from ...content import Part, TextPart
from ...tools import ToolSpec

__all__ = [
    "FINISH_REASONS",
    "FinishReason",
    "Message",
    "Model",
    "ModelBase",
    "ModelPrices",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "NativeBlocks",
    "NativeSearch",
    "NativeToolSearch",
    "Role",
    "TextDelta",
    "ToolCall",
    "Usage",
    "estimate_cost_micros",
    "message_text",
    "normalize_finish_reason",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
FinishReason: TypeAlias = Literal[
    "stop", "length", "content-filter", "tool-calls", "max_steps", "paused", "other"
]
FINISH_REASONS: frozenset[str] = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "max_steps", "paused", "other"}
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one or more model calls.

    Attributes:
        input_tokens: prompt tokens.
        output_tokens: completion tokens.
        total_tokens: as reported (or the sum of the two).
        requests: number of model calls counted.
        cache_read_tokens: the part of `input_tokens` read from the provider's prompt cache.
        cache_write_tokens: the part of `input_tokens` written to the provider's prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            self.requests + other.requests,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for.

    Attributes:
        id: the model's id for the call (may be empty; the agent then makes one).
        name: the model-facing tool name.
        arguments: the parsed arguments object.
    """

    id: str
    name: str
    arguments: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NativeBlocks:
    """An assistant turn's content in its provider's own form, to be sent back to it as it came.

    A provider whose turns hold blocks the neutral messages cannot say (Anthropic's thinking,
    its tool search's `server_tool_use` / `tool_search_tool_result`, a turn paused with
    `pause_turn`) puts them here; the same provider sends them back verbatim with that turn,
    others ignore them. They travel with the conversation (`RunResult.messages`, and the dict
    form `message_to_dict` / `Agent.run` read), so a run continued elsewhere keeps them.

    Attributes:
        provider: whose wire form they are (`anthropic`).
        blocks: the turn's content blocks (JSON objects), in the provider's order.
    """

    provider: str
    blocks: tuple[Mapping[str, object], ...]


@dataclass(frozen=True, slots=True)
class NativeSearch:
    """One search the provider ran on its side in a turn (Anthropic's tool search tool).

    Attributes:
        query: what the model searched for (its query, or its regex), at most 500 characters.
        loaded: the model-facing names of the tools the search loaded (at most 50).
        error: the provider's error code when the search failed, else None.
    """

    query: str
    loaded: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, provider-neutral.

    Attributes:
        role: `system`, `user`, `assistant` or `tool`.
        content: text, or a tuple of content parts (tool results, images from a user).
        tool_calls: the calls an assistant message asked for.
        tool_call_id: for a tool message, the call it answers.
        name: for a tool message, the model-facing tool name.
        is_error: for a tool message, whether it reports a failure.
        native: for an assistant message, its content as the provider sent it (`NativeBlocks`).
    """

    role: Role
    content: str | tuple[Part, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    native: NativeBlocks | None = None


def message_text(message: Message) -> str:
    """The text of a message: its string content, or its text parts joined by newlines."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class NativeToolSearch:
    """The provider's own tool search over some of a request's tools (Anthropic's deferred loading).

    Only a model whose `native_tool_search` attribute is true is sent a request carrying one
    (`Agent(tool_search=...)` decides; see `toolbridge.agent.ToolSearch`).

    Attributes:
        deferred: names among the request's tools the provider loads only when its search finds them.
        variant: the provider's search: `bm25` (plain-words queries) or `regex`.
    """

    deferred: frozenset[str]
    variant: Literal["bm25", "regex"] = "bm25"


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a model needs for one turn.

    Attributes:
        messages: the conversation so far.
        tools: the tools on offer, named as the model must call them.
        options: provider options (temperature, max_tokens, ...), merged agent < run.
        tool_search: the provider's own search over the deferred part of `tools` (None: every
            tool is shown).
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    options: Mapping[str, object] = field(default_factory=dict)
    tool_search: NativeToolSearch | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model turn.

    Attributes:
        text: the assistant's text (may be empty when it only calls tools).
        tool_calls: the tool calls it asked for, in its order.
        usage: tokens of this call (`requests` is 1).
        finish_reason: `stop`, `length`, `content-filter`, `tool-calls`, `paused` or `other`.
            `paused`: the provider paused a long turn of its own tools (Anthropic's
            `pause_turn`); the agent sends the turn back as it is and the model goes on.
        native: the turn's content in the provider's own form, when it holds blocks the neutral
            fields cannot say (see `NativeBlocks`).
        native_searches: the searches the provider ran on its side in this turn.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=lambda: Usage(requests=1))
    finish_reason: str = "stop"
    native: NativeBlocks | None = None
    native_searches: tuple[NativeSearch, ...] = ()


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, as it streams in."""

    text: str


ModelStreamItem: TypeAlias = TextDelta | ModelResponse


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """What a model costs, in micro-USD per million tokens.

    Attributes:
        input_per_million_micros: price of one million input tokens, in micro-USD.
        output_per_million_micros: price of one million output tokens, in micro-USD.
        cache_read_per_million_micros: price of one million input tokens read from the prompt
            cache (`None`: the input price).
        cache_write_per_million_micros: price of one million input tokens written to the prompt
            cache (`None`: the input price).
    """

    input_per_million_micros: int
    output_per_million_micros: int
    cache_read_per_million_micros: int | None = None
    cache_write_per_million_micros: int | None = None

    def cost_micros(self, usage: Usage) -> int:
        """Cost of `usage` in micro-USD, rounded up to a whole micro-unit.

        Cached input tokens (a part of `input_tokens`) are priced at the cache prices when set.
        """
        read = max(0, usage.cache_read_tokens)
        write = max(0, usage.cache_write_tokens)
        plain = max(0, usage.input_tokens - read - write)
        read_price = self.cache_read_per_million_micros
        write_price = self.cache_write_per_million_micros
        exact = (
            plain * self.input_per_million_micros
            + read * (self.input_per_million_micros if read_price is None else read_price)
            + write * (self.input_per_million_micros if write_price is None else write_price)
            + usage.output_tokens * self.output_per_million_micros
        )
        return math.ceil(exact / 1_000_000)


@runtime_checkable
class Model(Protocol):
    """A language model that can take one turn.

    Attributes:
        id: a stable id used by permissions (`openai:<name>`, `anthropic:<name>`,
            `google:<name>`, `scripted`, `function`).
        supports_images: whether image parts may be sent to it.
        supports_audio: (optional attribute, default false) whether audio parts of tool
            results may be sent to it; otherwise the agent sends a placeholder.
        prices: its prices, or `None` (costs nothing as far as toolbridge knows).
    """

    id: str
    supports_images: bool
    prices: ModelPrices | None

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Take one turn. Raises `ModelError` when the provider fails."""
        ...

    def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Take one turn, yielding `TextDelta`s and then exactly one `ModelResponse`.

        An async generator (the agent closes it when the run stops early): write it as an
        `async def` with `yield`."""
        ...


class ModelBase:
    """Convenience base: `request_stream` wraps `request` (one delta with the whole text)."""

    id: str = "model"
    supports_images: bool = False
    supports_audio: bool = False
    native_tool_search: bool = False
    """Whether the provider runs a tool search of its own (see `NativeToolSearch`)."""
    prices: ModelPrices | None = None

    async def request(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - abstract
        """Take one turn; subclasses implement this."""
        raise NotImplementedError

    def estimate_cost_micros(self, usage: Usage) -> int:
        """Cost of `usage` on this model in micro-USD (0 without prices)."""
        return estimate_cost_micros(self, usage)

    async def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Yield the whole text as one `TextDelta` (when there is text), then the response.

        Raises:
            ModelError: as `request` does.
        """
        response = await self.request(request)
        if response.text:
            yield TextDelta(response.text)
        yield response


@runtime_checkable
class _Priced(Protocol):
    """Anything with a `prices` attribute (a `Model`, or a user's object standing in for one)."""

    @property
    def prices(self) -> object: ...


def estimate_cost_micros(model: object, usage: Usage) -> int:
    """Cost of `usage` on `model` in micro-USD: 0 when the model has no prices."""
    prices = model.prices if isinstance(model, _Priced) else None
    if not isinstance(prices, ModelPrices):
        return 0
    return prices.cost_micros(usage)


@runtime_checkable
class _TakesImages(Protocol):
    @property
    def supports_images(self) -> object: ...


@runtime_checkable
class _TakesAudio(Protocol):
    @property
    def supports_audio(self) -> object: ...


def media_support(model: object) -> tuple[bool, bool]:
    """Whether `model` takes images, and audio: its `supports_images` / `supports_audio`, false
    when it lacks them (`supports_audio` is an optional attribute of a `Model`; audio is sent
    only when it is `True` itself)."""
    if isinstance(model, ModelBase):  # a plain class check: a protocol's costs tens of microseconds
        return bool(model.supports_images), model.supports_audio is True
    images = bool(model.supports_images) if isinstance(model, _TakesImages) else False
    return images, model.supports_audio is True if isinstance(model, _TakesAudio) else False


@runtime_checkable
class _SearchesNatively(Protocol):
    @property
    def native_tool_search(self) -> object: ...


def searches_natively(model: object) -> bool:
    """Whether `model`'s `native_tool_search` attribute is `True` (false when it has none)."""
    if isinstance(model, ModelBase):  # a plain class check: a protocol's costs tens of microseconds
        return model.native_tool_search is True
    return isinstance(model, _SearchesNatively) and model.native_tool_search is True


@runtime_checkable
class _Requests(Protocol):
    @property
    def id(self) -> object: ...

    @property
    def request(self) -> object: ...


@runtime_checkable
class _Streams(Protocol):
    def request_stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]: ...


def takes_requests(model: object) -> TypeGuard[Model]:
    """Whether `model` has what an agent needs of a `Model`: a string `id` and `request()` (the
    rest is optional to it)."""
    # `ModelBase` first: a plain class check, where a protocol's costs tens of microseconds
    if not isinstance(model, (ModelBase, _Requests)):
        return False
    return callable(model.request) and isinstance(model.id, str)


def stream_of(model: Model) -> Callable[[ModelRequest], AsyncGenerator[ModelStreamItem, None]] | None:
    """`model.request_stream`, or None for a model without one (it is asked with `request`)."""
    return model.request_stream if isinstance(model, (ModelBase, _Streams)) else None


def normalize_finish_reason(raw: str | None, *, has_tool_calls: bool = False) -> str:
    """Map a provider's finish reason onto toolbridge's set."""
    if raw in (None, ""):
        return "tool-calls" if has_tool_calls else "stop"
    value = str(raw).lower().replace("_", "-")
    if value in ("tool-calls", "function-call"):
        return "tool-calls"
    if value in ("stop", "end-turn", "eos", "stop-sequence"):
        return "tool-calls" if has_tool_calls else "stop"
    if value in ("length", "max-tokens"):
        return "length"
    if value in ("content-filter", "safety"):
        return "content-filter"
    return "other"
