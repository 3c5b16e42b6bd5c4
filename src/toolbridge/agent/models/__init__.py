"""Model providers for the agent: the `Model` contract and its implementations.

- `Model` / `ModelBase`: the one-turn contract (`request`, `request_stream`), with
  `ModelRequest`, `ModelResponse`, `Message`, `ToolCall`, `Usage`, `TextDelta`, `ModelPrices`.
- `OpenAIModel`: Chat Completions on the official `openai` SDK (imported only when used).
- `ScriptedModel`, `FunctionModel`: deterministic models for tests, examples and demos.
"""

from ._base import (
    FINISH_REASONS,
    FinishReason,
    Message,
    Model,
    ModelBase,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    ModelStreamItem,
    Role,
    TextDelta,
    ToolCall,
    Usage,
    estimate_cost_micros,
    message_text,
    normalize_finish_reason,
)
from ._openai import OpenAIModel
from ._schema import resolve_local_refs, to_strict_schema
from ._scripted import FunctionModel, ScriptedModel, response_from

__all__ = [
    "FINISH_REASONS",
    "FinishReason",
    "FunctionModel",
    "Message",
    "Model",
    "ModelBase",
    "ModelPrices",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "OpenAIModel",
    "Role",
    "ScriptedModel",
    "TextDelta",
    "ToolCall",
    "Usage",
    "estimate_cost_micros",
    "message_text",
    "normalize_finish_reason",
    "resolve_local_refs",
    "response_from",
    "to_strict_schema",
]
