"""The agent: a model, the tools it may call, and the loop between them.

- `Agent` runs the loop (`run`, `stream`); `ToolBinding` offers a `ToolProvider` under a prefix
  with include/exclude lists; `RunResult`, `Step`, `ToolCallRecord`, `ToolResultRecord` and
  the stream events describe what happened.
- Models: `Model` (the protocol), `OpenAIModel`, `AnthropicModel`, `GeminiModel`,
  `ScriptedModel`, `FunctionModel`, `model_from_string` (what `Agent("openai:...")` uses), with
  `Usage`, `Message`, `ModelRequest`, `ModelResponse`, `ModelPrices`, `estimate_cost_micros`.
- `ModelSamplingHandler` answers MCP sampling requests with a `Model`.
- The seam for the governed runtime: `AgentHooks`, `RunContext`, `PlannedToolCall`,
  `ToolTarget`, `DeclaredToolLike` (see `toolbridge.calls`).
"""

from .._naming import model_legal
from ..calls import AgentHooks, DeclaredToolLike, PlannedToolCall, RunContext, ToolTarget
from ._agent import FINAL_RESULT_TOOL, MAX_PAUSES, Agent, build_messages, error_feedback, result_to_model
from ._input import message_to_dict
from ._sampling import ModelSamplingHandler
from ._tool_search import ToolSearch
from ._types import (
    AgentEvent,
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
from .models import (
    AnthropicModel,
    FunctionModel,
    GeminiModel,
    Message,
    Model,
    ModelBase,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    NativeBlocks,
    NativeSearch,
    OpenAIModel,
    ScriptedModel,
    TextDelta,
    ToolCall,
    Usage,
    estimate_cost_micros,
    model_from_string,
)

__all__ = [
    "FINAL_RESULT_TOOL",
    "MAX_PAUSES",
    "Agent",
    "AgentEvent",
    "AgentHooks",
    "AnthropicModel",
    "DeclaredToolLike",
    "FunctionModel",
    "GeminiModel",
    "Message",
    "Model",
    "ModelBase",
    "ModelPrices",
    "ModelRequest",
    "ModelResponse",
    "ModelSamplingHandler",
    "NativeBlocks",
    "NativeSearch",
    "OpenAIModel",
    "PlannedToolCall",
    "RunContext",
    "RunErrorEvent",
    "RunFinishedEvent",
    "RunResult",
    "ScriptedModel",
    "Step",
    "StepFinishedEvent",
    "TextDelta",
    "TextDeltaEvent",
    "ToolBinding",
    "ToolCall",
    "ToolCallFinishedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolResultRecord",
    "ToolSearch",
    "ToolTarget",
    "Usage",
    "build_messages",
    "error_feedback",
    "estimate_cost_micros",
    "message_to_dict",
    "model_from_string",
    "model_legal",
    "result_to_model",
]
