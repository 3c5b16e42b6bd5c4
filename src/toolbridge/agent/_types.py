"""The agent's public data: bindings, run results, steps and stream events.

- `ToolBinding` says how one `ToolProvider` is offered to the model: a `prefix` for the
  model-facing names, `include` / `exclude` lists matched against the provider's **bare**
  names, and `effects` / `capabilities` declared for the governed runtime (the agent itself
  only carries them). Plain dicts with the same keys, and bare providers, are accepted too
  (`ToolBinding.coerce`).
- `RunResult` is what `Agent.run` returns; `Step`, `ToolCallRecord` and `ToolResultRecord` record
  each model turn.
- The stream events (`TextDeltaEvent`, `ToolCallStartedEvent`, `ToolCallFinishedEvent`,
  `StepFinishedEvent`, and exactly one terminal `RunFinishedEvent` or `RunErrorEvent`) are what
  `Agent.stream` yields; each has a `type` string for simple matching.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeAlias

from ..calls import EFFECTS, ToolBinding
from ..tools import ToolProvider, ToolResult
from .models._base import Message, NativeSearch, Usage

__all__ = [
    "EFFECTS",
    "AgentEvent",
    "RunErrorEvent",
    "RunFinishedEvent",
    "RunResult",
    "Step",
    "StepFinishedEvent",
    "TextDeltaEvent",
    "ToolBinding",
    "ToolCallFinishedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolResultRecord",
]


BindingLike: TypeAlias = ToolBinding | Mapping[str, object] | ToolProvider
"""One of `Agent`'s tool providers: a `ToolBinding`, a mapping with its fields, or a bare provider."""


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call as the model asked for it.

    Attributes:
        tool_call_id: the call's id (the model's, or `call_<step>_<i>`).
        name: the model-facing tool name.
        arguments: the arguments object.
    """

    tool_call_id: str
    name: str
    arguments: Mapping[str, object]


@dataclass(frozen=True)
class ToolResultRecord:
    """The outcome of one tool call.

    Attributes:
        tool_call_id: the call's id.
        name: the model-facing tool name.
        content: on success the result's content (`ToolResult.content`); on failure the error
            text the model was shown (`Error: ...`).
        error: whether the call failed.
        result: the `ToolResult` on success.
        error_code: the failure's code (`ERR_...`) when it had one.
    """

    tool_call_id: str
    name: str
    content: object
    error: bool = False
    result: ToolResult | None = None
    error_code: str | None = None


@dataclass(frozen=True)
class Step:
    """One model turn and the tool calls it led to.

    Attributes:
        text: the model's text in this turn.
        tool_calls: the calls it asked for, in its order.
        tool_results: their results, in the same order.
        finish_reason: the model's finish reason for this turn.
        usage: tokens of this turn's model call.
        native_searches: the searches the provider ran on its side in this turn (Anthropic's
            tool search: the query, the tools it loaded), so a run shows why a deferred tool
            came into play.
    """

    text: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_results: tuple[ToolResultRecord, ...] = ()
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    native_searches: tuple[NativeSearch, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What one agent run produced.

    Attributes:
        text: the final text (the last model text; or the output if an output hook rewrote it
            to a string).
        usage: summed over every model call of the run.
        finish_reason: `stop`, `length`, `content-filter`, `tool-calls`, `max_steps` or `other`.
        steps: every model turn.
        output: the validated `output_type` object, or the text when there is no output type.
        run_id: the run's id (also in `RunContext.run_id`).
        messages: the whole conversation, for continuing it in a next run.
    """

    text: str
    usage: Usage
    finish_reason: str
    steps: tuple[Step, ...]
    output: object
    run_id: str
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of model text, as it arrives."""

    type: ClassVar[Literal["text-delta"]] = "text-delta"
    step: int
    text: str


@dataclass(frozen=True)
class ToolCallStartedEvent:
    """A tool call is about to run (emitted for every call of a turn before any runs)."""

    type: ClassVar[Literal["tool-call-started"]] = "tool-call-started"
    step: int
    call: ToolCallRecord


@dataclass(frozen=True)
class ToolCallFinishedEvent:
    """A tool call finished (in completion order)."""

    type: ClassVar[Literal["tool-call-finished"]] = "tool-call-finished"
    step: int
    result: ToolResultRecord


@dataclass(frozen=True)
class StepFinishedEvent:
    """A model turn and its tool calls are done."""

    type: ClassVar[Literal["step-finished"]] = "step-finished"
    step: int
    record: Step


@dataclass(frozen=True)
class RunFinishedEvent:
    """Terminal: the run succeeded."""

    type: ClassVar[Literal["run-finished"]] = "run-finished"
    result: RunResult


@dataclass(frozen=True)
class RunErrorEvent:
    """Terminal: the run failed with `error` (its `code` is copied for convenience)."""

    type: ClassVar[Literal["error"]] = "error"
    error: BaseException
    code: str


AgentEvent: TypeAlias = (
    TextDeltaEvent
    | ToolCallStartedEvent
    | ToolCallFinishedEvent
    | StepFinishedEvent
    | RunFinishedEvent
    | RunErrorEvent
)
