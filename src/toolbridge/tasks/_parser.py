"""Compiling task tools: the tool file JSON checked completely and turned into `TaskTool`s.

`compile_tools(data)` (a whole `{"tools": [...]}` file) and `compile_tool(data)` (one tool) are
what `McpToolParser` (in `_tool_parser`) and `TaskToolSet` use.

Unlike TinyAgent, loading validates everything before any tool is offered, and reports every
problem with the tool's name and the path of the field:

| code | what |
|---|---|
| `ERR_TASK_INVALID` | the structure is wrong (missing `task`, unknown key, empty instructions, bad id) |
| `ERR_TASK_SCHEMA` | `inputSchema` or `outputSchema` is not a valid JSON Schema (or not an object schema) |
| `ERR_TASK_UNKNOWN_ACTION` | an instruction names an action the registry does not have |
| `ERR_TASK_PARAMS` | params do not fit the action's declared parameters |
| `ERR_TASK_PLACEHOLDER` | a placeholder names no `inputSchema` property and no earlier instruction id |
| `ERR_TASK_DUPLICATE` | two tools with one name, or two instructions with one id |
| `ERR_TASK_LEGACY` | (with `strict`) a retired TinyAgent format; otherwise rewritten, one `TaskWarning` |
| `ERR_TASK_IGNORED_KEY` | (with `strict`) a key TinyAgent ignores; otherwise a `TaskWarning` |

A param whose value holds a placeholder is checked for its key only (its type is known once
the arguments are); after substitution, before the first instruction runs, every instruction
without `{{id.path}}` references is checked in full against its action's model.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from .._schema_loops import schema_hazard
from ..errors import ConfigError, bounded
from ..tools import ToolSpec
from ._compat import TaskWarning, normalize_tools, rewrite_legacy
from ._format import InstructionModel, ToolModel, format_loc, parse_tool, parse_tools_file
from ._substitute import (
    DEFAULT_SYNTAX,
    LEAVE,
    OMIT,
    MissingValue,
    PathError,
    Syntax,
    get_path,
    iter_placeholders,
    parse_path,
    render,
)
from .actions._registry import ActionRegistry, ActionSpec, default_registry

__all__ = [
    "TaskTool",
    "compile_tool",
    "compile_tools",
    "task_output_schema",
]


def task_output_schema(result_schema: Mapping[str, object] | None = None) -> dict[str, object]:
    """The JSON Schema of the task envelope, with `result` described by `result_schema`.

    `status` is `success`, `error` or `partial completed`; `index` is the instruction reached
    (the last on success, the failing one on error, the first not completed when stopped, `-1`
    when the task did not start); `instruction` is that instruction as written in the tool file;
    `result` is the task's result; `error.message` says what went wrong.
    """
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["success", "error", "partial completed"]},
            "index": {
                "type": "integer",
                "description": "the instruction reached: last on success, failing on error, "
                "first not completed when stopped, -1 when the task did not start",
            },
            "instruction": {
                "type": "object",
                "properties": {
                    "action": {"type": "string"},
                    "params": {"type": "object"},
                    "catchInstruction": {"type": "object"},
                    "id": {"type": "string"},
                },
                "required": ["action"],
            },
            "result": dict(result_schema) if result_schema is not None else {},
            "error": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        },
        "required": ["status", "index"],
    }


@dataclass(frozen=True)
class _Problem:
    code: str
    path: str
    message: str


def _raise_problems(problems: list[_Problem]) -> None:
    if not problems:
        return
    shown = "; ".join(f"{p.path}: {p.message}" for p in problems[:10])
    if len(problems) > 10:
        shown += f"; and {len(problems) - 10} more"
    raise ConfigError(
        f"{problems[0].code}: {shown}" if len(problems) > 1 else shown,
        code=problems[0].code,
        details={"problems": [{"code": p.code, "path": p.path, "message": p.message} for p in problems]},
    )


@dataclass(frozen=True)
class _Kind:
    """How a placeholder resolves: an argument, or a reference into an earlier result."""

    arg: str | None = None
    ref_id: str | None = None
    steps: tuple[str | int, ...] = ()


@dataclass(frozen=True)
class TaskTool:
    """A validated task tool, ready to run.

    Attributes:
        name: the tool's name.
        title: optional display title.
        description: what it does, for a model.
        input_schema: the JSON Schema of its arguments.
        result_schema: the tool file's `outputSchema` (the schema of the envelope's `result`).
        output_schema: the MCP output schema: the task envelope.
        annotations: MCP tool annotations, if any.
        meta: the tool's `_meta`, if any.
        instructions: the instructions as written (templates; substituted per call).
        ids: the instruction ids, mapped to their index.
    """

    name: str
    title: str | None
    description: str
    input_schema: Mapping[str, object]
    result_schema: Mapping[str, object] | None
    output_schema: Mapping[str, object]
    annotations: Mapping[str, object] | None
    meta: Mapping[str, object] | None
    instructions: tuple[InstructionModel, ...]
    ids: Mapping[str, int]
    _kinds: Mapping[str, _Kind] = field(repr=False)
    _registry: ActionRegistry = field(repr=False)
    syntax: Syntax = field(default=DEFAULT_SYNTAX, repr=False)

    # -- describing ---------------------------------------------------------------------------

    def mcp_definition(self) -> dict[str, object]:
        """The MCP `Tool` object as JSON (camelCase keys)."""
        out: dict[str, object] = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = dict(self.input_schema)
        out["outputSchema"] = dict(self.output_schema)
        if self.annotations is not None:
            out["annotations"] = dict(self.annotations)
        if self.meta is not None:
            out["_meta"] = dict(self.meta)
        return out

    def spec(self) -> ToolSpec:
        """The tool as a toolbridge `ToolSpec`."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.input_schema,
            output_schema=self.output_schema,
            annotations=self.annotations,
        )

    # -- preparing a call ---------------------------------------------------------------------

    def prepare_arguments(self, arguments: Mapping[str, object] | None) -> dict[str, object]:
        """Validate arguments against `inputSchema` and fill in the schema's defaults.

        Raises:
            ConfigError: `ERR_TASK_ARGUMENTS`, naming each argument that is wrong.
        """
        args = dict(arguments or {})
        validator_cls = jsonschema.validators.validator_for(self.input_schema)
        validator = validator_cls(self.input_schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            problems = []
            for err in errors[:5]:
                where = format_loc("arguments", list(err.absolute_path))
                problems.append(f"{where}: {bounded(err.message, 300)}")
            raise ConfigError(
                f"invalid arguments for tool {self.name!r}: " + "; ".join(problems),
                code="ERR_TASK_ARGUMENTS",
            )
        properties = self.input_schema.get("properties")
        for name, prop in properties.items() if isinstance(properties, Mapping) else ():
            if name not in args and isinstance(prop, Mapping) and "default" in prop:
                args[name] = prop["default"]
        return args

    def resolver(
        self, args: Mapping[str, object], results: Mapping[str, object] | None
    ) -> Callable[[str], object]:
        """A placeholder resolver for `render`: arguments from `args`, references from `results`.

        With `results=None`, references are left in place (the check before a task starts).
        """

        def resolve(name: str) -> object:
            kind = self._kinds.get(name)
            if kind is None:
                return LEAVE
            if kind.arg is not None:
                if kind.arg in args:
                    return args[kind.arg]
                raise MissingValue(name)
            assert kind.ref_id is not None
            if results is None:
                return LEAVE
            if kind.ref_id not in results:
                raise PathError(f"instruction {kind.ref_id!r} has no result (it was skipped or failed)")
            return get_path(results[kind.ref_id], list(kind.steps), kind.ref_id)

        return resolve

    def render_params(
        self,
        instruction: InstructionModel,
        path: str,
        args: Mapping[str, object],
        results: Mapping[str, object] | None,
    ) -> dict[str, object]:
        """The instruction's params with placeholders substituted.

        Raises:
            MissingValue: an interpolated placeholder's argument was omitted (`.path` says where).
            PathError: a reference walks to something the earlier result does not have.
        """
        rendered = render(instruction.params, self.resolver(args, results), f"{path}.params", self.syntax)
        assert isinstance(rendered, dict) and rendered is not OMIT
        return rendered

    def check_ready(self, args: Mapping[str, object]) -> None:
        """Check, before anything runs, that every instruction can be filled in from `args`.

        Every interpolated placeholder must have its argument, and the params of instructions
        that use no earlier result must fit their action once substituted.

        Raises:
            ConfigError: `ERR_TASK_ARGUMENT_MISSING` or `ERR_TASK_PARAMS`, naming the instruction.
        """
        for index, instruction in enumerate(self.instructions):
            self._check_ready(instruction, f"task.instructions[{index}]", args)

    def _check_ready(self, instruction: InstructionModel, path: str, args: Mapping[str, object]) -> None:
        try:
            params = self.render_params(instruction, path, args, None)
        except MissingValue as exc:
            raise ConfigError(
                f"tool {self.name!r}: argument {exc.name!r} was not given and has no default, but "
                f"{exc.path} needs it inside a longer text; give {exc.name!r}",
                code="ERR_TASK_ARGUMENT_MISSING",
            ) from None
        spec = self.action_spec(instruction.action)
        for key, value in instruction.params.items():
            if key in params or not isinstance(value, str):
                continue
            placeholder = next(iter_placeholders(value, syntax=self.syntax), None)
            field_info = _field_by_name(spec.params, key)
            if placeholder is not None and field_info is not None and field_info.is_required():
                raise ConfigError(
                    f"tool {self.name!r}: argument {placeholder.name!r} was not given and has no default, "
                    f"but {path}.params.{key} ({instruction.action}) needs it; give {placeholder.name!r}",
                    code="ERR_TASK_ARGUMENT_MISSING",
                )
        uses_refs = any(
            self._kinds[p.name].ref_id is not None
            for p in iter_placeholders(instruction.params, syntax=self.syntax)
        )
        if not uses_refs:
            try:
                self.params_model(instruction.action, params, path)
            except ConfigError as exc:
                raise ConfigError(f"tool {self.name!r}: {exc.message}", code=exc.code) from None
        if instruction.catch_instruction is not None:
            self._check_ready(instruction.catch_instruction, f"{path}.catchInstruction", args)

    def check_result(self, value: object) -> str | None:
        """Check a task result against the tool file's `outputSchema`; a message, or None when it fits."""
        if self.result_schema is None:
            return None
        validator = jsonschema.validators.validator_for(self.result_schema)(self.result_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = format_loc("result", list(error.absolute_path))
        return f"{where}: {bounded(error.message, 300)}"

    def action_spec(self, action: str) -> ActionSpec:
        """The registered action an instruction names.

        Raises:
            ConfigError: `ERR_TASK_UNKNOWN_ACTION` (cannot happen for a loaded tool unless the
                action was unregistered since).
        """
        spec = self._registry.get(action)
        if spec is None:
            raise ConfigError(f"unknown action {action!r}", code="ERR_TASK_UNKNOWN_ACTION")
        return spec

    def params_model(self, action: str, params: Mapping[str, object], path: str) -> BaseModel:
        """The action's params model instance for substituted params.

        Raises:
            ConfigError: `ERR_TASK_PARAMS` when they do not fit (or the action is unknown).
        """
        spec = self.action_spec(action)
        try:
            return spec.params.model_validate(dict(params))
        except ValidationError as exc:
            text = "; ".join(
                f"{format_loc(f'{path}.params', e['loc'])}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            raise ConfigError(text, code="ERR_TASK_PARAMS") from None


def _field_by_name(model: type[BaseModel], key: str) -> FieldInfo | None:
    """The field of `model` that the params key `key` fills (by alias or by name)."""
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


# --- compiling -----------------------------------------------------------------------------------


def _check_schema(schema: Mapping[str, object], path: str, *, must_be_object: bool) -> list[_Problem]:
    problems: list[_Problem] = []
    hazard = schema_hazard(schema)
    if hazard is not None:
        return [_Problem("ERR_TASK_SCHEMA", path, f"invalid JSON Schema: it {hazard}")]
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = format_loc(path, list(exc.absolute_path))
        problems.append(
            _Problem("ERR_TASK_SCHEMA", where, f"invalid JSON Schema: {bounded(exc.message, 300)}")
        )
        return problems
    if must_be_object and schema.get("type") != "object":
        problems.append(
            _Problem("ERR_TASK_SCHEMA", f"{path}.type", 'must be "object" (MCP tools take an object)')
        )
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        problems.append(_Problem("ERR_TASK_SCHEMA", f"{path}.properties", "must be an object"))
    return problems


class _Compiler:
    def __init__(
        self, model: ToolModel, prefix: str, registry: ActionRegistry, syntax: Syntax = DEFAULT_SYNTAX
    ) -> None:
        self.model = model
        self.prefix = prefix
        self.registry = registry
        self.syntax = syntax
        self.problems: list[_Problem] = []
        self.kinds: dict[str, _Kind] = {}
        props = model.input_schema.get("properties")
        self.properties: set[str] = set(props) if isinstance(props, Mapping) else set()

    def add(self, code: str, path: str, message: str) -> None:
        self.problems.append(_Problem(code, path, f"{message} (tool {self.model.name!r})"))

    def compile(self) -> TaskTool:
        m = self.model
        for p in _check_schema(m.input_schema, f"{self.prefix}.inputSchema", must_be_object=True):
            self.add(p.code, p.path, p.message)
        if m.output_schema is not None:
            for p in _check_schema(m.output_schema, f"{self.prefix}.outputSchema", must_be_object=False):
                self.add(p.code, p.path, p.message)
        ids: dict[str, int] = {}
        for index, instruction in enumerate(m.task.instructions):
            path = f"{self.prefix}.task.instructions[{index}]"
            self.check_instruction(instruction, path, ids, top=True)
            if instruction.id is not None:
                if instruction.id in ids:
                    self.add(
                        "ERR_TASK_DUPLICATE",
                        f"{path}.id",
                        f"id {instruction.id!r} is already used by instruction {ids[instruction.id]}",
                    )
                else:
                    ids[instruction.id] = index
        all_ids = {i.id for i in m.task.instructions if i.id}
        clash = all_ids & self.properties
        for name in sorted(clash):
            self.add(
                "ERR_TASK_DUPLICATE",
                f"{self.prefix}.task",
                f"{name!r} is both an inputSchema property and an instruction id; rename one",
            )
        _raise_problems(self.problems)
        return TaskTool(
            name=m.name,
            title=m.title,
            description=m.description,
            input_schema=m.input_schema,
            result_schema=m.output_schema,
            output_schema=task_output_schema(m.output_schema),
            annotations=m.annotations,
            meta=m.meta,
            instructions=tuple(m.task.instructions),
            ids=ids,
            _kinds=self.kinds,
            _registry=self.registry,
            syntax=self.syntax,
        )

    def check_instruction(
        self, instruction: InstructionModel, path: str, ids: Mapping[str, int], *, top: bool
    ) -> None:
        if not top and instruction.id is not None:
            self.add("ERR_TASK_INVALID", f"{path}.id", "only top-level instructions may have an id")
        spec = self.registry.get(instruction.action)
        if spec is None:
            close = difflib.get_close_matches(instruction.action, self.registry.names(), n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            self.add(
                "ERR_TASK_UNKNOWN_ACTION", f"{path}.action", f"unknown action {instruction.action!r}{hint}"
            )
        for ph in iter_placeholders(instruction.params, f"{path}.params", self.syntax):
            self.classify(ph.name, ph.path, ids)
        if spec is not None:
            self.check_params(spec.params, instruction.params, path)
        if instruction.catch_instruction is not None:
            self.check_instruction(instruction.catch_instruction, f"{path}.catchInstruction", ids, top=False)

    def classify(self, name: str, path: str, ids: Mapping[str, int]) -> None:
        if name in self.properties:
            self.kinds[name] = _Kind(arg=name)
            return
        head, rest = name, ""
        for i, ch in enumerate(name):
            if ch in ".[":
                head, rest = name[:i], name[i:]
                break
        if head in ids:
            try:
                steps = parse_path(rest)
            except ValueError as exc:
                self.add("ERR_TASK_PLACEHOLDER", path, f"{{{{{name}}}}}: {exc}")
                return
            self.kinds[name] = _Kind(ref_id=head, steps=tuple(steps))
            return
        later = any(i.id == head for i in self.model.task.instructions)
        known = ", ".join(sorted(self.properties)) or "none"
        why = (
            f"instruction {head!r} runs later, so its result is not there yet"
            if later
            else f"it names no inputSchema property (properties: {known}) and no earlier instruction id"
        )
        self.add("ERR_TASK_PLACEHOLDER", path, f"placeholder {{{{{name}}}}}: {why}")

    def check_params(self, model: type[BaseModel], params: Mapping[str, object], path: str) -> None:
        try:
            model.model_validate(dict(params))
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                loc = err["loc"]
                key = loc[0] if loc else None
                if (
                    isinstance(key, str)
                    and key in params
                    and next(iter_placeholders(params[key], syntax=self.syntax), None) is not None
                ):
                    continue  # its type is known once the arguments are
                if err["type"] == "missing" and isinstance(key, str):
                    self.add(
                        "ERR_TASK_PARAMS", format_loc(f"{path}.params", loc), "required param is missing"
                    )
                elif err["type"] == "extra_forbidden":
                    allowed = ", ".join(sorted(_param_names(model))) or "none"
                    self.add(
                        "ERR_TASK_PARAMS",
                        format_loc(f"{path}.params", loc),
                        f"unknown param (params of this action: {allowed})",
                    )
                else:
                    self.add("ERR_TASK_PARAMS", format_loc(f"{path}.params", loc), err["msg"])


def _param_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _params_of(registry: ActionRegistry) -> Callable[[str], type[BaseModel] | None]:
    def params_of(name: str) -> type[BaseModel] | None:
        spec = registry.get(name)
        return spec.params if spec is not None else None

    return params_of


def compile_tools(
    data: object,
    registry: ActionRegistry | None = None,
    *,
    syntax: Syntax = DEFAULT_SYNTAX,
    strict: bool = False,
    warnings: list[TaskWarning] | None = None,
) -> list[TaskTool]:
    """Validate a whole tool file (`{"tools": [...]}`) and compile its tools.

    Args:
        data: the file's JSON content.
        registry: the actions (default: `default_registry()`).
        syntax: how placeholders are written (`{{name}}` by default).
        strict: keys TinyAgent ignores are errors (`ERR_TASK_IGNORED_KEY`) instead of warnings.
        warnings: when given, the ignored keys are appended to it (see `TaskWarning`).

    Raises:
        ConfigError: `ERR_TASK_*` naming every problem (see the module docstring);
            `ERR_TASK_LEGACY` (with `strict`) for a file in one of TinyAgent's retired formats,
            which is otherwise rewritten with one warning (see `rewrite_legacy`).
    """
    reg = registry if registry is not None else default_registry()
    data, rewritten = rewrite_legacy(data, strict=strict)
    data, found = normalize_tools(data, _params_of(reg), strict=strict)
    if warnings is not None:
        warnings.extend([rewritten, *found] if rewritten is not None else found)
    file = parse_tools_file(data)
    tools: list[TaskTool] = []
    problems: list[_Problem] = []
    seen: dict[str, int] = {}
    for index, model in enumerate(file.tools):
        if model.name in seen:
            problems.append(
                _Problem(
                    "ERR_TASK_DUPLICATE",
                    f"tools[{index}].name",
                    f"tool name {model.name!r} is already used by tools[{seen[model.name]}]",
                )
            )
            continue
        seen[model.name] = index
        try:
            tools.append(_Compiler(model, f"tools[{index}]", reg, syntax).compile())
        except ConfigError as exc:
            problems.extend(_Problem(**p) for p in exc.details.get("problems", []))
    _raise_problems(problems)
    return tools


def compile_tool(
    data: object,
    registry: ActionRegistry | None = None,
    prefix: str = "tool",
    *,
    syntax: Syntax = DEFAULT_SYNTAX,
    strict: bool = False,
    warnings: list[TaskWarning] | None = None,
) -> TaskTool:
    """Validate and compile one tool object (the options are those of `compile_tools`).

    Raises:
        ConfigError: `ERR_TASK_*` naming every problem.
    """
    reg = registry if registry is not None else default_registry()
    data, found = normalize_tools(data, _params_of(reg), single=True, strict=strict)
    if warnings is not None:
        warnings.extend(found)
    return _Compiler(parse_tool(data, prefix), prefix, reg, syntax).compile()
