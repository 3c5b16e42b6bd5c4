"""The call types shared by the agent, the runtime, the gateway and the adapters: how a tool
provider is offered (`ToolBinding`), what a tool call is aimed at (`ToolTarget`) and planned as
(`PlannedToolCall`), and the seam between the agent loop and whoever governs it (`AgentHooks`,
`RunContext`). They sit on the floor of the package, below `agent` and `runtime`, and know
nothing of either.

The seam between the agent loop and whoever governs it (the runtime, tests, tracing):

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

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import ConfigError
from .tools import ToolProvider, ToolResult, ToolSpec

__all__ = [
    "EFFECTS",
    "AgentHooks",
    "DeclaredToolLike",
    "PlannedToolCall",
    "RunContext",
    "ToolBinding",
    "ToolTarget",
]

EFFECTS: frozenset[str] = frozenset({"none", "read", "write", "host"})
_BINDING_KEYS = frozenset(
    {"provider", "prefix", "include", "exclude", "effects", "capabilities", "cost_micros", "timeout_ms"}
)


def _names(value: object, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"tool binding: {what} must be a list of tool names", code="ERR_CONFIG")
    names = tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"tool binding: {what} must hold non-empty strings", code="ERR_CONFIG")
    return names


@dataclass(frozen=True)
class ToolBinding:
    """How one tool provider is offered to the model.

    Attributes:
        provider: the `ToolProvider`.
        prefix: prepended to each bare name to form the model-facing name.
        include: if given, only these bare names are offered.
        exclude: bare names never offered (applied after `include`).
        effects: `none`, `read`, `write` or `host` for the runtime; `None` = undeclared.
        capabilities: capability names the runtime requires for these tools.
        cost_micros: cost of one call of these tools, for the runtime's budget (`None` = 0).
        timeout_ms: per-call deadline under the runtime (`None` = the runtime's default).

    Raises:
        ConfigError: `ERR_CONFIG` when a field has the wrong type or value.
    """

    provider: ToolProvider
    prefix: str = ""
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    effects: str | None = None
    capabilities: tuple[str, ...] = ()
    cost_micros: int | None = None
    timeout_ms: int | None = None

    def __post_init__(self) -> None:
        provider = self.provider
        if not isinstance(provider, ToolProvider):
            raise ConfigError(
                f"tool binding: {provider!r} is not a ToolProvider (needs list_tools and call_tool)",
                code="ERR_CONFIG",
            )
        if not isinstance(self.prefix, str):
            raise ConfigError("tool binding: prefix must be a string", code="ERR_CONFIG")
        if self.include is not None:
            object.__setattr__(self, "include", _names(self.include, "include"))
        object.__setattr__(self, "exclude", _names(self.exclude, "exclude"))
        object.__setattr__(self, "capabilities", _names(self.capabilities, "capabilities"))
        if self.effects is not None and self.effects not in EFFECTS:
            raise ConfigError(
                f"tool binding: effects must be one of {sorted(EFFECTS)} or None, not {self.effects!r}",
                code="ERR_CONFIG",
            )

        for key, value in (("cost_micros", self.cost_micros), ("timeout_ms", self.timeout_ms)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ConfigError(f"tool binding: {key} must be an integer >= 0 or None", code="ERR_CONFIG")

    def allows(self, bare_name: str) -> bool:
        """Whether the provider's tool `bare_name` is offered."""
        if self.include is not None and bare_name not in self.include:
            return False
        return bare_name not in self.exclude

    @classmethod
    def coerce(cls, value: object) -> ToolBinding:
        """A binding from a `ToolBinding`, a mapping with binding keys, or a bare provider.

        Raises:
            ConfigError: `ERR_CONFIG` for unknown keys, a missing provider or bad values.
        """
        if isinstance(value, ToolBinding):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - _BINDING_KEYS
            if unknown:
                raise ConfigError(f"tool binding: unknown keys {sorted(unknown)}", code="ERR_CONFIG")
            if "provider" not in value:
                raise ConfigError("tool binding: 'provider' is required", code="ERR_CONFIG")
            return cls(
                provider=_as_provider(value["provider"]),
                prefix=value.get("prefix") or "",
                include=value.get("include"),
                exclude=value.get("exclude") or (),
                effects=value.get("effects"),
                capabilities=value.get("capabilities") or (),
                cost_micros=value.get("cost_micros"),
                timeout_ms=value.get("timeout_ms"),
            )
        return cls(provider=_as_provider(value))


def _as_provider(value: object) -> ToolProvider:
    if not isinstance(value, ToolProvider):
        raise ConfigError(
            f"tool binding: {value!r} is not a ToolProvider (needs list_tools and call_tool)",
            code="ERR_CONFIG",
        )
    return value


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
    binding: ToolBinding | None = None
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
