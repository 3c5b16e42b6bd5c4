"""`McpToolParser`: task tool JSON in, MCP tools out, everything checked at load time.

This is the Python counterpart of TinyAgent's `McpToolParser` (see `docs/describe.md`):

- `McpToolParser(do_task, placeholder=None)`: `do_task` runs a task; `placeholder` is TinyAgent's
  placeholder function (`key -> text`, `{{key}}` by default), which sets how placeholders are
  written in every tool this parser loads.
- `replace_instruction_param_value(instruction, name, value)` substitutes one argument into an
  instruction's params, filling the `params` object in place, and returns the instruction.
  Values inserted by an earlier call are never read as placeholders again.
- `extract_tool(tool_json)` turns one tool object into an `ExtractedTool`: its name, its MCP
  definition (`config`: title, description, `inputSchema`, `outputSchema` = the task envelope,
  annotations) and `cb`, the callback that runs the task through `do_task` and returns an MCP
  `CallToolResult` as JSON. A `do_task` that raises gives the error envelope (`isError`), as in
  TinyAgent, never an exception out of `cb`.
- `extract_all_tools(tools_json)` does the same for a whole `{"tools": [...]}` file.
- `get_task_output_schema(result_schema)` is the JSON Schema of the task envelope
  `{status, index, instruction?, result?, error?}`.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError, ToolbridgeError, bounded
from ._compat import TaskWarning
from ._parser import TaskTool, compile_tool, compile_tools, task_output_schema
from ._scheduler import ElicitFn, ProgressFn, TaskOutcome, TaskRequest
from ._substitute import DEFAULT_SYNTAX, LEAVE, Syntax, render
from .actions._registry import ActionRegistry, default_registry

__all__ = ["DoTask", "ExtractedTool", "McpToolParser"]


class DoTask(Protocol):
    """What runs a task: `await do_task(request, progress)` gives its outcome."""

    def __call__(
        self, request: TaskRequest, progress: ProgressFn | None = None
    ) -> Awaitable[TaskOutcome]: ...


@dataclass(frozen=True)
class ExtractedTool:
    """A task tool as an MCP tool: what `McpToolParser.extract_tool` gives.

    Attributes:
        name: the tool's name.
        config: the rest of its MCP definition: `description`, `inputSchema`, `outputSchema`
            (the task envelope), and `title`, `annotations`, `_meta` when given.
        cb: `await cb(arguments, progress=None, elicit=None)` runs the task and returns the MCP
            `CallToolResult` as JSON: `content` (the envelope as JSON text, then any images),
            `structuredContent` (the envelope) and `isError`.
        tool: the compiled tool.
    """

    name: str
    config: dict[str, object]
    cb: Callable[..., Awaitable[dict[str, object]]]
    tool: TaskTool

    def definition(self) -> dict[str, object]:
        """The whole MCP `Tool` object as JSON."""
        return {"name": self.name, **self.config}


def _replace(
    syntax: Syntax, instruction: MutableMapping[str, object], name: str, value: Any
) -> MutableMapping[str, object]:
    params = instruction.get("params")
    if params is None:
        return instruction
    if not isinstance(params, MutableMapping):
        raise ConfigError("instruction.params must be an object", code="ERR_TASK_INVALID")

    def resolve(key: str) -> object:
        return value if key == name else LEAVE

    rendered = render(dict(params), resolve, "params", syntax)
    params.clear()
    params.update(rendered)
    catch = instruction.get("catchInstruction")
    if isinstance(catch, MutableMapping):
        _replace(syntax, catch, name, value)
    return instruction


class _ReplaceMethod:
    """`replace_instruction_param_value`, callable on the class (default `{{name}}` syntax) or on
    a parser (its placeholder syntax)."""

    def __get__(
        self, obj: McpToolParser | None, owner: type[McpToolParser]
    ) -> Callable[[MutableMapping[str, object], str, Any], MutableMapping[str, object]]:
        syntax = obj.syntax if obj is not None else DEFAULT_SYNTAX
        return functools.partial(_replace, syntax)


class McpToolParser:
    """Turns JSON task tools into MCP tools whose callback runs the task.

    Args:
        do_task: runs a task: `await do_task(request, progress)` returns a `TaskOutcome`
            (a `TaskScheduler`'s `run` is one). A TinyAgent-style result mapping
            (`{"status": ..., "index": ...}`) is accepted too.
        placeholder: TinyAgent's placeholder function, `key -> text` (default
            `lambda key: "{{" + key + "}}"`); it must write the same text before and after
            every key.
        registry: the actions instructions may use (default: `default_registry()`).
        strict: keys TinyAgent ignores are errors instead of warnings.

    Attributes:
        warnings: what loading ignored so far (`TaskWarning`s), as TinyAgent ignores it.

    Raises:
        ConfigError: `ERR_CONFIG` when `placeholder` is not of that form.
    """

    replace_instruction_param_value = _ReplaceMethod()
    """`(instruction, name, value)`: substitute the argument `name` with `value` in an
    instruction's params (and its `catchInstruction`), filling the `params` object in place.

    The value keeps its type when the param is exactly the placeholder; it is interpolated as
    text otherwise; nested values are visited; an escaped prefix (`\\{{`) is literal; other names
    are left as they are; values inserted by earlier calls are never read again. Returns the same
    instruction; raises `ConfigError` (`ERR_TASK_INVALID`) when its `params` is not an object."""

    def __init__(
        self,
        do_task: DoTask,
        placeholder: Callable[[str], str] | None = None,
        *,
        registry: ActionRegistry | None = None,
        strict: bool = False,
    ) -> None:
        self._do_task = do_task
        self._registry = registry
        self.strict = strict
        self.warnings: list[TaskWarning] = []
        try:
            self.syntax = Syntax.of(placeholder) if placeholder is not None else DEFAULT_SYNTAX
        except ValueError as exc:
            raise ConfigError(f"McpToolParser placeholder: {exc}", code="ERR_CONFIG") from None

    @property
    def registry(self) -> ActionRegistry:
        """The action registry tools are checked against."""
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    def extract_tool(self, tool_json: Mapping[str, object]) -> ExtractedTool:
        """Validate one task tool and turn it into an MCP tool.

        Raises:
            ConfigError: `ERR_TASK_*` naming every problem.
        """
        tool = compile_tool(
            dict(tool_json), self.registry, syntax=self.syntax, strict=self.strict, warnings=self.warnings
        )
        return self._extract(tool)

    def extract_all_tools(self, tools_json: Mapping[str, object]) -> list[ExtractedTool]:
        """Validate a whole `{"tools": [...]}` file and turn each tool into an MCP tool.

        Raises:
            ConfigError: `ERR_TASK_*` naming every problem, in every tool, at once.
        """
        tools = compile_tools(
            tools_json, self.registry, syntax=self.syntax, strict=self.strict, warnings=self.warnings
        )
        return [self._extract(t) for t in tools]

    def get_task_output_schema(self, result_schema: Mapping[str, object] | None = None) -> dict[str, object]:
        """The JSON Schema of the task envelope (`result` described by `result_schema`)."""
        return task_output_schema(result_schema)

    def _extract(self, tool: TaskTool) -> ExtractedTool:
        definition = tool.mcp_definition()
        definition.pop("name")

        async def cb(
            arguments: Mapping[str, object] | None,
            progress: ProgressFn | None = None,
            elicit: ElicitFn | None = None,
        ) -> dict[str, object]:
            outcome = await self.run(tool, arguments, progress, elicit)
            return outcome.to_call_result()

        return ExtractedTool(tool.name, definition, cb, tool)

    async def run(
        self,
        tool: TaskTool,
        arguments: Mapping[str, object] | None,
        progress: ProgressFn | None = None,
        elicit: ElicitFn | None = None,
    ) -> TaskOutcome:
        """Check the arguments, then run the task through `do_task`.

        Problems found before the task starts (invalid arguments, a missing argument that a
        text needs, params that do not fit) give an `error` outcome with index -1; nothing runs.
        A `do_task` that raises gives an `error` outcome too (index -1, its exception's type and
        first line); cancellation is not caught.
        """
        try:
            if arguments is not None and not isinstance(arguments, Mapping):
                raise ConfigError("arguments must be an object", code="ERR_TASK_ARGUMENTS")
            args = tool.prepare_arguments(arguments)
            tool.check_ready(args)
        except ConfigError as exc:
            return TaskOutcome.not_started(exc.message)
        request = TaskRequest(id=uuid.uuid4().hex, tool=tool, arguments=args, elicit=elicit)
        try:
            outcome: Any = await self._do_task(request, progress)
        except ToolbridgeError as exc:
            return TaskOutcome.not_started(exc.message)
        except Exception as exc:
            lines = str(exc).strip().splitlines()
            detail = f": {bounded(lines[0], 300)}" if lines else ""
            return TaskOutcome.not_started(f"the task runner failed: {type(exc).__name__}{detail}")
        if isinstance(outcome, TaskOutcome):
            return outcome
        if isinstance(outcome, Mapping) and outcome.get("status") in (
            "success",
            "error",
            "partial completed",
        ):
            envelope = dict(outcome)
            envelope.setdefault("index", -1)
            return TaskOutcome(envelope)
        return TaskOutcome.not_started(
            f"the task runner returned {type(outcome).__name__}, not a TaskOutcome or a task result"
        )
