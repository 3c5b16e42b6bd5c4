"""LangChain / LangGraph: toolbridge tools as LangChain tools, and LangChain tools as a provider.

```python
async with files, runtime.session(tool_providers=[binding]) as session:
    tools = await as_tools(session)                       # StructuredTools, JSON Schema args
    agent = create_react_agent(model, tools)              # or ToolNode(tools) in your graph
    await agent.ainvoke({"messages": [...]}, config={"callbacks": [governor(session)]})
```

- `await as_tools(source)`: one async `StructuredTool` per tool of a `GovernedSession`
  (governed), a `ToolProvider` or a list of declared tools (not governed), with the tool's JSON
  Schema as `args_schema` and `response_format="content_and_artifact"`: the content is the text
  (a string) or LangChain content blocks (text, image, audio), the artifact
  `{"structured_content": value}` for a structured result. They only run async (`ainvoke`).
- Failures: under a session, a refusal or failure raises `PolicyError` (the runtime's code and
  generic message), which LangGraph's `ToolNode` lets end the run by default: the model never
  sees it. Not governed, a tool failure raises `ToolException` with the text an ungoverned
  toolbridge `Agent` shows, and the tool's `handle_tool_error=True` turns it into an error
  `ToolMessage` the model may act on. Cancellation passes through.
- Hostile arguments: arguments nesting deeper than 64 levels (`MAX_ARGUMENT_DEPTH`) are refused
  when the tool is invoked, before LangChain renders them for its callbacks (which raises
  `RecursionError` at about 1,000 levels): under a session the call is recorded refused
  (`not_started`, `INVALID_INPUT`) and `PolicyError` `INVALID_INPUT` ends the run; not governed,
  the model gets an error `ToolMessage` and the tool is not called.
- `governor(session)`: a callback handler that governs every chat-model call of the run through
  the session (`model:<id>` grant, `max_model_calls`, `max_context_bytes`, the budget at
  `prices`); `<id>` is `<ls_provider>:<ls_model_name>` as the model reports them (e.g.
  `openai:gpt-4o`), or `model_id=`. It raises (`raise_error=True`), which stops the run.
- `from_tools(tools)`: a `ToolProvider` over existing LangChain tools, so they can be bound into
  a session (`{"provider": from_tools([...]), "effects": "read"}`) and governed beside MCP tools.

Needs the `langchain` extra (`pip install "toolbridge[langchain]"`: langchain-core; LangGraph for
`ToolNode` / `create_react_agent`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._extras import missing

try:
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.messages.content import (
        AudioContentBlock,
        ImageContentBlock,
        TextContentBlock,
        create_audio_block,
        create_image_block,
        create_text_block,
    )
    from langchain_core.outputs import ChatGeneration, LLMResult
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise missing("langchain", exc.name or "langchain_core", "toolbridge.integrations.langchain") from None

from .._bounded import MAX_ARGUMENT_DEPTH, arguments_too_deep
from .._json import JsonObject
from ..agent import ModelPrices
from ..content import AudioPart, ImagePart, Part, TextPart, parts_from_mcp, to_json_text
from ..errors import ConfigError, ToolError, bounded
from ..runtime import GovernedSession
from ..tools import ToolResult, ToolSpec
from ._core import SourceLike, ToolSource, as_source, classify, log, model_parts, refuse_deep, usable

if TYPE_CHECKING:
    from langchain_core.messages import ToolCall
    from langchain_core.runnables import RunnableConfig
    from langchain_core.utils.pydantic import TypeBaseModel

_Blocks = list[TextContentBlock | ImageContentBlock | AudioContentBlock]

__all__ = ["LangChainTools", "ModelGovernor", "as_tools", "from_tools", "governor"]


def _to_langchain(result: ToolResult) -> tuple[str | _Blocks, dict[str, object] | None]:
    """(content, artifact) of a `content_and_artifact` tool for `result`."""
    artifact: dict[str, object] | None = None
    if result.kind == "structured":
        artifact = {"structured_content": result.structured}
    parts = model_parts(result)
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart)), artifact
    blocks: _Blocks = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append(create_text_block(part.text))
        elif isinstance(part, ImagePart):
            blocks.append(create_image_block(base64=part.data, mime_type=part.media_type))
        elif isinstance(part, AudioPart):
            blocks.append(create_audio_block(base64=part.data, mime_type=part.media_type))
    return blocks, artifact


class _BoundedTool(StructuredTool):
    """A `StructuredTool` that refuses arguments nesting too deep before LangChain touches them."""

    toolbridge_source: ToolSource | None = None

    async def ainvoke(
        self, input: str | dict[str, Any] | ToolCall, config: RunnableConfig | None = None, **kwargs: object
    ) -> object:
        """As `StructuredTool.ainvoke` (whose `input` type this repeats), after the depth check."""
        call = input if isinstance(input, Mapping) and input.get("type") == "tool_call" else None
        args = call.get("args") if call is not None else input
        if isinstance(args, Mapping) and arguments_too_deep(args):
            source = self.toolbridge_source
            call_id = call.get("id") if call is not None else None
            if source is not None and source.session is not None:
                raise await refuse_deep(source.session, self.name, call_id)
            text = (
                f"Error: the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; the tool was not called."
            )
            if call is not None and isinstance(call_id, str):
                return ToolMessage(content=text, tool_call_id=call_id, name=self.name, status="error")
            raise ToolException(text)
        return await super().ainvoke(input, config, **kwargs)


def _tool(source: ToolSource, spec: ToolSpec, parameters: JsonObject) -> BaseTool:
    name = spec.name

    async def call(**kwargs: object) -> tuple[str | _Blocks, dict[str, object] | None]:
        try:
            result = await source.call_tool(name, kwargs)
        except Exception as exc:
            failure = classify(exc)
            if failure.kind == "stop":
                raise failure.error from None
            raise ToolException(failure.text) from None
        return _to_langchain(result)

    # StructuredTool resolves its coroutine's type hints at every call (looking for a config
    # parameter); with postponed annotations that is an eval per call. This one takes none.
    call.__annotations__ = {}
    return _BoundedTool(
        toolbridge_source=source,
        name=name,
        description=spec.description or name,
        args_schema=parameters,
        coroutine=call,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={"toolbridge_governed": source.governed},
    )


async def as_tools(source: SourceLike) -> list[BaseTool]:
    """LangChain tools for `source` (a `GovernedSession`, a `ToolProvider`, or declared tools).

    Lists the tools now (enter the session first). A tool whose name or schema LangChain cannot
    take is left out, with one warning on the `toolbridge.integrations` logger.

    Raises:
        ConfigError: `ERR_CONFIG` for a `source` of another kind.
        PolicyError: governed, when the session cannot list its tools (it has ended).
    """
    tool_source = as_source(source, "langchain.as_tools")
    specs = await tool_source.list_tools()
    return usable(specs, "langchain.as_tools", lambda spec, params: _tool(tool_source, spec, params))


class ModelGovernor(AsyncCallbackHandler):
    """A callback handler that governs chat-model calls through a session. Use `governor()`."""

    raise_error = True
    run_inline = True

    def __init__(
        self, session: GovernedSession, *, model_id: str | None = None, prices: ModelPrices | None = None
    ):
        self.session = session
        self.model_id = model_id
        self.prices = prices
        self._open: set[uuid.UUID] = set()

    def _model_id(
        self, serialized: Mapping[str, object] | None, metadata: Mapping[str, object] | None
    ) -> str:
        if self.model_id:
            return self.model_id
        meta = metadata or {}
        provider, name = meta.get("ls_provider"), meta.get("ls_model_name")
        if isinstance(provider, str) and isinstance(name, str) and name:
            return f"{provider}:{name}"
        if isinstance(provider, str) and provider:
            return provider
        fallback = (serialized or {}).get("name")
        return fallback if isinstance(fallback, str) and fallback else "unknown"

    async def on_chat_model_start(
        self,
        serialized: dict[str, object],
        messages: list[list[BaseMessage]],
        *,
        run_id: uuid.UUID,
        metadata: dict[str, object] | None = None,
        invocation_params: dict[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        size = 0
        for batch in messages:
            for message in batch:
                size += len(json.dumps(message.model_dump(), default=str))
        params = invocation_params or {}
        await self.session.before_model_call(
            self._model_id(serialized, metadata),
            context_bytes=size,
            max_output_tokens=_cap(params.get("max_tokens") or params.get("max_completion_tokens")),
            prices=self.prices,
        )
        self._open.add(run_id)

    async def on_llm_start(
        self,
        serialized: dict[str, object],
        prompts: list[str],
        *,
        run_id: uuid.UUID,
        metadata: dict[str, object] | None = None,
        invocation_params: dict[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        """A text (non-chat) model's call: governed the same way."""
        params = invocation_params or {}
        await self.session.before_model_call(
            self._model_id(serialized, metadata),
            context_bytes=sum(len(p.encode("utf-8", "replace")) for p in prompts),
            max_output_tokens=_cap(params.get("max_tokens")),
            prices=self.prices,
        )
        self._open.add(run_id)

    async def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID, **kwargs: object) -> None:
        if run_id not in self._open:
            return
        self._open.discard(run_id)
        input_tokens = output_tokens = tool_calls = 0
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                if not isinstance(message, AIMessage):  # only an AI message reports usage and calls
                    continue
                usage = message.usage_metadata
                input_tokens += int(usage.get("input_tokens", 0) or 0) if usage else 0
                output_tokens += int(usage.get("output_tokens", 0) or 0) if usage else 0
                tool_calls += len(message.tool_calls or ())
        await self.session.after_model_call(
            input_tokens=input_tokens, output_tokens=output_tokens, tool_calls=tool_calls
        )

    async def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: object) -> None:
        if run_id in self._open:
            self._open.discard(run_id)
            self.session.on_model_call_error(error)


def _cap(value: object) -> int | None:
    """A request's output-token cap (anything but an integer: none, the runtime's default)."""
    return value if isinstance(value, int) else None


def governor(
    session: GovernedSession, *, model_id: str | None = None, prices: ModelPrices | None = None
) -> ModelGovernor:
    """A callback handler governing every chat-model call of a run through `session`.

    Pass it in the run's config: `agent.ainvoke(input, config={"callbacks": [governor(session)]})`.

    Args:
        session: the `GovernedSession` (entered).
        model_id: the id for the `model:<id>` grant (default `<ls_provider>:<ls_model_name>`).
        prices: the model's `ModelPrices`, for the budget (default: the model costs nothing).

    Raises:
        ConfigError: `ERR_CONFIG` when `session` is not a `GovernedSession`.
    """
    if not isinstance(session, GovernedSession):
        raise ConfigError("langchain.governor: session must be a GovernedSession", code="ERR_CONFIG")
    return ModelGovernor(session, model_id=model_id, prices=prices)


# -- LangChain tools as a toolbridge provider -------------------------------------------------------


def _from_content(content: object, artifact: object) -> ToolResult:
    if isinstance(artifact, Mapping) and "structured_content" in artifact:
        return ToolResult.of_structured(artifact["structured_content"])
    if isinstance(content, str):
        return ToolResult.of_text(content)
    if isinstance(content, list):
        blocks: list[object] = []
        for block in content:
            if isinstance(block, str):
                blocks.append({"type": "text", "text": block})
            elif isinstance(block, Mapping) and block.get("type") in ("image", "audio"):
                blocks.append(
                    {"type": block["type"], "data": block.get("base64"), "mimeType": block.get("mime_type")}
                )
            else:
                blocks.append(block)
        parts: list[Part] | None = parts_from_mcp(blocks)
        if parts is not None:
            return ToolResult.of_parts(parts)
    return ToolResult.of_text(to_json_text(content))


def _json_schema(model: TypeBaseModel) -> dict[str, object]:
    from pydantic import BaseModel

    if issubclass(model, BaseModel):
        return model.model_json_schema()
    schema: dict[str, object] = model.schema()  # a pydantic v1 model
    return schema


class LangChainTools:
    """A `ToolProvider` over LangChain tools (see `from_tools`)."""

    def __init__(self, tools: Sequence[BaseTool]):
        self._tools: dict[str, BaseTool] = {}
        for tool in tools:
            if not isinstance(tool, BaseTool):
                raise ConfigError(
                    f"langchain.from_tools: {bounded(repr(tool), 120)} is not a LangChain BaseTool",
                    code="ERR_CONFIG",
                )
            if tool.name in self._tools:
                raise ConfigError(
                    f"langchain.from_tools: two tools are named {tool.name!r}", code="ERR_CONFIG"
                )
            self._tools[tool.name] = tool
        self._specs: list[ToolSpec] | None = None

    def __repr__(self) -> str:
        return f"LangChainTools({sorted(self._tools)!r})"

    async def list_tools(self) -> list[ToolSpec]:
        if self._specs is None:
            specs: list[ToolSpec] = []
            for name, tool in self._tools.items():
                try:
                    schema = tool.tool_call_schema
                    parameters = schema if isinstance(schema, dict) else _json_schema(schema)
                    parameters = {k: v for k, v in parameters.items() if k not in ("title", "description")}
                    parameters.setdefault("type", "object")
                    parameters.setdefault("properties", {})
                except Exception as exc:
                    log.warning("langchain.from_tools: left out tool %r: %s", name, bounded(str(exc), 200))
                    continue
                specs.append(ToolSpec(name=name, description=tool.description or "", parameters=parameters))
            self._specs = specs
        return list(self._specs)

    async def call_tool(self, name: str, args: Mapping[str, object]) -> ToolResult:
        """Run one LangChain tool (as a tool call, so `content_and_artifact` tools keep both).

        Raises:
            ToolError: `ERR_TOOL_FAILED` when the tool raised or answered with an error status
                (its text is kept as `server_text`).
        """
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f'no such tool "{bounded(name, 100)}"', code="ERR_TOOL_FAILED")
        call = {"name": name, "args": dict(args), "id": f"call_{uuid.uuid4().hex}", "type": "tool_call"}
        try:
            message = await tool.ainvoke(call)
        except Exception as exc:
            raise ToolError(
                f'tool "{name}" failed', code="ERR_TOOL_FAILED", server_text=f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(message, ToolMessage):
            return _from_content(message, None)
        if message.status == "error":
            text = message.content if isinstance(message.content, str) else to_json_text(message.content)
            raise ToolError(f'tool "{name}" failed', code="ERR_TOOL_FAILED", server_text=text)
        return _from_content(message.content, message.artifact)


def from_tools(tools: Sequence[BaseTool]) -> LangChainTools:
    """A `ToolProvider` over existing LangChain tools, to bind into a session or an `Agent`.

    Raises:
        ConfigError: `ERR_CONFIG` for something that is not a `BaseTool`, or two tools with one name.
    """
    if isinstance(tools, BaseTool):
        tools = [tools]
    return LangChainTools(list(tools))
