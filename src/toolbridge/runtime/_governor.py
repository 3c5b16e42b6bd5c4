"""The `Agent`'s governor: agent hooks that hand every decision to a `GovernedSession`.

`Runtime.run` and `Runtime.stream` open one session per run and give the agent a `Governor`
(an `AgentHooks`, see `toolbridge.calls`). The governor only translates: the agent's
steps become `step.*` events and the `max_steps` check; a model call is measured (context bytes,
remembered per run for the frozen messages and specs: `ContextMeter`) and passed to the session's
`before_model_call` / `after_model_call`; a turn's tool calls go to the session's batch check,
and each call through the session's per-call rules. So an agent run and a session obey one
implementation of the rules.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from .. import telemetry
from ..calls import AgentHooks, PlannedToolCall, RunContext
from ..tools import ToolResult
from ._calls import ms
from ._limits import ContextMeter, model_cost
from ._session import GovernedSession

__all__ = ["Governor"]


class Governor(AgentHooks):
    """The hooks of one governed agent run."""

    def __init__(self, session: GovernedSession) -> None:
        self.session = session
        self.state = session.state
        self._context = ContextMeter()

    def _step(self, ctx: RunContext) -> None:
        step = int(getattr(ctx, "step", 0) or 0)
        if self.state.step == step:
            return
        self.end_step()
        self.state.step = step
        self.state.step_started = time.monotonic()
        self.session._emit("step.started", {"step": step})

    def end_step(self, code: str | None = None) -> None:
        """Emit `step.completed` for the open step, if any."""
        if self.state.step is None:
            return
        data: dict[str, Any] = {"step": self.state.step, "duration_ms": ms(self.state.step_started)}
        if code:
            data["code"] = code
        self.session._emit("step.completed", data)
        self.state.step = None

    async def before_run(self, ctx: RunContext, messages: Sequence[Any]) -> Sequence[Any]:
        ctx.run_id = self.session.run_id  # one id for the agent's result, the events and the journal
        ctx.state["toolbridge.runtime"] = self.session.rt
        telemetry.annotate({"toolbridge.principal": self.session.principal, "toolbridge.run.id": ctx.run_id})
        return messages

    async def before_model_call(self, ctx: RunContext, model: Any, request: Any) -> None:
        self._step(ctx)
        self.state.phase = "model"
        if int(getattr(ctx, "step", 0) or 0) >= self.session.rt.limits.max_steps:
            raise self.session._fail("LIMIT_EXCEEDED", "max_steps")
        options = getattr(request, "options", None) or {}
        self.session._model_started(  # `before_model_call` without its coroutine
            str(getattr(model, "id", "") or ""),
            context_bytes=self._context.measure(request),
            max_output_tokens=options.get("max_tokens") or options.get("max_completion_tokens"),
            prices=getattr(model, "prices", None),
        )

    async def after_model_call(self, ctx: RunContext, model: Any, request: Any, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self.session._model_ended(  # `after_model_call` without its coroutine
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            cost_micros=model_cost(getattr(model, "prices", None), usage),
            tool_calls=len(getattr(response, "tool_calls", ()) or ()),
        )

    def model_failed(self) -> None:
        """Settle a model reservation whose call raised (the full ceiling stays charged)."""
        self.session.on_model_call_error()

    async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        self.state.phase = "tools"
        self._step(ctx)
        await self.session._plan(calls, int(getattr(ctx, "step", 0) or 0))

    def call_tool(
        self, ctx: RunContext, call: PlannedToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> Coroutine[Any, Any, ToolResult]:
        # What the session's `_run` gives, to be awaited by the agent: no layer of our own.
        return self.session._run(call, int(getattr(ctx, "step", 0) or 0), invoke)
