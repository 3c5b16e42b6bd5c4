"""OpenAI Agents SDK: toolbridge tools as Agents SDK `FunctionTool`s, governed by a session.

```python
async with files, runtime.session(tool_providers=[binding]) as session:
    agent = agents.Agent(name="assistant", model=model, tools=await as_tools(session))
    result = await agents.Runner.run(agent, "...", hooks=run_hooks(session))
```

- `await as_tools(source)`: one `FunctionTool` per tool of a `GovernedSession` (governed), a
  `ToolProvider` or a list of declared tools (not governed), with the tool's JSON Schema as
  `params_json_schema`. With `strict=True` each schema is converted to the SDK's strict form on a
  copy (`ensure_strict_json_schema`); a schema that cannot be made strict stays non-strict (logged
  at INFO), as the SDK does for MCP tools. Under a strict schema the model sends `null` for a
  property the tool marked optional: those are dropped before the call.
- Results: text stays text; images become `ToolOutputImage` (a data URL) beside
  `ToolOutputText`; audio becomes its placeholder text; structured content is compact JSON.
- Failures: under a session, a refusal or failure raises `GovernedRunError` (a `PolicyError`
  and an `AgentsException`: the runtime's code and generic message), which the `Runner` lets end
  the run: the model never sees it. Not governed, a tool failure is returned to the model as
  text (the SDK's convention for errors the model may act on), the text an ungoverned toolbridge
  `Agent` shows. Arguments that are not a JSON object are answered the same way, and never sent.
  Cancellation passes through.
- Hostile arguments: a tool never parses arguments past 64 levels (`MAX_ARGUMENT_DEPTH`, a
  scan before the parse). Under a session the call is refused and recorded (`not_started`,
  `INVALID_INPUT`, the tool's name) and `GovernedRunError` `INVALID_INPUT` ends the run; not
  governed, the model is told and the tool is not called. Limit: the SDK (0.24) parses every
  tool call's arguments itself before any tool or hook sees them, and raises `RecursionError`
  out of `Runner.run` past about 1,000 levels; toolbridge cannot intercept that. Leaving the
  session's `async with` by it ends the session `failed` (`MODEL_FAILED` under `run_hooks`, else
  `ABORTED`), with no call recorded.
- `run_hooks(session)`: `RunHooks` that govern every model call of the run through the session
  (`model:<id>` grant, `max_model_calls`, `max_context_bytes`, the budget at `prices`). `<id>` is
  the agent's model name when it is a string (e.g. `gpt-4o`), else `model_id=`.

Needs the `openai-agents` extra (`pip install "toolbridge[openai-agents]"`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from .._extras import missing

try:
    from agents import FunctionTool, RunHooks, ToolOutputImage, ToolOutputText, set_tracing_disabled
    from agents.exceptions import AgentsException
    from agents.strict_schema import ensure_strict_json_schema
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise missing("openai-agents", exc.name or "agents", "toolbridge.integrations.openai_agents") from None

from .._bounded import MAX_ARGUMENT_DEPTH, InputLimitError, loads_json
from .._json import JsonObject
from ..agent import ModelPrices
from ..content import ImagePart, TextPart, media_placeholder
from ..errors import ConfigError, PolicyError, bounded
from ..runtime import GovernedSession
from ..tools import ToolResult, ToolSpec
from ._core import (
    SourceLike,
    ToolSource,
    as_source,
    classify,
    copy_schema,
    log,
    model_parts,
    refuse_deep,
    usable,
)

if TYPE_CHECKING:
    from agents import Agent, ModelResponse, RunContextWrapper, TResponseInputItem

TContext = TypeVar("TContext")

__all__ = ["GovernedRunError", "GovernedRunHooks", "as_tools", "run_hooks"]


class GovernedRunError(PolicyError, AgentsException):
    """A governed refusal or failure (of a tool call or, with `run_hooks`, a model call), raised
    out of `Runner.run` with the runtime's code and generic message. It is a `PolicyError`
    (`.code`, `.outcome`) and an Agents SDK `AgentsException`, which the `Runner` re-raises as is."""

    def __init__(self, error: PolicyError):
        PolicyError.__init__(self, error.message, code=error.code, outcome=error.outcome)
        self.run_data = None


def _to_agents(result: ToolResult) -> str | list[ToolOutputText | ToolOutputImage]:
    parts = model_parts(result)
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    out: list[ToolOutputText | ToolOutputImage] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append(ToolOutputText(text=part.text))
        elif isinstance(part, ImagePart):
            out.append(ToolOutputImage(image_url=f"data:{part.media_type};base64,{part.data}"))
        else:
            out.append(ToolOutputText(text=media_placeholder(part)))
    return out


class _TooDeep(Exception):
    """Arguments nesting deeper than `MAX_ARGUMENT_DEPTH`."""


def _arguments(text: str | None) -> object:
    """A tool call's arguments from their JSON text (`None` when not JSON).

    Raises:
        _TooDeep: nesting deeper than `MAX_ARGUMENT_DEPTH` (found by a scan, never a parse).
    """
    if not text:
        return {}
    try:
        return loads_json(text, max_depth=MAX_ARGUMENT_DEPTH)
    except InputLimitError as exc:
        if exc.reason == "too_deep":
            raise _TooDeep from None
        return None


def _tool(source: ToolSource, spec: ToolSpec, parameters: JsonObject, strict: bool) -> FunctionTool:
    name = spec.name
    properties, required = parameters.get("properties", {}), parameters.get("required", [])
    optional = set(properties if isinstance(properties, dict) else ()) - set(
        required if isinstance(required, list) else ()
    )  # both checked by `usable` before this runs
    schema: JsonObject = parameters
    is_strict = False
    if strict:
        try:
            schema = ensure_strict_json_schema(copy_schema(parameters))
            is_strict = True
        except Exception as exc:
            log.info("openai_agents.as_tools: tool %r stays non-strict: %s", name, bounded(str(exc), 200))
            schema = parameters

    async def invoke(
        ctx: ToolContext[object] | None, input_json: str
    ) -> str | list[ToolOutputText | ToolOutputImage]:
        try:
            args = _arguments(input_json)
        except _TooDeep:
            if source.session is not None:
                call_id = ctx.tool_call_id if isinstance(ctx, ToolContext) else None
                raise GovernedRunError(await refuse_deep(source.session, name, call_id)) from None
            return (
                f"Error: the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; the tool was not called."
            )
        if not isinstance(args, dict):
            return "Error: the arguments are not a JSON object; the tool was not called."
        if is_strict:
            args = {k: v for k, v in args.items() if not (v is None and k in optional)}
        try:
            result = await source.call_tool(name, args)
        except Exception as exc:
            failure = classify(exc)
            if failure.kind == "stop":
                assert isinstance(failure.error, PolicyError)
                raise GovernedRunError(failure.error) from None
            return failure.text
        return _to_agents(result)

    return FunctionTool(
        name=name,
        description=spec.description or "",
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=is_strict,
    )


async def as_tools(
    source: SourceLike, *, strict: bool = False, sdk_tracing: bool = False
) -> list[FunctionTool]:
    """Agents SDK `FunctionTool`s for `source` (a `GovernedSession`, a `ToolProvider`, or
    declared tools).

    Lists the tools now (enter the session first). A tool whose name or schema cannot be taken
    is left out, with one warning on the `toolbridge.integrations` logger.

    Args:
        source: only a `GovernedSession` is governed.
        strict: convert each schema to the SDK's strict form (on a copy) where it can be.
        sdk_tracing: leave the Agents SDK's own tracing as it is. By default it is switched off
            for the process (`agents.set_tracing_disabled(True)`): with `OPENAI_API_KEY` set, the
            SDK exports every tool call's input and output to OpenAI's trace store.

    Raises:
        ConfigError: `ERR_CONFIG` for a `source` of another kind.
        PolicyError: governed, when the session cannot list its tools (it has ended).
    """
    tool_source = as_source(source, "openai_agents.as_tools")
    if not sdk_tracing:
        set_tracing_disabled(True)
    specs = await tool_source.list_tools()
    return usable(
        specs, "openai_agents.as_tools", lambda spec, params: _tool(tool_source, spec, params, strict)
    )


@runtime_checkable
class _NamedModel(Protocol):
    """An Agents SDK model object that names its model (`OpenAIResponsesModel.model`, ...)."""

    @property
    def model(self) -> object: ...


class GovernedRunHooks(RunHooks[TContext], Generic[TContext]):
    """Run hooks that govern every model call of a run through a session. Use `run_hooks()`.

    Generic in the run's context type, as the SDK's `RunHooks` is (the hooks never read it)."""

    def __init__(
        self, session: GovernedSession, *, model_id: str | None = None, prices: ModelPrices | None = None
    ):
        self.session = session
        self.model_id = model_id
        self.prices = prices

    def _model_id(self, agent: Agent[TContext]) -> str:
        if self.model_id:
            return self.model_id
        model = agent.model
        if isinstance(model, str) and model:
            return model
        name = model.model if isinstance(model, _NamedModel) else None
        if isinstance(name, str) and name:
            return name
        return type(model).__name__ if model is not None else "unknown"

    async def on_llm_start(
        self,
        context: RunContextWrapper[TContext],
        agent: Agent[TContext],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        size = len(system_prompt or "") + len(json.dumps(input_items, default=str))
        try:
            await self.session.before_model_call(
                self._model_id(agent),
                context_bytes=size,
                max_output_tokens=agent.model_settings.max_tokens,
                prices=self.prices,
            )
        except PolicyError as exc:
            raise GovernedRunError(exc) from None

    async def on_llm_end(
        self, context: RunContextWrapper[TContext], agent: Agent[TContext], response: ModelResponse
    ) -> None:
        usage = response.usage
        calls = sum(1 for item in response.output if item.type == "function_call")
        try:
            await self.session.after_model_call(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, tool_calls=calls
            )
        except PolicyError as exc:
            raise GovernedRunError(exc) from None


def run_hooks(
    session: GovernedSession, *, model_id: str | None = None, prices: ModelPrices | None = None
) -> GovernedRunHooks[Any]:
    """`RunHooks` governing every model call of a run through `session` (`Runner.run(..., hooks=)`).

    For a run of any context type (`Any`: the SDK's `RunHooks` is invariant in it).

    Args:
        session: the `GovernedSession` (entered).
        model_id: the id for the `model:<id>` grant (default: the agent's model name).
        prices: the model's `ModelPrices`, for the budget (default: the model costs nothing).

    Raises:
        ConfigError: `ERR_CONFIG` when `session` is not a `GovernedSession`.
    """
    if not isinstance(session, GovernedSession):
        raise ConfigError("openai_agents.run_hooks: session must be a GovernedSession", code="ERR_CONFIG")
    return GovernedRunHooks(session, model_id=model_id, prices=prices)
