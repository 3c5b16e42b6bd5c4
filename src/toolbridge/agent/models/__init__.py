"""Model providers for the agent: the `Model` contract and its implementations.

- `Model` / `ModelBase`: the one-turn contract (`request`, `request_stream`), with
  `ModelRequest`, `ModelResponse`, `Message`, `ToolCall`, `Usage`, `TextDelta`, `ModelPrices`.
- `OpenAIModel`: Chat Completions on the official `openai` SDK (imported only when used).
- `OpenAIImageModel`: OpenAI's images API on the same SDK; `generate` gives `GeneratedImages`.
- `AnthropicModel`: Claude over the Messages API on the official `anthropic` SDK (likewise).
- `GeminiModel`: Gemini on the official `google-genai` SDK (likewise).
- `model_from_string("provider:model")`: the model an `Agent("openai:gpt-4o-mini")` gets.
- `ScriptedModel`, `FunctionModel`: deterministic models for tests, examples and demos.
"""

from ._anthropic import AnthropicModel
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
    NativeBlocks,
    NativeSearch,
    NativeToolSearch,
    Role,
    TextDelta,
    ToolCall,
    Usage,
    estimate_cost_micros,
    message_text,
    normalize_finish_reason,
)
from ._factory import PROVIDER_PREFIXES, model_from_string
from ._gemini import GeminiModel
from ._images import GeneratedImages, OpenAIImageModel, sniff_image_type
from ._openai import OpenAIModel
from ._schema import resolve_local_refs, to_gemini_schema, to_strict_schema
from ._scripted import FunctionModel, ScriptedModel, response_from

__all__ = [
    "FINISH_REASONS",
    "PROVIDER_PREFIXES",
    "AnthropicModel",
    "FinishReason",
    "FunctionModel",
    "GeminiModel",
    "GeneratedImages",
    "Message",
    "Model",
    "ModelBase",
    "ModelPrices",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "NativeBlocks",
    "NativeSearch",
    "NativeToolSearch",
    "OpenAIImageModel",
    "OpenAIModel",
    "Role",
    "ScriptedModel",
    "TextDelta",
    "ToolCall",
    "Usage",
    "estimate_cost_micros",
    "message_text",
    "model_from_string",
    "normalize_finish_reason",
    "resolve_local_refs",
    "response_from",
    "sniff_image_type",
    "to_gemini_schema",
    "to_strict_schema",
]
