"""pydantic-ai: toolbridge tools as a pydantic-ai toolset, governed by a session.

```python
async with files, runtime.session(tool_providers=[binding]) as session:
    agent = pydantic_ai.Agent(model, capabilities=[governed(session)])   # tools + model calls
    # or: pydantic_ai.Agent(model, toolsets=[toolset(session)])          # tools only
    result = await agent.run("...")
```

- `toolset(source)`: an `AbstractToolset` over a `GovernedSession` (governed), a `ToolProvider`
  or a list of declared tools (not governed). Tools are listed at each run step (pydantic-ai's
  `get_tools`); arguments are passed through as an object (the session, or the tool, validates
  them).
- Results: text stays text, images and audio become `BinaryContent`, structured content is
  returned as the value itself (pydantic-ai serializes it for the model).
- Failures: under a session, a refusal or failure raises `PolicyError` out of `agent.run` (the
  runtime's code and generic message; the model never sees it). Not governed, a tool failure
  raises `ModelRetry` with the text an ungoverned toolbridge `Agent` shows, so the model may
  correct its call (pydantic-ai's `max_retries` applies). Cancellation passes through.
- `governed(session)`: a capability that registers the toolset and governs every model request
  through the session (`before_model_call` / `after_model_call`): the `model:<id>` grant
  (`<id>` is `<system>:<model name>`, e.g. `openai:gpt-4o`, or `model_id=`),
  `max_model_calls`, `max_context_bytes`, and the budget at `prices` (a `ModelPrices`).

Needs the `pydantic-ai` extra (`pip install "toolbridge[pydantic-ai]"`: pydantic-ai-slim).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._extras import missing

try:
    from pydantic_ai import messages as _messages
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ModelRetry
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise missing("pydantic-ai", exc.name or "pydantic_ai", "toolbridge.integrations.pydantic_ai") from None

from .._json import JsonObject
from ..agent import ModelPrices
from ..content import AudioPart, ImagePart, TextPart
from ..errors import ConfigError
from ..runtime import GovernedSession
from ..tools import ToolResult, ToolSpec
from ._core import Converter, SourceLike, ToolSource, as_source, classify, model_parts

if TYPE_CHECKING:
    from pydantic_ai.capabilities.abstract import WrapModelRequestHandler
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import AgentToolset

# pydantic-ai's `AgentDepsT` is contravariant: a toolset or capability over `object` deps works in
# an agent with any deps (toolbridge never reads them).

__all__ = ["GovernedCapability", "ToolbridgeToolset", "governed", "toolset"]

_ARGS_VALIDATOR = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


def _to_pydantic_ai(result: ToolResult) -> object:
    """The return value pydantic-ai gives the model for `result`."""
    if result.kind == "structured" and not result.media:
        return result.structured
    out: list[str | _messages.BinaryContent] = []
    for part in model_parts(result):
        if isinstance(part, TextPart):
            out.append(part.text)
        elif isinstance(part, ImagePart):
            out.append(_messages.BinaryImage(data=base64.b64decode(part.data), media_type=part.media_type))
        elif isinstance(part, AudioPart):
            out.append(_messages.BinaryContent(data=base64.b64decode(part.data), media_type=part.media_type))
    if len(out) == 1:
        return out[0]
    return out


class ToolbridgeToolset(AbstractToolset[object]):
    """A pydantic-ai toolset over a toolbridge source (see the module docs). Use `toolset()`."""

    def __init__(self, source: ToolSource, *, id: str | None = None, max_retries: int | None = None):
        self._source = source
        self._id = id
        self._max_retries = max_retries
        self._convert = Converter("pydantic-ai toolset", self._definition)

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def label(self) -> str:
        return "toolbridge session" if self._source.governed else "toolbridge tools"

    @property
    def governed(self) -> bool:
        """Whether calls go through a `GovernedSession`."""
        return self._source.governed

    def _definition(self, spec: ToolSpec, parameters: JsonObject) -> ToolDefinition:
        return ToolDefinition(
            name=spec.name,
            description=spec.description or None,
            parameters_json_schema=parameters,
            metadata={"annotations": dict(spec.annotations)} if spec.annotations else None,
        )

    async def get_tools(self, ctx: RunContext[object]) -> dict[str, ToolsetTool[object]]:
        retries = self._max_retries if self._max_retries is not None else ctx.max_retries
        definitions: list[ToolDefinition] = self._convert(await self._source.list_tools())
        return {
            d.name: ToolsetTool(toolset=self, tool_def=d, max_retries=retries, args_validator=_ARGS_VALIDATOR)
            for d in definitions
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, object], ctx: RunContext[object], tool: ToolsetTool[object]
    ) -> object:
        try:
            result = await self._source.call_tool(name, tool_args)
        except Exception as exc:
            failure = classify(exc)
            if failure.kind == "stop":
                raise failure.error from None
            raise ModelRetry(failure.text) from None
        return _to_pydantic_ai(result)


def toolset(
    source: SourceLike, *, id: str | None = None, max_retries: int | None = None
) -> ToolbridgeToolset:
    """A pydantic-ai toolset over `source` (a `GovernedSession`, a `ToolProvider`, or declared tools).

    Args:
        source: only a `GovernedSession` is governed.
        id: the toolset's id (pydantic-ai needs one for durable execution).
        max_retries: how often the model may retry a failed call (default: the agent's).

    Raises:
        ConfigError: `ERR_CONFIG` for a `source` of another kind.
    """
    return ToolbridgeToolset(as_source(source, "pydantic_ai.toolset"), id=id, max_retries=max_retries)


def _context_bytes(messages: Sequence[_messages.ModelMessage]) -> int:
    try:
        return len(_messages.ModelMessagesTypeAdapter.dump_json(list(messages)))
    except Exception:  # a message pydantic-ai cannot serialize: count what can be
        return sum(len(repr(m)) for m in messages)


@dataclass
class GovernedCapability(AbstractCapability[object]):
    """Registers a session's toolset and governs every model request (see the module docs)."""

    session: GovernedSession | None = None
    model_id: str | None = None
    prices: ModelPrices | None = None
    tools: ToolbridgeToolset | None = field(default=None, repr=False)

    def get_toolset(self) -> AgentToolset[object] | None:
        return self.tools

    async def wrap_model_request(
        self,
        ctx: RunContext[object],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> _messages.ModelResponse:
        session = self.session
        assert session is not None
        model = request_context.model
        model_id = self.model_id or f"{model.system}:{model.model_name}"
        settings = request_context.model_settings or {}
        await session.before_model_call(
            model_id,
            context_bytes=_context_bytes(request_context.messages),
            max_output_tokens=settings.get("max_tokens") if isinstance(settings, dict) else None,
            prices=self.prices,
        )
        try:
            response = await handler(request_context)
        except BaseException as exc:
            session.on_model_call_error(exc)
            raise
        usage = response.usage
        calls = sum(1 for part in response.parts if isinstance(part, _messages.ToolCallPart))
        await session.after_model_call(
            input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0, tool_calls=calls
        )
        return response


def governed(
    session: GovernedSession,
    *,
    model_id: str | None = None,
    prices: ModelPrices | None = None,
    id: str | None = None,
) -> GovernedCapability:
    """A capability: the session's tools, and every model request governed by the session.

    Args:
        session: the `GovernedSession` (entered).
        model_id: the id for the `model:<id>` grant (default `<system>:<model name>`).
        prices: the model's `ModelPrices`, for the budget (default: the model costs nothing).
        id: the toolset's id.

    Raises:
        ConfigError: `ERR_CONFIG` when `session` is not a `GovernedSession`.
    """
    if not isinstance(session, GovernedSession):
        raise ConfigError("pydantic_ai.governed: session must be a GovernedSession", code="ERR_CONFIG")
    return GovernedCapability(
        session=session, model_id=model_id, prices=prices, tools=toolset(session, id=id)
    )
