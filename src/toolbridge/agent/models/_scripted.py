"""`ScriptedModel` and `FunctionModel`: deterministic models for examples, tests and offline demos.

`ScriptedModel` plays a fixed list of turns and records every request it received, so a test
can assert on exactly what "the model" saw (tool specs, tool results, images). It never
improvises: when the script runs out it fails with `ERR_MODEL_SCRIPT_EXHAUSTED`.

`FunctionModel` lets a Python function decide each turn, from the messages and the request.

Both cost nothing (`prices` is `None`), and report one request and zero tokens per turn
unless a turn says otherwise.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import SupportsIndex, SupportsInt

from ...errors import ConfigError, ModelError
from ._base import (
    Message,
    ModelBase,
    ModelPrices,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    normalize_finish_reason,
)

__all__ = ["FunctionModel", "ScriptedModel", "response_from"]


def _mapping(value: object) -> Mapping[object, object] | None:
    """`value` when it is a mapping, else None (a plain dict, the common form, skips the ABC check)."""
    return value if type(value) is dict or isinstance(value, Mapping) else None


def _tool_calls_from(value: object, where: str) -> tuple[ToolCall, ...]:
    # Plain lists and dicts (the common forms) skip the ABC `isinstance` checks.
    if not (type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str | bytes))):
        raise ConfigError(f"{where}: tool_calls must be a list", code="ERR_CONFIG")
    calls: list[ToolCall] = []
    for i, raw in enumerate(value):
        if isinstance(raw, ToolCall):
            calls.append(raw)
            continue
        call = _mapping(raw)
        name = call.get("name") if call is not None else None
        if call is None or not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: tool_calls[{i}] needs a non-empty string 'name'", code="ERR_CONFIG")
        args = call.get("arguments", call.get("args", {}))
        arguments = _mapping({} if args is None else args)
        if arguments is None:
            raise ConfigError(f"{where}: tool_calls[{i}].arguments must be an object", code="ERR_CONFIG")
        call_id = call.get("id", "")
        calls.append(
            ToolCall(
                id=str(call_id) if call_id else "",
                name=name,
                arguments={str(k): v for k, v in arguments.items()},
            )
        )
    return tuple(calls)


def response_from(value: object, where: str = "model turn") -> ModelResponse:
    """Build a `ModelResponse` from the simple forms scripts and functions may use.

    Accepted: a `ModelResponse`; a string (text); a list of tool calls; or a mapping with
    optional `text`, `tool_calls` (or `toolCalls`), `finish_reason` and `usage`
    (`{input_tokens, output_tokens}`). Each tool call is a `ToolCall` or a mapping with
    `name`, optional `arguments` and `id`.

    Raises:
        ConfigError: `ERR_CONFIG` when the value has none of these forms.
    """
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, str):
        return ModelResponse(text=value)
    if type(value) is not dict and isinstance(value, Sequence) and not isinstance(value, bytes):
        calls = _tool_calls_from(value, where)
        return ModelResponse(tool_calls=calls, finish_reason="tool-calls")
    turn = _mapping(value)
    if turn is None:
        raise ConfigError(
            f"{where}: expected text, a list of tool calls or a mapping, got {type(value).__name__}",
            code="ERR_CONFIG",
        )
    unknown = set(turn) - {"text", "tool_calls", "toolCalls", "finish_reason", "finishReason", "usage"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown, key=str)}", code="ERR_CONFIG")
    text = turn.get("text", "") or ""
    if not isinstance(text, str):
        raise ConfigError(f"{where}: text must be a string", code="ERR_CONFIG")
    raw_calls = turn.get("tool_calls", turn.get("toolCalls", ()))
    calls = _tool_calls_from(raw_calls or (), where)
    if not text and not calls:
        raise ConfigError(f"{where}: a turn needs 'text' or 'tool_calls'", code="ERR_CONFIG")
    raw_usage = _mapping(turn.get("usage") or {})
    if raw_usage is None:
        raise ConfigError(f"{where}: usage must be an object", code="ERR_CONFIG")
    i_tok = _count(raw_usage.get("input_tokens", 0), where)
    o_tok = _count(raw_usage.get("output_tokens", 0), where)
    usage = Usage(i_tok, o_tok, _count(raw_usage.get("total_tokens", i_tok + o_tok), where), 1)
    finish = turn.get("finish_reason", turn.get("finishReason"))
    return ModelResponse(
        text=text,
        tool_calls=calls,
        usage=usage,
        finish_reason=normalize_finish_reason(
            None if finish is None else str(finish), has_tool_calls=bool(calls)
        ),
    )


def _count(value: object, where: str) -> int:
    """A token count as `int()` reads it (a number, or a string of digits).

    Raises:
        ConfigError: `ERR_CONFIG` for a value `int()` cannot take at all (a list, None, ...).
    """
    if isinstance(value, int):  # the common case, before the protocols' slower checks
        return int(value)
    if isinstance(value, str | bytes | SupportsInt | SupportsIndex):
        return int(value)
    raise ConfigError(f"{where}: usage counts must be numbers, not {type(value).__name__}", code="ERR_CONFIG")


class ScriptedModel(ModelBase):
    """A model that plays a fixed script of turns.

    Each turn is `{"text": "..."}` and/or `{"tool_calls": [{"name": ..., "arguments": {...}}]}`
    (`toolCalls` is accepted too, as manifests spell it), with model-facing tool names. Turns
    are validated when the model is built. Every request received is appended to
    `.requests`, so tests can check what the model saw.

    Args:
        turns: the script.
        supports_images: whether the agent may send it image parts (default True, so tests
            can see images arrive).

    Raises:
        ConfigError: `ERR_CONFIG` when a turn is malformed.
    """

    def __init__(self, turns: Sequence[object], *, supports_images: bool = True) -> None:
        self.id = "scripted"
        self.supports_images = supports_images
        self.prices: ModelPrices | None = None
        if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
            raise ConfigError(
                f"ScriptedModel: turns must be a list, not {type(turns).__name__}", code="ERR_CONFIG"
            )
        self._turns = [response_from(t, f"ScriptedModel turn {i}") for i, t in enumerate(turns)]
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """How many turns are left."""
        return len(self._turns) - len(self.requests)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Record `request` and play the next turn.

        Raises:
            ModelError: `ERR_MODEL_SCRIPT_EXHAUSTED` when every turn has been played.
        """
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._turns):
            raise ModelError(
                f"the script has {len(self._turns)} turns and turn {index + 1} was requested",
                code="ERR_MODEL_SCRIPT_EXHAUSTED",
            )
        return self._turns[index]

    def __repr__(self) -> str:
        return f"ScriptedModel(turns={len(self._turns)}, played={len(self.requests)})"


class FunctionModel(ModelBase):
    """A model whose turns are decided by a Python function.

    The function gets `(messages, request)` and returns (or, if async, resolves to) any form
    `response_from` accepts: a `ModelResponse`, text, a list of tool calls, or a mapping.

    Args:
        fn: the function, sync or async.
        supports_images: whether the agent may send it image parts.
        model_id: the id (default `function`).

    Raises:
        ConfigError: `ERR_CONFIG` when `fn` is not callable.
    """

    def __init__(
        self,
        fn: Callable[[list[Message], ModelRequest], object | Awaitable[object]],
        *,
        supports_images: bool = True,
        model_id: str = "function",
    ) -> None:
        if not callable(fn):
            raise ConfigError("FunctionModel needs a callable", code="ERR_CONFIG")
        self._fn = fn
        self.id = model_id
        self.supports_images = supports_images
        self.prices: ModelPrices | None = None

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the function for this turn.

        Raises:
            ModelError: `ERR_MODEL_BAD_RESPONSE` when the function's answer has no usable form;
                whatever the function itself raises propagates unchanged.
        """
        value = self._fn(list(request.messages), request)
        if inspect.isawaitable(value):
            value = await value
        try:
            return response_from(value, "FunctionModel")
        except ConfigError as exc:
            raise ModelError(exc.message, code="ERR_MODEL_BAD_RESPONSE") from exc

    def __repr__(self) -> str:
        return f"FunctionModel({getattr(self._fn, '__name__', self._fn)!r})"  # a callable may have no name
