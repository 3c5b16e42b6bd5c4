"""The input of a run: a prompt or message dicts become `Message`s (moved out of `_agent`).

`message_to_dict` is the inverse: a JSON-safe dict of a `Message` (content parts as MCP content
blocks, an assistant turn's `native` provider blocks included), so a conversation written out by
one process (`RunResult.messages`) and read back by another continues with all it held (the
blocks of Anthropic's tool search that loaded the tools it called, thinking, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..content import AudioPart, ImagePart, Part, TextPart, part_to_mcp, parts_from_mcp
from ..errors import ConfigError
from .models._base import Message, NativeBlocks, ToolCall

__all__ = ["build_messages", "message_of", "message_to_dict"]

MAX_NATIVE_BLOCKS = 1_000
"""The most provider blocks one message's `native` may hold."""

_ROLES = frozenset({"system", "user", "assistant", "tool"})


# -- input -------------------------------------------------------------------------------------


def _bad_input(message: str) -> ConfigError:
    return ConfigError(message, code="ERR_INVALID_INPUT")


def _content(value: object, where: str) -> str | tuple[Part, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(p, TextPart | ImagePart | AudioPart) for p in value):
        return tuple(value)
    parts = parts_from_mcp(value) if isinstance(value, list) else None  # message_to_dict's form
    if parts is not None:
        return tuple(parts)
    raise _bad_input(f"{where}: content must be a string or a list of content parts")


def _native(value: object, where: str) -> NativeBlocks | None:
    if value is None:
        return None
    provider = value.get("provider") if isinstance(value, Mapping) else None
    blocks = value.get("blocks") if isinstance(value, Mapping) else None
    if (
        not isinstance(provider, str)
        or not 0 < len(provider) <= 64
        or not isinstance(blocks, list)
        or len(blocks) > MAX_NATIVE_BLOCKS
        or not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in blocks)
    ):
        raise _bad_input(
            f"{where}: native must be {{provider, blocks}} with at most {MAX_NATIVE_BLOCKS} blocks, "
            "each an object with a string type"
        )
    return NativeBlocks(provider, tuple(dict(b) for b in blocks))


def message_to_dict(message: Message) -> dict[str, object]:
    """A JSON-safe dict of `message` that `Agent.run` reads back as the same message."""
    out: dict[str, object] = {"role": message.role}
    content = message.content
    out["content"] = content if isinstance(content, str) else [part_to_mcp(p) for p in content]
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.is_error:
        out["is_error"] = True
    if message.native is not None:
        out["native"] = {
            "provider": message.native.provider,
            "blocks": [dict(b) for b in message.native.blocks],
        }
    return out


def _tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
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


def _message(value: object, index: int) -> Message:
    where = f"messages[{index}]"
    if isinstance(value, Message):
        if value.role not in _ROLES:
            raise _bad_input(f"{where}: role must be one of system, user, assistant, tool")
        return value
    if not isinstance(value, Mapping):
        raise _bad_input(f"{where}: expected a message mapping, got {type(value).__name__}")
    unknown = set(value) - {"role", "content", "tool_calls", "tool_call_id", "name", "is_error", "native"}
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
    if value.get("native") is not None and role != "assistant":
        raise _bad_input(f"{where}: only assistant messages carry native blocks")
    if not isinstance(value.get("is_error", False), bool):
        raise _bad_input(f"{where}: is_error must be true or false")
    return Message(
        role=role,
        content=content,
        tool_calls=_tool_calls(value.get("tool_calls"), where),
        tool_call_id=value.get("tool_call_id"),
        name=value.get("name"),
        is_error=value.get("is_error", False),
        native=_native(value.get("native"), where),
    )


def build_messages(prompt_or_messages: object, system: str | None) -> list[Message]:
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
