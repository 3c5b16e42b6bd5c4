"""`Agent`: the dispatch loop between a model and its tools.

One engine, two faces. `_engine` is an async generator that performs a whole run and yields
events as they happen; `Agent.stream` hands those events to the caller (ending with exactly one
`RunFinishedEvent` or `RunErrorEvent`), and `Agent.run` drains the same engine and returns the
`RunResult` from its final event, so the two cannot drift apart. The engine never yields while
a task group or cancel scope is open: one turn's tool calls run in a task group inside a
dedicated batch task, which reports each finished call through a memory stream that the engine
reads and yields from; the engine's `finally` cancels and awaits that task. So closing a stream
early (even by just dropping it), or cancelling the task that drives the run, cancels the
in-flight model or tool calls and leaves no task behind. (The batch task is an asyncio task: the
agent runs on asyncio.)

A run:

1. builds the input messages (a prompt string, or message dicts / `Message`s with roles
   `system|user|assistant|tool`), applying the system prompt (the run's wins over the agent's;
   it replaces a leading system message or is prepended);
2. resolves the tool catalog: each binding's provider is listed lazily on first use and again
   only when its `generation` changed (checked before every model turn); declared tools and
   the final-answer tool are added;
   model-facing names are `prefix + bare name` made model-legal. Names that collide inside
   one binding's listing (`echo ` and `echo\u200b` both become `echo_`; a name listed twice),
   or that take a declared tool's name or the final-answer tool's, leave those listed tools
   out (all of them; logged once) and keep the rest: a server cannot stop runs by what it
   lists. Two configured sources offering the same name (two bindings, two declared tools)
   are an `ERR_AGENT_TOOL_COLLISION` naming both;
3. loops at most `max_steps` model turns: a turn without tool calls ends the run; otherwise the
   calls (ids made up as `call_<step>_<i>` when missing) go to `before_tool_calls` together,
   then run concurrently (at most `max_parallel_tools` at a time), and their results go back to
   the model in the model's order.

Tool failures: with `on_tool_error="feedback"` a failing or unknown tool becomes an error tool
result (`Error: ...`) that the model sees; with `"throw"` the run ends with the error
(`ERR_AGENT_UNKNOWN_TOOL` for an unknown name). Sibling calls of the same turn are not cancelled
by one failure: they finish, then the first failure in the model's order is raised. A
`PolicyError` always ends the run; cancellation always propagates.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import BaseModel, ValidationError

from .. import telemetry
from .._owned_tasks import stop_task
from ..calls import AgentHooks, DeclaredToolLike, PlannedToolCall, RunContext, ToolTarget
from ..catalog import FINAL_RESULT_TOOL, ToolCatalog, check_declared
from ..content import AudioPart, ImagePart, Part, TextPart, media_placeholder
from ..errors import AgentError, ConfigError, ModelError, PolicyError, ToolbridgeError, ToolError
from ..tools import ToolResult
from ._hook_chain import HookChain, hooks_of
from ._input import build_messages as build_messages
from ._input import message_of as _message
from ._tool_search import ToolSearch, tool_search_of
from ._types import (
    AgentEvent,
    BindingLike,
    RunErrorEvent,
    RunFinishedEvent,
    RunResult,
    Step,
    StepFinishedEvent,
    TextDeltaEvent,
    ToolBinding,
    ToolCallFinishedEvent,
    ToolCallRecord,
    ToolCallStartedEvent,
    ToolResultRecord,
)
from .models._base import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    TextDelta,
    ToolCall,
    Usage,
    media_support,
    stream_of,
    takes_requests,
)
from .models._factory import model_from_string

__all__ = ["FINAL_RESULT_TOOL", "MAX_PAUSES", "Agent"]

MAX_PAUSES = 3
"""The most times in a row a provider may pause one turn (`finish_reason` `paused`: Anthropic's
`pause_turn`); each continuation is a model call and a step (`max_steps`, the runtime's limits
and budget count it), and one more ends the run with `ERR_AGENT_MAX_PAUSES`."""


# -- results to the model ----------------------------------------------------------------------


def result_to_model(
    result: ToolResult, supports_images: bool, supports_audio: bool = False
) -> tuple[Part, ...]:
    """The content parts a model is shown for a tool result.

    Text stays text; images stay images when the model supports them (else a placeholder
    naming media type and size); audio likewise with `supports_audio`; structured content and
    raw arrays become compact JSON text, and media returned beside structured content follow it
    as media parts (by the same rules).
    """
    if result.kind == "raw" or (result.kind == "structured" and not result.media):
        return (TextPart(result.to_text()),)  # structured content or a raw array: compact JSON
    parts: list[Part] = []
    if result.kind == "structured":
        parts.append(TextPart(result.structured_text()))
    for part in result.parts if result.kind == "parts" else result.media:
        if (isinstance(part, ImagePart) and supports_images) or (
            isinstance(part, AudioPart) and supports_audio
        ):
            parts.append(part)
        elif isinstance(part, ImagePart | AudioPart):
            parts.append(TextPart(media_placeholder(part)))
        else:
            parts.append(part)
    return tuple(parts)


def _tool_message(record: ToolResultRecord, supports_images: bool, supports_audio: bool = False) -> Message:
    """The `tool` message that gives the model one call's result (a failure as its text)."""
    if record.error or record.result is None:
        content: tuple[Part, ...] = (TextPart(str(record.content)),)
    else:
        content = result_to_model(record.result, supports_images, supports_audio)
    return Message("tool", content, tool_call_id=record.tool_call_id, name=record.name, is_error=record.error)


def error_feedback(exc: BaseException) -> str:
    """The text a model is shown for a failed tool call: `Error: <message>` (+ server text)."""
    if isinstance(exc, ToolbridgeError):
        text = exc.message
        server_text = exc.server_text if isinstance(exc, ToolError) else None
        if server_text and server_text not in text:
            text = f"{text}\n{server_text}"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"Error: {text}"


def _with_ids(step: int, calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls with an id each: the model's, or `call_<step>_<i>` when missing or repeated."""
    seen: set[str] = set()
    out: list[ToolCall] = []
    for i, call in enumerate(calls):
        call_id = call.id if call.id and call.id not in seen else f"call_{step}_{i}"
        seen.add(call_id)
        out.append(ToolCall(id=call_id, name=call.name, arguments=dict(call.arguments or {})))
    return tuple(out)


# -- the agent ---------------------------------------------------------------------------------


class Agent:
    """A model, the tools it may call, and the loop that runs them.

    Args:
        model: a `Model` (`OpenAIModel`, `AnthropicModel`, `GeminiModel`, `ScriptedModel`, ...),
            or a `"provider:model"` string (`"openai:gpt-4o-mini"`; see `model_from_string`).
        tool_providers: bindings: `ToolBinding`s, dicts with the same keys, or bare providers.
        system: default system prompt (a run's `system=` wins).
        max_steps: maximum number of model turns per run (>= 1).
        on_max_steps: `"throw"` (`ERR_AGENT_MAX_STEPS`) or `"return"` (last text,
            `finish_reason="max_steps"`).
        on_tool_error: `"feedback"` (errors become tool results the model sees) or `"throw"`.
        max_parallel_tools: at most this many tool calls of one turn run at once.
        options: model options, shallow-merged under a run's `options=`.
        tools: declared (governed) tools (`DeclaredToolLike`).
        output_type: a pydantic model: the run must end with a validated structured answer
            given through the `final_result` tool.
        output_retries: how many invalid or missing final answers are fed back before
            `ERR_AGENT_OUTPUT_INVALID`.
        hooks: `AgentHooks` (or a list) applied to every run.
        name: a label for logs and the runtime.
        tool_search: past a number of tools, the model is shown `find_tools` / `use_tools` and
            the tools it asked for instead of all (`ToolSearch`, a threshold, or True; see
            docs/discovery.md). With a model that has a search of its own (`AnthropicModel`)
            and `ToolSearch.native` set (the default `bm25`, or `regex`), the provider's search
            is used instead: every tool is sent deferred, the search loads what the model looks
            for in the same turn (`Step.native_searches` says what), and a turn the provider
            pauses goes back to it as it came (at most `MAX_PAUSES` times in a row).

    Raises:
        ConfigError: `ERR_CONFIG` for invalid settings or bindings.
    """

    def __init__(
        self,
        model: Model | str,
        tool_providers: Sequence[BindingLike] | BindingLike = (),
        *,
        system: str | None = None,
        max_steps: int = 8,
        on_max_steps: str = "throw",
        on_tool_error: str = "feedback",
        max_parallel_tools: int = 8,
        options: Mapping[str, object] | None = None,
        tools: Sequence[DeclaredToolLike] = (),
        output_type: type[BaseModel] | None = None,
        output_retries: int = 2,
        hooks: AgentHooks | Sequence[AgentHooks] | None = None,
        name: str | None = None,
        tool_search: ToolSearch | int | bool | None = None,
    ) -> None:
        model = model_from_string(model) if isinstance(model, str) else model  # "provider:model"
        if not takes_requests(model):
            raise ConfigError(f"Agent: {model!r} is not a Model (needs id and request())", code="ERR_CONFIG")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ConfigError("Agent: max_steps must be an integer >= 1", code="ERR_CONFIG")
        if on_max_steps not in ("throw", "return"):
            raise ConfigError('Agent: on_max_steps must be "throw" or "return"', code="ERR_CONFIG")
        if on_tool_error not in ("feedback", "throw"):
            raise ConfigError('Agent: on_tool_error must be "feedback" or "throw"', code="ERR_CONFIG")
        if not isinstance(max_parallel_tools, int) or max_parallel_tools < 1:
            raise ConfigError("Agent: max_parallel_tools must be an integer >= 1", code="ERR_CONFIG")
        if output_type is not None and not (
            isinstance(output_type, type) and issubclass(output_type, BaseModel)
        ):
            raise ConfigError("Agent: output_type must be a pydantic BaseModel subclass", code="ERR_CONFIG")
        if output_retries < 0:
            raise ConfigError("Agent: output_retries must be >= 0", code="ERR_CONFIG")
        if isinstance(tool_providers, Mapping) or not isinstance(tool_providers, Sequence):
            tool_providers = [tool_providers]
        self.model: Model = model
        self.bindings: tuple[ToolBinding, ...] = tuple(ToolBinding.coerce(b) for b in tool_providers)
        self.tool_search = tool_search_of(tool_search)  # past its threshold: find/use (`_tool_search`)
        if self.tool_search is not None:
            self.bindings += (self.tool_search.binding,)
        self.tools: tuple[DeclaredToolLike, ...] = check_declared(tools, "Agent")
        self.system = system
        self.max_steps = max_steps
        self.on_max_steps = on_max_steps
        self.on_tool_error = on_tool_error
        self.max_parallel_tools = max_parallel_tools
        self.options: dict[str, object] = dict(options or {})
        self.output_type = output_type
        self.output_retries = output_retries
        self.hooks = hooks_of(hooks, "Agent")
        self.name = name or "agent"
        self._catalog = ToolCatalog(self.bindings, self.tools, final_answer=output_type)

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model.id!r}, bindings={len(self.bindings)})"

    # -- tools -----------------------------------------------------------------------------

    async def resolve_tools(self) -> list[ToolTarget]:
        """List (or reuse the cached list of) every tool the model would see.

        Raises:
            AgentError: `ERR_AGENT_TOOL_COLLISION` when two tools share a model-facing name.
            ToolbridgeError: whatever a provider's `list_tools()` raises.
        """
        return list((await self._catalog.resolve()).targets.values())

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        prompt_or_messages: str | Sequence[Mapping[str, object] | Message],
        *,
        system: str | None = None,
        options: Mapping[str, object] | None = None,
        hooks: AgentHooks | Sequence[AgentHooks] | None = None,
    ) -> RunResult:
        """Run the agent to completion.

        Args:
            prompt_or_messages: a prompt, or a list of messages (dicts with `role`, `content`,
                and for tool messages `tool_call_id`; or `Message`s).
            system: system prompt for this run (wins over the agent's).
            options: model options for this run (override the agent's, key by key).
            hooks: extra `AgentHooks` for this run (applied after the agent's).

        Returns:
            The `RunResult`.

        Raises:
            ConfigError: `ERR_INVALID_INPUT` for malformed input.
            AgentError: `ERR_AGENT_TOOL_COLLISION`, `ERR_AGENT_UNKNOWN_TOOL` (throw mode),
                `ERR_AGENT_MAX_STEPS` (throw mode), `ERR_AGENT_OUTPUT_INVALID`.
            ModelError: when the model fails.
            PolicyError: when a hook (the runtime) stops the run.
            ToolbridgeError: a tool's error in `on_tool_error="throw"` mode.
        """
        result: RunResult | None = None
        async with aclosing(
            self._engine(prompt_or_messages, system, options, hooks, streaming=False)
        ) as events:
            async for event in events:
                if isinstance(event, RunFinishedEvent):
                    result = event.result
        assert result is not None
        return result

    async def stream(
        self,
        prompt_or_messages: str | Sequence[Mapping[str, object] | Message],
        *,
        system: str | None = None,
        options: Mapping[str, object] | None = None,
        hooks: AgentHooks | Sequence[AgentHooks] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the agent, yielding events as they happen.

        Yields `TextDeltaEvent`, `ToolCallStartedEvent`, `ToolCallFinishedEvent` and
        `StepFinishedEvent`, then exactly one terminal event: `RunFinishedEvent` (with the
        `RunResult`) or `RunErrorEvent` (with the error; nothing is raised). Cancellation of
        the consuming task propagates. Use `contextlib.aclosing` to stop early cleanly.

        Args: as `run`.
        """
        try:
            async with aclosing(
                self._engine(prompt_or_messages, system, options, hooks, streaming=True)
            ) as events:
                async for event in events:
                    yield event
        except Exception as exc:
            code = exc.code if isinstance(exc, ToolbridgeError) else type(exc).__name__
            yield RunErrorEvent(error=exc, code=code)

    async def _model_turn(
        self, request: ModelRequest, streaming: bool, chat: telemetry.Span = telemetry.NO_SPAN
    ) -> AsyncGenerator[ModelStreamItem, None]:
        request_stream = stream_of(self.model) if streaming else None
        if request_stream is None:
            with chat.attach():  # the model's own instrumentation (HTTP) nests under `chat`
                response = await self.model.request(request)
            yield response
            return
        async with aclosing(request_stream(request)) as items:
            if not chat.recording:
                async for item in items:
                    yield item
                return
            while True:  # `chat` is current while each item is produced, never across a yield
                with chat.attach():
                    try:
                        item = await items.__anext__()
                    except StopAsyncIteration:
                        return
                yield item

    def _engine(
        self,
        prompt_or_messages: str | Sequence[Mapping[str, object] | Message],
        system: str | None,
        options: Mapping[str, object] | None,
        hooks: AgentHooks | Sequence[AgentHooks] | None,
        *,
        streaming: bool,
    ) -> AsyncGenerator[AgentEvent, None]:
        span = telemetry.start_run(self.name, self.model)
        body = self._run_body(prompt_or_messages, system, options, hooks, streaming=streaming, span=span)
        return body if not span.recording else self._traced(body, span)

    async def _traced(
        self, body: AsyncGenerator[AgentEvent, None], span: telemetry.Span
    ) -> AsyncGenerator[AgentEvent, None]:
        """`body`'s events, and the run's `invoke_agent` span ended with its outcome."""
        result: RunResult | None = None
        try:
            async with aclosing(body) as events:
                async for event in events:
                    if isinstance(event, RunFinishedEvent):
                        result = event.result
                    yield event
        except BaseException as exc:
            telemetry.end_run(span, run_id=None, error=exc)
            raise
        if result is None:
            telemetry.end_run(span, run_id=None)
        else:
            telemetry.end_run(span, run_id=result.run_id, usage=result.usage)

    async def _run_body(
        self,
        prompt_or_messages: str | Sequence[Mapping[str, object] | Message],
        system: str | None,
        options: Mapping[str, object] | None,
        hooks: AgentHooks | Sequence[AgentHooks] | None,
        *,
        streaming: bool,
        span: telemetry.Span,
    ) -> AsyncGenerator[AgentEvent, None]:
        messages = build_messages(prompt_or_messages, system if system is not None else self.system)
        hook = HookChain([*self.hooks, *hooks_of(hooks, "run")])
        ctx = RunContext(run_id=f"run_{uuid.uuid4().hex}", agent=self)
        with span.attach():  # tools/list (when the catalog is not cached) goes under the run
            catalog = await self._catalog.resolve()
        with span.attach():  # the governor records the principal on the run's span
            prepared = await hook.before_run(ctx, list(messages))
        span.set("toolbridge.run.id", ctx.run_id)
        messages = [_message(m, i) for i, m in enumerate(prepared)]
        request_options = {**self.options, **dict(options or {})}
        usage = Usage()
        steps: list[Step] = []
        output_failures = 0
        paused = 0  # continuations of the turn the provider paused (`MAX_PAUSES`)
        last_text = ""
        finish_reason = "stop"
        output: object = None
        done = False
        supports_images, supports_audio = media_support(self.model)

        for step in range(self.max_steps):
            ctx.step = step
            if step:
                current = self._catalog.current()  # what `resolve` gives, without awaiting
                if current is None:
                    with span.attach():
                        current = await self._catalog.resolve()  # a provider's tools changed during the run
                catalog = current
            if self.tool_search is None:
                request = ModelRequest(messages=tuple(messages), tools=catalog.specs, options=request_options)
            else:  # past its threshold: the provider's own search, or find/use (`_tool_search`)
                request = self.tool_search.request(catalog, messages, request_options, self.model)
            chat = telemetry.start_chat(self.model, span, request)
            response: ModelResponse | None = None
            try:
                # A span that records nothing (no SDK configured) is not attached: the same
                # await without a context manager (three Python calls less, at each site).
                if chat.recording:
                    with chat.attach():
                        await hook.before_model_call(ctx, self.model, request)
                else:
                    await hook.before_model_call(ctx, self.model, request)
                if not streaming:  # `run`: one request, no generator around it
                    if chat.recording:
                        with chat.attach():  # the model's own instrumentation (HTTP) nests under `chat`
                            answer = await self.model.request(request)
                    else:
                        answer = await self.model.request(request)
                    if isinstance(answer, ModelResponse):
                        response = answer
                else:
                    async with aclosing(self._model_turn(request, streaming, chat)) as items:
                        async for item in items:
                            if isinstance(item, TextDelta):
                                if item.text:
                                    yield TextDeltaEvent(step=step, text=item.text)
                            elif isinstance(item, ModelResponse):
                                response = item
                if response is None:
                    raise ModelError(
                        f"model {self.model.id!r} ended its turn without a response",
                        code="ERR_MODEL_BAD_RESPONSE",
                    )
                usage = usage + response.usage
                if chat.recording:
                    with chat.attach():  # the governor records the call's cost on `chat`
                        await hook.after_model_call(ctx, self.model, request, response)
                else:
                    await hook.after_model_call(ctx, self.model, request, response)
            except BaseException as exc:
                telemetry.end_chat(chat, self.model, response, exc)
                raise
            telemetry.end_chat(chat, self.model, response)
            last_text = response.text
            finish_reason = response.finish_reason
            paused = paused if finish_reason == "paused" else 0
            calls = _with_ids(step, response.tool_calls)
            messages.append(Message("assistant", response.text, tool_calls=calls, native=response.native))
            # A list, not a generator: one Python call instead of one per item (and one more).
            call_records = tuple([ToolCallRecord(c.id, c.name, c.arguments) for c in calls])

            if not calls:
                steps.append(
                    Step(response.text, (), (), finish_reason, response.usage, response.native_searches)
                )
                if streaming:  # `run` keeps only the RunFinishedEvent: no other event is built for it
                    yield StepFinishedEvent(step=step, record=steps[-1])
                if finish_reason == "paused":  # the provider paused its own tools: the turn goes back as is
                    paused += 1
                    if paused > MAX_PAUSES:
                        raise AgentError(
                            f"the model paused one turn more than {MAX_PAUSES} times",
                            code="ERR_AGENT_MAX_PAUSES",
                        )
                    continue
                if self.output_type is None:
                    output, done = response.text, True
                    break
                output_failures += 1
                if output_failures > self.output_retries:
                    raise AgentError(
                        f"the model did not give a final answer through {FINAL_RESULT_TOOL} "
                        f"after {output_failures} attempts",
                        code="ERR_AGENT_OUTPUT_INVALID",
                    )
                messages.append(
                    Message("user", f"Give your final answer by calling the {FINAL_RESULT_TOOL} tool.")
                )
                continue

            # The final answer, when the run has an output type.
            final_records: dict[str, ToolResultRecord] = {}
            if self.output_type is not None:
                for call in calls:
                    if call.name != FINAL_RESULT_TOOL:
                        continue
                    try:
                        output = self.output_type.model_validate(dict(call.arguments))
                    except ValidationError as exc:
                        output_failures += 1
                        problems = "; ".join(
                            f"{'.'.join(str(p) for p in e.get('loc', ())) or '(answer)'}: {e.get('msg')}"
                            for e in exc.errors(include_url=False)
                        )
                        if output_failures > self.output_retries:
                            raise AgentError(
                                f"the final answer is still invalid after {output_failures} attempts: "
                                f"{problems}",
                                code="ERR_AGENT_OUTPUT_INVALID",
                            ) from None
                        text = (
                            f"Error: the final answer is invalid: {problems}. Call {FINAL_RESULT_TOOL} again."
                        )
                        final_records[call.id] = ToolResultRecord(
                            call.id, call.name, text, error=True, error_code="ERR_AGENT_OUTPUT_INVALID"
                        )
                        continue
                    done = True
                    final_records[call.id] = ToolResultRecord(call.id, call.name, "Final answer received.")
                    break
            if done:
                # Other calls of the final turn are not run; they still get a result so the
                # conversation in `RunResult.messages` stays well-formed for a next run.
                results = tuple(
                    final_records.get(c.id)
                    or ToolResultRecord(c.id, c.name, "Not run: the final answer was given in the same turn.")
                    for c in calls
                )
                messages.extend(_tool_message(res, supports_images, supports_audio) for res in results)
                steps.append(
                    Step(
                        response.text, call_records, results, "stop", response.usage, response.native_searches
                    )
                )
                finish_reason = "stop"
                if streaming:
                    yield StepFinishedEvent(step=step, record=steps[-1])
                break

            planned = [
                PlannedToolCall(
                    call_id=c.id, name=c.name, arguments=c.arguments, target=catalog.targets.get(c.name)
                )
                for c in calls
                if c.id not in final_records
            ]
            if planned:
                if span.recording:
                    with span.attach():  # calls the runtime refuses get their spans under the run
                        await hook.before_tool_calls(ctx, planned)
                else:
                    await hook.before_tool_calls(ctx, planned)
            # The batch runs in its own task (with its own task group), so that this generator
            # can yield each finished call as it happens without holding a cancel scope open
            # across a yield. The `finally` cancels and awaits the batch if the run is cancelled
            # or the stream closed early.
            if not streaming and len(planned) == 1 and not final_records:
                # `run` with one call: nothing to report while it runs, so it runs right here
                # (no batch task). `run` keeps only the RunFinishedEvent, so the step's other
                # events are not built.
                failures: dict[int, BaseException] = {}
                if span.recording:
                    with span.attach():  # no yield inside: the tool span nests under the run
                        only = await self._run_one(ctx, hook, planned[0], 0, failures)
                else:
                    only = await self._run_one(ctx, hook, planned[0], 0, failures)
                if only is None:
                    raise failures[0]
                results = (only,)
                messages.append(_tool_message(only, supports_images, supports_audio))
                steps.append(
                    Step(
                        response.text,
                        call_records,
                        results,
                        finish_reason,
                        response.usage,
                        response.native_searches,
                    )
                )
                continue
            runner, finished = self._start_tools(ctx, hook, planned, span)
            try:
                for record in call_records:
                    yield ToolCallStartedEvent(step=step, call=record)
                for final_record in final_records.values():
                    yield ToolCallFinishedEvent(step=step, result=final_record)
                while True:
                    # Take what is already there without a checkpoint; wait only when nothing is.
                    try:
                        finished_record = finished.receive_nowait()
                    except anyio.WouldBlock:
                        try:
                            finished_record = await finished.receive()
                        except anyio.EndOfStream:
                            break
                    except anyio.EndOfStream:
                        break
                    yield ToolCallFinishedEvent(step=step, result=finished_record)
                by_id = await runner
            finally:
                finished.close()
                await stop_task(runner)
            by_id.update(final_records)
            results = tuple(by_id[c.id] for c in calls)
            messages.extend(_tool_message(res, supports_images, supports_audio) for res in results)
            steps.append(
                Step(
                    response.text,
                    call_records,
                    results,
                    finish_reason,
                    response.usage,
                    response.native_searches,
                )
            )
            if streaming:
                yield StepFinishedEvent(step=step, record=steps[-1])

        if not done:
            if self.on_max_steps == "throw":
                raise AgentError(
                    f"the run reached max_steps={self.max_steps} without a final answer",
                    code="ERR_AGENT_MAX_STEPS",
                )
            finish_reason = "max_steps"
            output = last_text if self.output_type is None else None
        output = await hook.after_run(ctx, output)
        text = output if isinstance(output, str) else last_text
        yield RunFinishedEvent(
            result=RunResult(
                text=text,
                usage=usage,
                finish_reason=finish_reason,
                steps=tuple(steps),
                output=output,
                run_id=ctx.run_id,
                messages=tuple(messages),
            )
        )

    def _start_tools(
        self,
        ctx: RunContext,
        hook: AgentHooks,
        planned: Sequence[PlannedToolCall],
        span: telemetry.Span = telemetry.NO_SPAN,
    ) -> tuple[asyncio.Task[dict[str, ToolResultRecord]], MemoryObjectReceiveStream[ToolResultRecord]]:
        """Start one turn's batch in its own task; finished records arrive on the stream."""
        send, receive = anyio.create_memory_object_stream[ToolResultRecord](max_buffer_size=len(planned) + 1)

        async def batch() -> dict[str, ToolResultRecord]:
            with send, span.attach():  # the batch's own task: tool spans nest under the run
                return await self._run_tools(ctx, hook, planned, send.send_nowait)

        return asyncio.get_running_loop().create_task(batch(), name=f"toolbridge-tools-{ctx.run_id}"), receive

    async def _run_tools(
        self,
        ctx: RunContext,
        hook: AgentHooks,
        planned: Sequence[PlannedToolCall],
        on_finished: Callable[[ToolResultRecord], None],
    ) -> dict[str, ToolResultRecord]:
        records: dict[str, ToolResultRecord] = {}
        failures: dict[int, BaseException] = {}
        # A limiter only when it can make a call wait (acquiring one costs an event-loop
        # iteration per call even when it never blocks).
        limiter = (
            anyio.CapacityLimiter(self.max_parallel_tools) if len(planned) > self.max_parallel_tools else None
        )

        async def one(index: int, call: PlannedToolCall) -> None:
            if limiter is not None:
                async with limiter:
                    record = await self._run_one(ctx, hook, call, index, failures)
            else:
                record = await self._run_one(ctx, hook, call, index, failures)
            if record is not None:
                records[call.call_id] = record
                on_finished(record)

        if len(planned) == 1:
            # One call: run it in this task (already the batch's own task), not in a child.
            # `_run_one` returns rather than raises for every failure but cancellation, which
            # propagates here just as it would through a task group.
            await one(0, planned[0])
        else:
            async with anyio.create_task_group() as tg:
                for index, call in enumerate(planned):
                    tg.start_soon(one, index, call)
        if failures:
            raise failures[min(failures)]
        return records

    async def _run_one(
        self,
        ctx: RunContext,
        hook: AgentHooks,
        call: PlannedToolCall,
        index: int,
        failures: dict[int, BaseException],
    ) -> ToolResultRecord | None:
        target = call.target
        if target is None:
            telemetry.end_tool(
                telemetry.start_tool(call.name, call.call_id),
                error=AgentError("unknown tool", code="ERR_AGENT_UNKNOWN_TOOL"),
            )
            if self.on_tool_error == "throw":
                failures[index] = AgentError(
                    f'the model called an unknown tool "{call.name}"', code="ERR_AGENT_UNKNOWN_TOOL"
                )
                return None
            return ToolResultRecord(
                call.call_id,
                call.name,
                f'Error: no such tool "{call.name}".',
                error=True,
                error_code="ERR_AGENT_UNKNOWN_TOOL",
            )

        async def invoke() -> ToolResult:
            if target.declared:
                return await target.source.call(call.arguments, ctx, call.call_id)  # type: ignore[no-any-return]
            return await target.source.call_tool(target.spec.name, call.arguments)  # type: ignore[no-any-return]

        span = telemetry.start_tool(
            call.name,
            call.call_id,
            tool_type=getattr(target.source, "otel_tool_type", "extension"),
            arguments=call.arguments,
        )
        try:
            if span.recording:
                with span.attach():  # the client's MCP span (and the runtime's record) go under it
                    result = await hook.call_tool(ctx, call, invoke)
            else:
                result = await hook.call_tool(ctx, call, invoke)
            if not isinstance(result, ToolResult):
                raise ToolError(
                    f'tool "{call.name}" returned {type(result).__name__}, not a ToolResult',
                    code="ERR_TOOL_BAD_RESULT",
                )
        except PolicyError as exc:
            telemetry.end_tool(span, error=exc)
            failures[index] = exc
            return None
        except BaseException as exc:
            telemetry.end_tool(span, error=exc)
            if not isinstance(exc, Exception):
                raise
            if self.on_tool_error == "throw":
                failures[index] = exc
                return None
            return ToolResultRecord(
                call.call_id,
                call.name,
                error_feedback(exc),
                error=True,
                error_code=exc.code if isinstance(exc, ToolbridgeError) else None,
            )
        telemetry.end_tool(span, result)
        return ToolResultRecord(call.call_id, call.name, result.content, error=False, result=result)
