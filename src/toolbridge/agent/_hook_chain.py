"""`HookChain`: several `AgentHooks` applied as one (the agent's, then the run's)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..calls import AgentHooks, PlannedToolCall, RunContext
from ..errors import ConfigError
from ..tools import ToolResult
from .models._base import Model, ModelRequest, ModelResponse

__all__ = ["HookChain", "hooks_of"]


class HookChain(AgentHooks):
    """Several `AgentHooks` applied in order (the first is outermost around `call_tool`)."""

    def __init__(self, hooks: Sequence[AgentHooks]) -> None:
        self.hooks = list(hooks)

    async def before_run(self, ctx: RunContext, messages: Sequence[object]) -> Sequence[object]:
        for hook in self.hooks:
            messages = await hook.before_run(ctx, messages)
        return messages

    # With one hook (a governed run), the per-step methods return that hook's own coroutine:
    # no layer of this chain around it, as `call_tool` does.

    def before_model_call(  # type: ignore[override]
        self, ctx: RunContext, model: Model, request: ModelRequest
    ) -> Awaitable[None]:
        if len(self.hooks) == 1:
            return self.hooks[0].before_model_call(ctx, model, request)
        return self._before_model_call(ctx, model, request)

    async def _before_model_call(self, ctx: RunContext, model: Model, request: ModelRequest) -> None:
        for hook in self.hooks:
            await hook.before_model_call(ctx, model, request)

    def after_model_call(  # type: ignore[override]
        self, ctx: RunContext, model: Model, request: ModelRequest, response: ModelResponse
    ) -> Awaitable[None]:
        if len(self.hooks) == 1:
            return self.hooks[0].after_model_call(ctx, model, request, response)
        return self._after_model_call(ctx, model, request, response)

    async def _after_model_call(
        self, ctx: RunContext, model: Model, request: ModelRequest, response: ModelResponse
    ) -> None:
        for hook in self.hooks:
            await hook.after_model_call(ctx, model, request, response)

    def before_tool_calls(  # type: ignore[override]
        self, ctx: RunContext, calls: Sequence[PlannedToolCall]
    ) -> Awaitable[None]:
        if len(self.hooks) == 1:
            return self.hooks[0].before_tool_calls(ctx, calls)
        return self._before_tool_calls(ctx, calls)

    async def _before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        for hook in self.hooks:
            await hook.before_tool_calls(ctx, calls)

    def call_tool(  # type: ignore[override]
        self, ctx: RunContext, call: PlannedToolCall, invoke: Callable[[], Awaitable[ToolResult]]
    ) -> Awaitable[ToolResult]:
        """What to await for the call: with one hook (a governed run), that hook's own
        `call_tool` coroutine, with no layer of this chain around it (a layer is paid again at
        every suspension of the call); with several, the hooks nested in order."""
        if len(self.hooks) == 1:
            return self.hooks[0].call_tool(ctx, call, invoke)
        chained = invoke
        for hook in reversed(self.hooks):
            chained = _wrap(hook, ctx, call, chained)
        return chained()

    async def after_run(self, ctx: RunContext, output: object) -> object:
        for hook in self.hooks:
            output = await hook.after_run(ctx, output)
        return output


def _wrap(
    hook: AgentHooks, ctx: RunContext, call: PlannedToolCall, inner: Callable[[], Awaitable[ToolResult]]
) -> Callable[[], Awaitable[ToolResult]]:
    async def invoke() -> ToolResult:
        return await hook.call_tool(ctx, call, inner)

    return invoke


def hooks_of(value: AgentHooks | Sequence[AgentHooks] | None, where: str) -> list[AgentHooks]:
    if value is None:
        return []
    items: list[object] = list(value) if isinstance(value, list | tuple) else [value]
    hooks: list[AgentHooks] = []
    for item in items:
        if not isinstance(item, AgentHooks):
            raise ConfigError(
                f"{where}: hooks must be AgentHooks instances, got {type(item).__name__}", code="ERR_CONFIG"
            )
        hooks.append(item)
    return hooks
