"""The input of a run: a prompt or message dicts become `Message`s (moved out of `_agent`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..content import AudioPart, ImagePart, Part, TextPart
from ..errors import ConfigError
from .models._base import Message, ToolCall

__all__ = ["build_messages", "message_of"]

_ROLES = frozenset({"system", "user", "assistant", "tool"})


# -- input -------------------------------------------------------------------------------------


def _bad_input(message: str) -> ConfigError:
    return ConfigError(message, code="ERR_INVALID_INPUT")


def _content(value: Any, where: str) -> str | tuple[Part, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(p, TextPart | ImagePart | AudioPart) for p in value):
        return tuple(value)
    raise _bad_input(f"{where}: content must be a string or a list of content parts")


def _tool_calls(value: Any, where: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _bad_input(f"{where}: tool_calls must be a list")
    calls = []
    for i, raw in enumerate(value):
        if isinstance(raw, ToolCall):
            calls.append(raw)
        elif isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
            args = raw.get("arguments") or {}
            if not isinstance(args, Mapping):
                raise _bad_input(f"{where}: tool_calls[{i}].arguments must be an object")
            calls.append(ToolCall(id=str(raw.get("id") or ""), name=raw["name"], arguments=dict(args)))
        else:
            raise _bad_input(f"{where}: tool_calls[{i}] needs a 'name'")
    return tuple(calls)


def _message(value: Any, index: int) -> Message:
    where = f"messages[{index}]"
    if isinstance(value, Message):
        if value.role not in _ROLES:
            raise _bad_input(f"{where}: role must be one of system, user, assistant, tool")
        return value
    if not isinstance(value, Mapping):
        raise _bad_input(f"{where}: expected a message mapping, got {type(value).__name__}")
    unknown = set(value) - {"role", "content", "tool_calls", "tool_call_id", "name"}
    if unknown:
        raise _bad_input(f"{where}: unknown keys {sorted(unknown)}")
    role = value.get("role")
    if role not in _ROLES:
        raise _bad_input(f"{where}: role must be one of system, user, assistant, tool (got {role!r})")
    content = _content(value.get("content", ""), where)
    if role == "tool" and not isinstance(value.get("tool_call_id"), str):
        raise _bad_input(f"{where}: a tool message needs a string tool_call_id")
    if value.get("tool_calls") and role != "assistant":
        raise _bad_input(f"{where}: only assistant messages carry tool_calls")
    return Message(
        role=role,
        content=content,
        tool_calls=_tool_calls(value.get("tool_calls"), where),
        tool_call_id=value.get("tool_call_id"),
        name=value.get("name"),
    )


def build_messages(prompt_or_messages: Any, system: str | None) -> list[Message]:
    """The initial conversation of a run.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for an empty prompt, an empty list, or a malformed
            message (bad role, bad content, missing `tool_call_id`).
    """
    if isinstance(prompt_or_messages, str):
        if not prompt_or_messages.strip():
            raise _bad_input("the prompt is empty")
        messages = [Message("user", prompt_or_messages)]
    elif isinstance(prompt_or_messages, Sequence) and not isinstance(prompt_or_messages, bytes):
        if not prompt_or_messages:
            raise _bad_input("messages is empty")
        messages = [_message(m, i) for i, m in enumerate(prompt_or_messages)]
    else:
        raise _bad_input(
            f"input must be a prompt string or a list of messages, not {type(prompt_or_messages).__name__}"
        )
    if system is not None:
        if messages and messages[0].role == "system":
            messages[0] = Message("system", system)
        else:
            messages.insert(0, Message("system", system))
    return messages


message_of = _message
