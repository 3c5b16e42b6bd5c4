"""`FunctionTools`: plain Python functions as tools, beside MCP tools.

Each function becomes one `ToolSpec`:

- **name**: the function's `__name__` (or the name given when registering);
- **description**: the docstring's text before its `Args:` / `Returns:` / `Raises:` sections;
- **parameters**: a JSON Schema built by pydantic from the signature (`create_model` with one
  field per parameter, its type hint, its default, and the description of that parameter taken
  from the Google-style `Args:` section). Extra arguments are forbidden, so a model that invents
  a parameter is told so.

A call validates the arguments with the same pydantic model before the function runs; invalid
arguments raise `ToolError` with code `ERR_TOOL_INVALID_ARGUMENTS` and a message naming each
bad field, which an agent feeds back to the model. Synchronous functions run in a worker thread
(`anyio.to_thread.run_sync`) so they never block the event loop; a cancelled call waits for such
a thread to finish (Python threads cannot be interrupted), while async functions are cancelled
at once.

Return values become a `ToolResult`: `str` → one text part; a `ToolResult` → as-is; a content
part or a list of parts → parts; `None` → no parts; anything else → structured content, made
JSON-safe by pydantic (models, dataclasses, dates...). An exception from the function becomes
`ToolError` `ERR_TOOL_FAILED` (toolbridge errors, including `PolicyError`, pass through
unchanged).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from .content import AudioPart, ImagePart, TextPart
from .errors import ConfigError, ToolbridgeError, ToolError, bounded
from .tools import ToolResult, ToolSpec

__all__ = ["FunctionTool", "FunctionTools", "parse_docstring"]

F = TypeVar("F", bound=Callable[..., Any])

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_JSON_ADAPTER: TypeAdapter[Any] = TypeAdapter(Any)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument descriptions.

    Returns:
        `(description, {argument name: description})`; continuation lines are joined with
        spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header and not line.startswith((" ", "\t")):
            section = header.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1).lstrip("*")
            args[current] = match.group(3).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), args


_LITERAL_KEYWORDS = frozenset({"default", "const", "enum", "examples"})
"""Schema keywords whose values are data, not schemas: kept exactly as they are."""


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _LITERAL_KEYWORDS:
                out[key] = value
            elif key == "properties" and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _is_async(fn: Callable[..., object]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _describe_errors(tool: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error.get("loc", ())) or "(arguments)"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return f'invalid arguments for tool "{tool}": ' + "; ".join(problems)


@dataclass(frozen=True)
class FunctionTool:
    """One registered function with its spec and argument model.

    Attributes:
        spec: the tool as the agent sees it.
        fn: the function.
        arguments_model: the pydantic model that validates the arguments.
        is_async: whether `fn` is awaited (else it runs in a worker thread).
    """

    spec: ToolSpec
    fn: Callable[..., Any]
    arguments_model: type[BaseModel]
    is_async: bool

    @classmethod
    def build(
        cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> FunctionTool:
        """Build the tool for `fn`.

        Raises:
            ConfigError: `ERR_CONFIG` when `fn` is not callable, has no usable name, or takes
                positional-only, `*args` or `**kwargs` parameters.
        """
        if not callable(fn):
            raise ConfigError(f"FunctionTools: {fn!r} is not callable", code="ERR_CONFIG")
        tool_name = name or getattr(fn, "__name__", None)
        if not isinstance(tool_name, str) or not tool_name or tool_name == "<lambda>":
            raise ConfigError(f"FunctionTools: give {fn!r} a name (name=...)", code="ERR_CONFIG")
        summary, arg_docs = parse_docstring(inspect.getdoc(fn))
        signature = inspect.signature(fn)
        try:
            hints = get_type_hints(fn)
        except Exception:  # unresolvable forward references: fall back to raw annotations
            hints = {}
        fields: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ConfigError(
                    f"FunctionTools: {tool_name}: parameter {param.name!r} must be a named parameter "
                    "(no *args, **kwargs or positional-only)",
                    code="ERR_CONFIG",
                )
            annotation = hints.get(param.name, param.annotation)
            if annotation is inspect.Parameter.empty:
                annotation = Any
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
        model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        parameters = _strip_titles(model.model_json_schema())
        parameters.setdefault("properties", {})
        output_schema = None
        returns = hints.get("return")
        if inspect.isclass(returns) and issubclass(returns, BaseModel):
            output_schema = _strip_titles(returns.model_json_schema())
        spec = ToolSpec(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=parameters,
            output_schema=output_schema,
        )
        return cls(spec=spec, fn=fn, arguments_model=model, is_async=_is_async(fn))

    async def call(self, args: Mapping[str, Any]) -> ToolResult:
        """Validate `args`, run the function, convert its return value.

        Raises:
            ToolError: `ERR_TOOL_INVALID_ARGUMENTS` for invalid arguments, `ERR_TOOL_FAILED`
                when the function raises, `ERR_TOOL_BAD_RESULT` when its value is not JSON-able.
            ToolbridgeError: any toolbridge error the function raises, unchanged.
        """
        if not isinstance(args, Mapping):
            raise ToolError(
                f'invalid arguments for tool "{self.spec.name}": expected an object',
                code="ERR_TOOL_INVALID_ARGUMENTS",
            )
        try:
            validated = self.arguments_model.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolError(
                _describe_errors(self.spec.name, exc), code="ERR_TOOL_INVALID_ARGUMENTS"
            ) from None
        kwargs = dict(validated)  # its fields, as model objects (extra fields are forbidden)
        try:
            if self.is_async:
                value = await self.fn(**kwargs)
            else:
                value = await anyio.to_thread.run_sync(functools.partial(self.fn, **kwargs))
        except ToolbridgeError:
            raise
        except Exception as exc:
            raise ToolError(
                f'tool "{self.spec.name}" failed: {type(exc).__name__}: {bounded(str(exc), 1000)}',
                code="ERR_TOOL_FAILED",
            ) from exc
        return self.to_result(value)

    def to_result(self, value: object) -> ToolResult:
        """Convert a return value to a `ToolResult` (see the module docstring).

        Raises:
            ToolError: `ERR_TOOL_BAD_RESULT` when the value cannot be made JSON.
        """
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return ToolResult.of_text(value)
        if value is None:
            return ToolResult.of_parts([])
        if isinstance(value, TextPart | ImagePart | AudioPart):
            return ToolResult.of_parts([value])
        if (
            isinstance(value, Sequence)
            and value
            and all(isinstance(v, TextPart | ImagePart | AudioPart) for v in value)
        ):
            return ToolResult.of_parts(list(value))
        try:
            return ToolResult.of_structured(_JSON_ADAPTER.dump_python(value, mode="json"))
        except Exception as exc:
            raise ToolError(
                f'tool "{self.spec.name}" returned a {type(value).__name__} that cannot be made JSON',
                code="ERR_TOOL_BAD_RESULT",
            ) from exc


class FunctionTools:
    """A `ToolProvider` of Python functions.

    Use it with a list, as a decorator, or both:

    ```python
    tools = FunctionTools([add])

    @tools.tool
    async def fetch(url: str) -> str:
        '''Fetch a page.

        Args:
            url: the address.
        '''
    ```

    Args:
        functions: functions to register now.
        name: a label used in error messages and collisions (default `function-tools`).

    Raises:
        ConfigError: `ERR_CONFIG` for a function that cannot be a tool, or a duplicate name.
    """

    def __init__(self, functions: Iterable[Callable[..., Any]] = (), *, name: str = "function-tools") -> None:
        self.name = name
        self.generation = 0
        self._tools: dict[str, FunctionTool] = {}
        for fn in functions:
            self.add(fn)

    @overload
    def add(self, fn: F, *, name: str | None = None, description: str | None = None) -> F: ...

    @overload
    def add(
        self, fn: None = None, *, name: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...

    def add(
        self, fn: F | None = None, *, name: str | None = None, description: str | None = None
    ) -> F | Callable[[F], F]:
        """Register `fn` (or, without `fn`, return a decorator that does); returns `fn` unchanged.

        Raises:
            ConfigError: `ERR_CONFIG` for a function that cannot be a tool, or a duplicate name.
        """

        def register(function: F) -> F:
            tool = FunctionTool.build(function, name=name, description=description)
            if tool.spec.name in self._tools:
                raise ConfigError(
                    f"FunctionTools {self.name!r}: a tool named {tool.spec.name!r} is already registered",
                    code="ERR_CONFIG",
                )
            self._tools[tool.spec.name] = tool
            self.generation += 1
            return function

        return register(fn) if fn is not None else register

    tool = add
    """Alias of `add`, reads well as a decorator: `@tools.tool`."""

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"FunctionTools({self.name!r}, tools={sorted(self._tools)})"

    async def list_tools(self) -> list[ToolSpec]:
        """The specs of every registered function, in registration order."""
        return [tool.spec for tool in self._tools.values()]

    async def call_tool(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        """Call the function registered as `name` with `args`.

        Raises:
            ToolError: `ERR_TOOL_NOT_FOUND` for an unknown name; otherwise as `FunctionTool.call`.
        """
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f'FunctionTools {self.name!r} has no tool "{name}"', code="ERR_TOOL_NOT_FOUND")
        return await tool.call(args)
