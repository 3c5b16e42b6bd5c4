"""`toolbridge run` for targets other than a plain `Ai.Agent` run.

Inputs are the target's own (`inputs:` of a `Telo.Application` target), then `--inputs JSON`
merged over them, then `--input` / `--input-file` as `prompt` (which replaces `messages`).

- `Ai.Text`: the text; with `--json`, `{text, usage, finishReason}`;
- `Ai.TextStream`, `Ai.AgentStream`: the text as it streams (an agent's tool calls on stderr);
  with `--json`, one JSON part per line (`text-delta`, `tool-call`, `tool-result`, then one
  `finish` or `error`);
- `McpClient.ToolsCall`: the result's text; with `--json`, `{content, structuredContent?, isError}`;
- `McpClient.ToolsList`: `name: description` lines; with `--json`, `{tools: [...]}`.

Text from servers and models is shown through `visible_text` (control characters escaped);
`--json` output is exact JSON. Exit 1 when the run fails, a stream ends with an `error` part, or a
tool answers `isError`; exit 3 when an `Ai.AgentStream` run finished but one of its tool calls
failed (as for `Ai.Agent`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING

from .._json import JsonObject, JsonValue
from ..errors import ConfigError
from ..sanitize import visible_text
from ._output import emit, warn

if TYPE_CHECKING:
    from ..manifest import Manifest, SequenceResult, Target
    from ._manifest import _LiveView

__all__ = ["merged_inputs", "run_sequence", "run_target"]


def merged_inputs(target: Target, prompt: str | None, inputs_json: str | None) -> dict[str, object]:
    """The target's inputs, `--inputs` over them, then `--input` as `prompt`.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` when `--inputs` is not a JSON object.
    """
    inputs: dict[str, object] = dict(target.inputs)
    if inputs_json is not None:
        try:
            extra = json.loads(inputs_json)
        except ValueError:
            raise ConfigError("--inputs must be a JSON object", code="ERR_INVALID_INPUT") from None
        if not isinstance(extra, dict):
            raise ConfigError("--inputs must be a JSON object", code="ERR_INVALID_INPUT")
        inputs.update(extra)
    if prompt is not None:
        inputs.pop("messages", None)
        inputs["prompt"] = prompt
    return inputs


def _text_of_content(content: JsonValue) -> str:
    from ..content import parts_from_mcp
    from ..tools import ToolResult

    parts = parts_from_mcp(content) if isinstance(content, list) else None
    if parts is None:
        return json.dumps(content, ensure_ascii=False)
    return ToolResult.of_parts(parts).to_text()


def run_target(
    manifest: Manifest, target: Target, inputs: Mapping[str, object], as_json: bool, view: _LiveView
) -> int:
    """Run one non-agent target (see the module docstring); returns the exit code."""
    streamed = target.kind in ("Ai.TextStream", "Ai.AgentStream")
    try:
        if streamed:
            return asyncio.run(_stream(manifest, target, inputs, as_json, view))
        result = asyncio.run(_invoke(manifest, target, inputs))
    except KeyboardInterrupt:
        warn("toolbridge: interrupted; the run was cancelled and every server shut down")
        return 130
    if as_json:
        emit(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        _print_result(target, result)
    if result.get("isError"):
        warn(f"toolbridge: tool {visible_text(repr(inputs.get('name')))} reported an error")
        return 1
    return 0


def run_sequence(manifest: Manifest, targets: list[Target], as_json: bool, view: _LiveView) -> int:
    """Run the application's targets in order (see `toolbridge.manifest._sequence`).

    Without `--json`, each target is announced on stderr (`target NAME`) and its output printed
    as a run of that target alone prints it; with `--json`, one object `{steps, skipped?,
    failed?}` is printed at the end. Exit 0 when every target ran, 1 when one failed (the
    targets after it do not run), 130 after Ctrl-C.
    """

    def started(target: Target) -> None:
        if not as_json:
            warn(f"target {visible_text(target.name)}")

    def part(target: Target, item: JsonObject) -> None:
        if not as_json:
            _show_part(item, view)

    def finished(target: Target, result: JsonObject | None) -> None:
        if as_json:
            return
        if target.kind in ("Ai.TextStream", "Ai.AgentStream"):
            if result is not None and result.get("text"):
                emit("")
            return
        _print_result(target, result or {})

    async def go() -> SequenceResult:
        async with manifest.open() as live:
            return await live.run_targets(targets, on_start=started, on_part=part, on_result=finished)

    try:
        outcome = asyncio.run(go())
    except KeyboardInterrupt:
        warn("toolbridge: interrupted; the run was cancelled and every server shut down")
        return 130
    if as_json:
        emit(json.dumps(outcome.to_json(), indent=2, ensure_ascii=False))
    if outcome.failed is not None:
        name, code, message = outcome.failed
        if not as_json:
            warn(f"toolbridge: target {visible_text(name)} failed: {visible_text(f'{code}: {message}')}")
        return 1
    return 0


def _show_part(part: JsonObject, view: _LiveView) -> None:
    """A streamed part on the terminal: text as it comes, tool calls in the live view."""
    kind, error, code = part["type"], part.get("error"), part.get("errorCode")
    code = code if isinstance(code, str) else None
    if kind == "text-delta":
        sys.stdout.write(visible_text(str(part["delta"]), multiline=True))
        sys.stdout.flush()
    elif kind == "tool-call":
        view.tool_started(0, str(part["toolCallId"]), str(part["name"]))
    elif kind == "tool-result":
        view.tool_finished(
            0,
            str(part["toolCallId"]),
            str(part["name"]),
            bool(error),
            code if isinstance(code, str) else None,
        )


def _print_result(target: Target, result: Mapping[str, JsonValue]) -> None:
    tools = result.get("tools")
    if isinstance(tools, list) and target.kind == "Mcp.ToolsList":
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            first = str(tool.get("description") or "").strip().splitlines()
            name = visible_text(str(tool["name"]))
            emit(f"{name}: {visible_text(first[0])}" if first else name)
    elif target.kind == "Mcp.ToolsCall":
        emit(
            visible_text(
                _text_of_content(result.get("structuredContent") or result.get("content")), multiline=True
            )
        )
    elif result.get("text"):
        emit(visible_text(str(result["text"]), multiline=True))


async def _invoke(manifest: Manifest, target: Target, inputs: Mapping[str, object]) -> JsonObject:
    async with manifest.open() as live:
        runnable = await live.runnable(target.document)
        return await runnable.invoke(inputs)


async def _stream(
    manifest: Manifest, target: Target, inputs: Mapping[str, object], as_json: bool, view: _LiveView
) -> int:
    failed = False
    wrote_text = False
    tool_failures = 0
    async with manifest.open() as live:
        from ..manifest import AgentRunnable

        runnable = await live.runnable(target.document)
        assert isinstance(runnable, AgentRunnable)  # the runnable of every streamed kind
        async with aclosing(runnable.stream(inputs)) as parts:
            async for part in parts:
                kind = part["type"]
                if as_json:
                    emit(json.dumps(part, ensure_ascii=False))
                else:
                    _show_part(part, view)
                    wrote_text = wrote_text or kind == "text-delta"
                if kind == "tool-result" and part["error"]:
                    tool_failures += 1
                if kind == "error":
                    failed = True
                    if not as_json:
                        failure = f"{part['code']}: {part['message']}"
                        warn(f"toolbridge: run failed: {visible_text(failure)}")
    if wrote_text:
        emit("")
    if failed:
        return 1
    if tool_failures:
        if not as_json:
            warn(f"toolbridge: the run finished, but {tool_failures} tool call(s) failed")
        return 3
    return 0
