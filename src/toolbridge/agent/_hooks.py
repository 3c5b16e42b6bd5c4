"""The seam between the agent loop and whoever governs it (the runtime, tests, tracing).

The agent calls these hooks at fixed points of a run. `AgentHooks` is a base class whose methods
do nothing; a governor subclasses it and overrides what it needs. The agent guarantees:

- `before_run` runs once, before the first model call, and may rewrite the input messages
  (input guards).
- `before_model_call` runs before every model call (permission `model:<id>`, limits, cost
  reservation); `after_model_call` after it returns (usage, cost settlement).
- `before_tool_calls` runs once per turn with **every** tool call the model asked for, before any
  of them runs (permissions and budget for the whole batch). Calls to unknown tools are in the
  batch too, with `target=None`.
- `call_tool` wraps the execution of one tool call: it receives `invoke`, a function that runs
  the tool and returns its `ToolResult`. A governor may time it out, journal it, guard its
  result, or refuse to call `invoke` at all.
- `after_run` runs once with the final output, and may rewrite it (output guards).

Any `PolicyError` raised by a hook or by a tool ends the run: the agent never turns it into
tool feedback for the model, whatever `on_tool_error` says. Cancellation always propagates.

Details the agent also guarantees:

- Hooks given to `Agent(hooks=...)` and to `run(..., hooks=...)` both apply: the agent's first
  (outermost for `call_tool`), then the run's. `before_run` / `after_run` results chain.
- Calls of the agent's internal final-answer tool (`output_type`) are not tool calls: they are
  in no `before_tool_calls` batch and never reach `call_tool`.
- `call_tool` is called for known tools only; its `invoke()` calls the provider's
  `call_tool(bare_name, args)` or, for a declared tool, `tool.call(args, ctx, call_id)`.

Declared (governed) tools are passed as `Agent(tools=[...])` and must satisfy
`DeclaredToolLike`: an `id`, a `spec` whose `name` is the id, and an async `call(args, ctx,
call_id)`. The model sees the id made model-legal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..tools import ToolResult, ToolSpec

__all__ = ["AgentHooks", "DeclaredToolLike", "PlannedToolCall", "RunContext", "ToolTarget"]


@dataclass
class RunContext:
    """What a hook knows about the run in progress.

    Attributes:
        run_id: unique id of this run.
        agent: the `Agent` being run.
        step: index of the current step (model turn), from 0.
        state: free space for the governor (the agent never reads it).
    """

    run_id: str
    agent: Any
    step: int = 0
    state: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class DeclaredToolLike(Protocol):
    """What `Agent(tools=[...])` accepts: a declared (governed) tool.

    Attributes:
        id: the tool's id; the model sees it made model-legal.
        spec: its `ToolSpec` (`spec.name == id`; `parameters` is the declared input schema).
    """

    @property
    def id(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, args: Mapping[str, Any], ctx: RunContext, call_id: str) -> ToolResult:
        """Run the tool with the model's arguments; raise a `ToolbridgeError` on failure."""
        ...


@dataclass(frozen=True)
class ToolTarget:
    """Where a model-facing tool name leads.

    Attributes:
        model_name: the name the model sees (prefix applied, made model-legal).
        spec: the tool's spec as its source describes it (`spec.name` is the bare name).
        source: the `ToolProvider` or declared tool the call goes to.
        binding: the agent's binding for a provider (`None` for declared tools); carries
            `effects` and `capabilities` declared by the user.
        declared: True when `source` is a declared (governed) tool.
    """

    model_name: str
    spec: ToolSpec
    source: Any
    binding: Any = None
    declared: bool = False


@dataclass(frozen=True)
class PlannedToolCall:
    """One tool call the model asked for.

    Attributes:
        call_id: the model's id for the call (or one the agent made: `call_<step>_<i>`).
        name: the model-facing tool name as the model sent it.
        arguments: the parsed arguments object.
        target: where it goes, or `None` when no tool has that name.
    """

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    target: ToolTarget | None


class AgentHooks:
    """No-op hooks; subclass and override."""

    async def before_run(self, ctx: RunContext, messages: Sequence[Any]) -> Sequence[Any]:
        return messages

    async def before_model_call(self, ctx: RunContext, model: Any, request: Any) -> None:
        return None

    async def after_model_call(self, ctx: RunContext, model: Any, request: Any, response: Any) -> None:
        return None

    async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        return None

    async def call_tool(
        self,
        ctx: RunContext,
        call: PlannedToolCall,
        invoke: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        return await invoke()

    async def after_run(self, ctx: RunContext, output: Any) -> Any:
        return output
