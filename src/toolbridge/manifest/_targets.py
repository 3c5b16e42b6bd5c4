"""Runnable documents and Telo's `Ai.Tools` entries, in JSON terms.

A runnable (`Ai.Text`, `Ai.TextStream`, `Ai.Agent`, `Ai.AgentStream`, `McpClient.ToolsCall`,
`McpClient.ToolsList`) takes a JSON object of inputs and gives a JSON result; the streamed kinds
also give their result as parts, as Telo streams them:

- `Ai.Text`, `Ai.Agent`: inputs `prompt` or `messages`, `system?`, `options?`; result
  `{text, usage, finishReason}` (an agent adds `steps`);
- `Ai.TextStream`, `Ai.AgentStream`: the same inputs; parts `text-delta {delta}` (an agent also
  `tool-call` and `tool-result`), then one `finish {text, usage, finishReason}` or
  `error {code, message}`;
- `McpClient.ToolsCall`: inputs `name`, `arguments?`; result `{content, structuredContent?, isError}`;
- `McpClient.ToolsList`: no inputs; result `{tools: [{name, description?, inputSchema, …}]}`.

Every key is camelCase (`usage` is `{inputTokens, outputTokens, totalTokens, requests,
cacheReadTokens, cacheWriteTokens}`; an image part is `{type, data, mediaType}`).
`InvocableTools` offers `Ai.Tools` entries to an agent: the model's arguments are validated
against `parameters`, mapped through `inputs` (`!cel` over `arguments`), the runnable runs, and
`result` (`!cel` over `result` and `arguments`) shapes what the model sees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from .._json import JsonObject, JsonValue
from ..errors import ConfigError, ToolbridgeError, ToolError
from ._cel import CelError
from ._cel import evaluate as cel_evaluate
from ._yaml import Cel

if TYPE_CHECKING:
    from ..agent import Agent, AgentHooks, RunResult, Step, ToolResultRecord
    from ..clients import McpClient
    from ..functions import FunctionTools
    from ..tools import ToolResult, ToolSpec

__all__ = [
    "AgentRunnable",
    "InvocableTools",
    "Runnable",
    "ToolsCallRunnable",
    "ToolsListRunnable",
    "camel_json",
    "model_inputs",
    "usage_json",
]

_MODEL_INPUTS = frozenset({"prompt", "messages", "system", "options"})


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Runnable(Protocol):
    """What `make_runnable` builds: a JSON object of inputs in, a JSON object out."""

    async def invoke(self, inputs: Mapping[str, object], hooks: AgentHooks | None = None) -> JsonObject:
        """Run once on `inputs`.

        Raises:
            ConfigError: `ERR_INVALID_INPUT` when the inputs are not the kind's.
            ToolbridgeError: the run's own failure.
        """
        ...


def camel_json(value: object) -> JsonValue:
    """`value` as JSON data with camelCase keys (dataclasses, parts, usage, results); a leaf that
    is not JSON (none is expected) as its `str`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: JsonObject = {}
        kind = getattr(value, "type", None)
        if isinstance(kind, str):
            out["type"] = kind
        for f in dataclasses.fields(value):
            out[_camel(f.name)] = camel_json(getattr(value, f.name))
        return out
    if isinstance(value, Mapping):
        return {str(k): camel_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel_json(v) for v in value]
    if isinstance(value, BaseModel):
        dumped: JsonObject = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def usage_json(usage: object) -> JsonValue:
    """`{inputTokens, outputTokens, totalTokens, requests, cacheReadTokens, cacheWriteTokens}`."""
    return camel_json(usage) if usage is not None else None


def model_inputs(
    what: str, inputs: Mapping[str, object]
) -> tuple[str | list[JsonObject], str | None, JsonObject | None]:
    """`(prompt or messages, system, options)` from a model kind's inputs.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for unknown inputs, both or neither of `prompt` and
            `messages`, or a value of the wrong type.
    """
    unknown = sorted(set(inputs) - _MODEL_INPUTS)
    if unknown:
        raise ConfigError(
            f"{what}: unknown input {unknown[0]!r} (inputs: prompt or messages, system, options)",
            code="ERR_INVALID_INPUT",
        )
    has_prompt, has_messages = "prompt" in inputs, "messages" in inputs
    if has_prompt == has_messages:
        raise ConfigError(
            f"{what}: give exactly one of `prompt` or `messages` (--input gives the prompt)",
            code="ERR_INVALID_INPUT",
        )
    given = inputs["prompt"] if has_prompt else inputs["messages"]
    if has_prompt and not isinstance(given, str):
        raise ConfigError(f"{what}: `prompt` must be a string", code="ERR_INVALID_INPUT")
    if has_messages and not isinstance(given, list):
        raise ConfigError(f"{what}: `messages` must be a list", code="ERR_INVALID_INPUT")
    prompt: str | list[JsonObject]
    if isinstance(given, list):
        prompt = [m for m in given if isinstance(m, dict)]
        if len(prompt) < len(given):
            raise ConfigError(f"{what}: each of `messages` must be an object", code="ERR_INVALID_INPUT")
    else:
        assert isinstance(given, str)
        prompt = given
    system = inputs.get("system")
    if system is not None and not isinstance(system, str):
        raise ConfigError(f"{what}: `system` must be a string", code="ERR_INVALID_INPUT")
    options = inputs.get("options")
    if options is not None and not isinstance(options, dict):
        raise ConfigError(f"{what}: `options` must be an object", code="ERR_INVALID_INPUT")
    return prompt, system, options


def _step_json(step: Step) -> JsonObject:
    return {
        "text": step.text,
        "toolCalls": [
            {"id": c.tool_call_id, "name": c.name, "arguments": camel_json(dict(c.arguments))}
            for c in step.tool_calls
        ],
        "toolResults": [_tool_result_json(r) for r in step.tool_results],
    }


def _tool_result_json(record: ToolResultRecord) -> JsonObject:
    out: JsonObject = {
        "toolCallId": record.tool_call_id,
        "name": record.name,
        "content": camel_json(record.content),
        "error": record.error,
    }
    if record.error_code:
        out["errorCode"] = record.error_code
    return out


class AgentRunnable:
    """An `Agent` (for `Ai.Agent`, `Ai.AgentStream`, and — with no tools, one step —
    `Ai.Text`, `Ai.TextStream`) as a runnable."""

    def __init__(self, agent: Agent, what: str, *, with_steps: bool) -> None:
        self.agent = agent
        self.what = what
        self.with_steps = with_steps

    def result_json(self, result: RunResult) -> JsonObject:
        out: JsonObject = {
            "text": result.text,
            "usage": usage_json(result.usage),
            "finishReason": result.finish_reason,
        }
        if self.with_steps:
            out["steps"] = [_step_json(s) for s in result.steps]
        return out

    async def invoke(self, inputs: Mapping[str, object], hooks: AgentHooks | None = None) -> JsonObject:
        prompt, system, options = model_inputs(self.what, inputs)
        result = await self.agent.run(prompt, system=system, options=options, hooks=hooks)
        return self.result_json(result)

    async def stream(self, inputs: Mapping[str, object]) -> AsyncGenerator[JsonObject, None]:
        """Telo's stream parts; exactly one terminal `finish` or `error` part."""
        from ..agent import (
            RunErrorEvent,
            RunFinishedEvent,
            TextDeltaEvent,
            ToolCallFinishedEvent,
            ToolCallStartedEvent,
        )

        try:
            prompt, system, options = model_inputs(self.what, inputs)
        except ConfigError as exc:
            yield {"type": "error", "code": exc.code, "message": exc.message}
            return
        async with aclosing(self.agent.stream(prompt, system=system, options=options)) as events:
            async for event in events:
                if isinstance(event, TextDeltaEvent):
                    if event.text:
                        yield {"type": "text-delta", "delta": event.text}
                elif isinstance(event, ToolCallStartedEvent):
                    call = event.call
                    yield {
                        "type": "tool-call",
                        "toolCallId": call.tool_call_id,
                        "name": call.name,
                        "arguments": camel_json(dict(call.arguments)),
                    }
                elif isinstance(event, ToolCallFinishedEvent):
                    yield {"type": "tool-result", **_tool_result_json(event.result)}
                elif isinstance(event, RunFinishedEvent):
                    yield {"type": "finish", **self.result_json(event.result)}
                elif isinstance(event, RunErrorEvent):
                    message = event.error.message if isinstance(event.error, ToolbridgeError) else "failed"
                    yield {"type": "error", "code": event.code, "message": message}


def _call_inputs(what: str, inputs: Mapping[str, object]) -> tuple[str, JsonObject]:
    unknown = sorted(set(inputs) - {"name", "arguments"})
    if unknown:
        raise ConfigError(
            f"{what}: unknown input {unknown[0]!r} (inputs: name, arguments)", code="ERR_INVALID_INPUT"
        )
    name = inputs.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{what}: input `name` (the tool's name) is required", code="ERR_INVALID_INPUT")
    arguments = inputs.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ConfigError(f"{what}: `arguments` must be an object", code="ERR_INVALID_INPUT")
    return name, dict(arguments)


class ToolsCallRunnable:
    """`McpClient.ToolsCall`: `{name, arguments}` -> the tool's result in wire form."""

    def __init__(self, client: McpClient, what: str) -> None:
        self.client = client
        self.what = what

    async def invoke(self, inputs: Mapping[str, object], hooks: AgentHooks | None = None) -> JsonObject:
        name, arguments = _call_inputs(self.what, inputs)
        result = await self.client.call_tool(name, arguments)
        out: JsonObject = {"content": camel_json(result.get("content") or [])}
        if result.get("structuredContent") is not None:
            out["structuredContent"] = result["structuredContent"]
        out["isError"] = bool(result.get("isError"))
        return out


class ToolsListRunnable:
    """`McpClient.ToolsList`: -> `{tools}` (every page)."""

    def __init__(self, client: McpClient, what: str) -> None:
        self.client = client
        self.what = what

    async def invoke(self, inputs: Mapping[str, object], hooks: AgentHooks | None = None) -> JsonObject:
        if inputs:
            raise ConfigError(f"{self.what} takes no inputs", code="ERR_INVALID_INPUT")
        tools = await self.client.list_tools()
        return {"tools": [camel_json(t) for t in tools]}


def _fill(value: object, scope: Mapping[str, object], where: str) -> JsonValue:
    """`value` (a manifest's YAML, with `!cel` in it) with every `!cel` evaluated over `scope`.

    Raises:
        ToolError: `ERR_MANIFEST_EXPRESSION` when an expression cannot be evaluated.
    """
    if isinstance(value, Cel):
        try:
            return cel_evaluate(value.expr, scope)
        except CelError as exc:
            raise ToolError(f"{where}: {exc.message}", code="ERR_MANIFEST_EXPRESSION") from None
    if isinstance(value, Mapping):
        return {k: _fill(v, scope, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, scope, where) for v in value]
    return camel_json(value)


def _to_tool_result(value: JsonValue) -> ToolResult:
    from ..content import parts_from_mcp
    from ..tools import ToolResult

    if isinstance(value, str):
        return ToolResult.of_text(value)
    if isinstance(value, list) and value:
        blocks = [
            {**b, "mimeType": b["mediaType"]} if isinstance(b, Mapping) and "mediaType" in b else b
            for b in value
        ]
        parts = parts_from_mcp(blocks)
        if parts is not None:
            return ToolResult.of_parts(parts)
    return ToolResult.of_structured(value)


class InvocableTools:
    """The `tools` entries of an `Ai.Tools` document (plus its `functions`, if any), as a provider.

    Args:
        name: the document's name.
        entries: `(tool name, description, parameters, runnable, inputs, result)` per entry.
        functions: a `FunctionTools` for the document's `functions`, or `None`.
    """

    def __init__(
        self,
        name: str,
        entries: Sequence[tuple[str, str, Mapping[str, JsonValue], Runnable, object, object]],
        functions: FunctionTools | None,
    ) -> None:
        import jsonschema  # type: ignore[import-untyped]

        self.name = name
        self.entries = {e[0]: e for e in entries}
        self.functions = functions
        self._validators = {e[0]: jsonschema.Draft202012Validator(dict(e[2])) for e in entries}

    async def list_tools(self) -> list[ToolSpec]:
        from ..tools import ToolSpec

        specs = list(await self.functions.list_tools()) if self.functions is not None else []
        specs += [
            ToolSpec(name=n, description=d, parameters=dict(p)) for n, d, p, *_ in self.entries.values()
        ]
        return specs

    async def call_tool(self, name: str, args: Mapping[str, JsonValue]) -> ToolResult:
        from ..bridge import McpToolProvider

        entry = self.entries.get(name)
        if entry is None:
            if self.functions is not None:
                return await self.functions.call_tool(name, args)
            raise ToolError(f"Ai.Tools {self.name!r} has no tool {name!r}", code="ERR_TOOL_NOT_FOUND")
        _, _, _, runnable, inputs, result = entry
        problems = sorted(self._validators[name].iter_errors(dict(args)), key=lambda e: list(e.path))
        if problems:
            where = "/".join(str(p) for p in problems[0].path) or "(arguments)"
            raise ToolError(
                f"tool {name!r}: invalid arguments at {where}: {problems[0].message[:200]}",
                code="ERR_INVALID_INPUT",
            )
        arguments = dict(args)
        what = f"Ai.Tools {self.name} tool {name}"
        call_inputs = _fill(inputs, {"arguments": arguments}, what) if inputs is not None else arguments
        if not isinstance(call_inputs, Mapping):
            raise ToolError(f"{what}: `inputs` must give an object", code="ERR_INVALID_INPUT")
        if result is None and isinstance(runnable, ToolsCallRunnable):
            tool, tool_args = _call_inputs(what, call_inputs)
            return await McpToolProvider(runnable.client).call_tool(tool, tool_args)
        try:
            output = await runnable.invoke(call_inputs)
        except ConfigError as exc:
            raise ToolError(f"{what}: {exc.message}", code=exc.code) from None
        if result is not None:
            return _to_tool_result(_fill(result, {"arguments": arguments, "result": output}, what))
        if isinstance(runnable, AgentRunnable):
            return _to_tool_result(output["text"])
        images = output.get("images")
        if isinstance(images, list) and "finishReason" in output:  # Ai.Image: the images as image parts
            parts: list[JsonValue] = [
                {k: i[k] for k in ("type", "data", "mediaType")} for i in images if isinstance(i, dict)
            ]
            return _to_tool_result(parts or f"no image: {output['finishReason']}")
        return _to_tool_result(output)
