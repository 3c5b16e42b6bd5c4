"""A `Telo.Application`'s targets run in order, as Telo boots an application.

Each target in turn: its `when` (a `!cel` over `steps` and `variables`, when it reads an earlier
target's result) is evaluated and the target is skipped when it is false-y, as Telo reads it
(false, null, 0, NaN or ""; see `telo_truthy`); its `inputs` are
filled in (`!cel` values over the same scope); its document runs; its result is recorded as
`steps.NAME.result` for the targets after it. The first target that fails ends the sequence,
as a failed boot target ends a Telo application: an error raised by the runnable, a stream that
ends with an `error` part, or a `McpClient.ToolsCall` answered with `isError` (Telo's
`ERR_MCP_TOOL_ERROR`). A streamed target's recorded result is its `finish` part without `type`
(`{text, usage, finishReason}`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._json import JsonObject, JsonValue
from ..errors import ToolbridgeError
from ._cel import CelError
from ._cel import evaluate as cel_evaluate
from ._kinds_run import telo_truthy
from ._targets import AgentRunnable, camel_json
from ._yaml import Cel

if TYPE_CHECKING:
    from ._build import LiveManifest
    from ._build_telo import Target

__all__ = ["STREAMED_KINDS", "SequenceResult", "run_targets"]

STREAMED_KINDS = ("Ai.TextStream", "Ai.AgentStream")


@dataclass
class SequenceResult:
    """What a run of the targets gave.

    Attributes:
        steps: `{name: {"result": ...}}` for every target that ran, in order (Telo's `steps`).
        skipped: names of the targets whose `when` was false.
        failed: `(target name, code, message)` of the target that failed, or `None`.
    """

    steps: dict[str, JsonObject] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    failed: tuple[str, str, str] | None = None

    def to_json(self) -> JsonObject:
        """`{steps, skipped?, failed?: {target, errorCode, error}}`."""
        out: JsonObject = {"steps": dict(self.steps)}
        if self.skipped:
            out["skipped"] = list(self.skipped)
        if self.failed is not None:
            name, code, message = self.failed
            out["failed"] = {"target": name, "errorCode": code, "error": message}
        return out


class _Failed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _fill(value: object, scope: Mapping[str, object]) -> JsonValue:
    if isinstance(value, Cel):
        try:
            return cel_evaluate(value.expr, scope)
        except CelError as exc:
            raise _Failed("ERR_MANIFEST_EXPRESSION", exc.message) from None
    if isinstance(value, Mapping):
        return {k: _fill(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, scope) for v in value]
    return camel_json(value)


def _tool_error_text(result: Mapping[str, JsonValue]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            return " ".join(str(block.get("text", "")).split())[:200]
    return "the tool answered isError"


async def _run_one(
    live: LiveManifest,
    target: Target,
    inputs: Mapping[str, object],
    on_part: Callable[[Target, JsonObject], None] | None,
) -> JsonObject | None:
    runnable = await live.runnable(target.document)
    if target.kind in STREAMED_KINDS:
        assert isinstance(runnable, AgentRunnable)  # the runnable of every streamed kind
        result: JsonObject | None = None
        async with aclosing(runnable.stream(inputs)) as parts:
            async for part in parts:
                if on_part is not None:
                    on_part(target, part)
                if part["type"] == "finish":
                    result = {k: v for k, v in part.items() if k != "type"}
                elif part["type"] == "error":
                    raise _Failed(str(part["code"]), str(part["message"]))
        return result
    result = await runnable.invoke(inputs)
    if target.kind == "Mcp.ToolsCall" and result.get("isError"):
        raise _Failed("ERR_MCP_TOOL_ERROR", f"tool {inputs.get('name')!r}: {_tool_error_text(result)}")
    return result


async def run_targets(
    live: LiveManifest,
    targets: Sequence[Target],
    *,
    on_start: Callable[[Target], None] | None = None,
    on_part: Callable[[Target, JsonObject], None] | None = None,
    on_result: Callable[[Target, JsonObject | None], None] | None = None,
) -> SequenceResult:
    """Run `targets` (`Target`s of `live`'s manifest) in order; see the module docstring.

    Args:
        live: the open manifest (`LiveManifest`).
        targets: the targets, in the application's order.
        on_start: called with each target that is about to run.
        on_part: called with each part of a streamed target, as it arrives.
        on_result: called with each target that ran and its result.
    """
    out = SequenceResult()
    variables = dict(live.manifest.analysis.variables)
    for target in targets:
        scope: dict[str, object] = {"steps": out.steps, "variables": variables}
        try:
            if isinstance(target.when, Cel) and not telo_truthy(_fill(target.when, scope)):
                out.skipped.append(target.name)
                continue
            inputs = _fill(dict(target.inputs), scope)
            assert isinstance(inputs, dict)  # a mapping stays a mapping
            if on_start is not None:
                on_start(target)
            result = await _run_one(live, target, inputs, on_part)
        except _Failed as exc:
            out.failed = (target.name, exc.code, exc.message)
            return out
        except ToolbridgeError as exc:
            out.failed = (target.name, exc.code, exc.message)
            return out
        out.steps[target.name] = {"result": result}
        if on_result is not None:
            on_result(target, result)
    return out
