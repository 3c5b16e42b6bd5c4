"""The `Agent`'s governor: agent hooks that hand every decision to a `GovernedRun`.

`Runtime.run` and `Runtime.stream` open one `GovernedRun` (`_run`, what a `GovernedSession` is
the face of) per run and give the agent a `Governor` (an `AgentHooks`, see `toolbridge.calls`).
The governor only translates: the agent's steps become `step.*` events and the `max_steps`
check; a model call is measured (context bytes, remembered per run for the frozen messages and
specs: `ContextMeter`) and passed to the run rules' `model_started` / `model_ended`; a turn's
tool calls go to the call rules' `plan`, and each call through their `run`. So an agent run and
a session obey one implementation of the rules, reached through the same public methods.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, runtime_checkable

from .. import telemetry
from ..agent.models import ModelBase, ModelPrices, ModelRequest, ModelResponse, Usage
from ..calls import AgentHooks, PlannedToolCall, RunContext
from ..tools import ToolResult
from ._calls import invoker, ms
from ._limits import ContextMeter, model_cost
from ._run import GovernedRun

__all__ = ["Governor"]


def _prices(model: object) -> ModelPrices | None:
    """A model's prices (`Model.prices`, a `ModelPrices` or anything with its `cost_micros`);
    None for a model that states none."""
    if isinstance(model, ModelBase):  # the common case: a class check, not a protocol's (slow on 3.11)
        return model.prices
    return model.prices if isinstance(model, _Priced) else None


def _model_id(model: object) -> str:
    """A model's id (`provider:model`), "" for one that states none."""
    if isinstance(model, ModelBase):  # the common case: a class check, not a protocol's
        return model.id or ""
    return str(model.id or "") if isinstance(model, _Identified) else ""


@runtime_checkable
class _Identified(Protocol):
    """A model with an id (`provider:model`)."""

    id: object


@runtime_checkable
class _Priced(Protocol):
    """A model that states its prices (`Model.prices`)."""

    prices: ModelPrices | None


class Governor(AgentHooks):
    """The hooks of one governed agent run."""

    def __init__(self, run: GovernedRun) -> None:
        self.run = run
        self.core = run.core
        self.state = run.core.state
        self._context = ContextMeter()

    def _step(self, ctx: RunContext) -> None:
        step = ctx.step
        if self.state.step == step:
            return
        self.end_step()
        self.state.step = step
        self.state.step_started = time.monotonic()
        self.core.emit("step.started", {"step": step})

    def end_step(self, code: str | None = None) -> None:
        """Emit `step.completed` for the open step, if any."""
        if self.state.step is None:
            return
        data: dict[str, object] = {"step": self.state.step, "duration_ms": ms(self.state.step_started)}
        if code:
            data["code"] = code
        self.core.emit("step.completed", data)
        self.state.step = None

    async def before_run(self, ctx: RunContext, messages: Sequence[Any]) -> Sequence[Any]:
        ctx.run_id = self.run.run_id  # one id for the agent's result, the events and the journal
        ctx.state["toolbridge.runtime"] = self.core.rt
        telemetry.annotate({"toolbridge.principal": self.core.principal, "toolbridge.run.id": ctx.run_id})
        return messages

    async def before_model_call(self, ctx: RunContext, model: Any, request: Any) -> None:
        self._step(ctx)
        self.state.phase = "model"
        if ctx.step >= self.core.rt.limits.max_steps:
            raise self.core.fail("LIMIT_EXCEEDED", "max_steps")
        # The agent hands a `ModelRequest` (the hooks' floor, `toolbridge.calls`, cannot name it).
        options = request.options if isinstance(request, ModelRequest) else {}
        cap = options.get("max_tokens") or options.get("max_completion_tokens")
        self.run.rules.model_started(
            _model_id(model),
            context_bytes=self._context.measure(request),
            max_output_tokens=cap if isinstance(cap, int) else None,  # anything else: the default
            prices=_prices(model),
        )

    async def after_model_call(self, ctx: RunContext, model: Any, request: Any, response: Any) -> None:
        usage = response.usage if isinstance(response, ModelResponse) else Usage()
        self.run.rules.model_ended(
            input_tokens=int(usage.input_tokens or 0),
            output_tokens=int(usage.output_tokens or 0),
            cost_micros=model_cost(_prices(model), usage),
            tool_calls=len(response.tool_calls) if isinstance(response, ModelResponse) else 0,
        )
        searches = response.native_searches if isinstance(response, ModelResponse) else None
        if searches:  # the provider's own tool search: how many, what it loaded (names, never the query)
            loaded = sorted({name for search in searches for name in search.loaded})
            errors = sorted({search.error for search in searches if search.error})
            data = {"call": self.state.model_calls, "searches": len(searches), "loaded": loaded[:100]}
            self.core.emit("model.tool_search", {**data, "errors": errors} if errors else data)

    def model_failed(self) -> None:
        """Settle a model reservation whose call raised (the full ceiling stays charged)."""
        self.run.rules.model_failed()

    async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        self.state.phase = "tools"
        self._step(ctx)
        await self.run.calls.plan(calls, ctx.step)

    def call_tool(
        self, ctx: RunContext, call: PlannedToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> Coroutine[Any, Any, ToolResult]:
        # The runtime runs the call its own way (`invoker`: a discovered tool's provider takes the
        # rules' deadline, a declared tool is sent by the rules), as a session's call is run; the
        # agent's `invoke` is what it would have done unguarded, left unused here. What the call
        # rules' `run` gives is awaited by the agent: no layer of our own.
        target = call.target
        own = invoker(target, call) if target is not None else None
        return self.run.calls.run(call, ctx.step, own or invoke)
