"""TinyAgent compatibility at load time: keys TinyAgent ignores, and its retired file formats.

TinyAgent reads a tool file loosely: keys it does not know (`task.id`, a tool's `type`, params an
action does not take) are ignored. toolbridge loads such files too, and says what it ignored:
each ignored key is a `TaskWarning` (code `ERR_TASK_IGNORED_KEY`), listed by `serve-tasks
--check`; with `strict=True` (`--strict`) they are errors. A key that is a near miss of a key
that means something (`catchInstrution`, `selectr`) is an error either way: it is a typo whose
effect would otherwise silently disappear.

Files written for TinyAgent's early mock server (April and May 2025) used formats TinyAgent itself
no longer reads. Each such feature has a mechanical, lossless rewrite, so those files load, with one
deprecation warning (a `TaskWarning` of code `ERR_TASK_LEGACY`) naming every feature rewritten and
what replaced it; with `strict=True` the same message is an `ERR_TASK_LEGACY` error:

- a top-level JSON array of tools, or tools keyed by name (now `{"tools": [...]}`);
- the instructions under `inputSchema` (now under `task`);
- arguments as a list of `{name, type}` (in `params` or `inputSchema`), or `inputSchema` as a bare
  map of properties (now a JSON Schema `{"type": "object", "properties": {...}}`);
- the action `vue_push` (now `vueRouterPush`, same params upstream).

A tool of such a file with no instructions at all (TinyAgent's `type: "operation"` tools, functions
the page itself registered) has nothing a task tool file can run: it is refused with
`ERR_TASK_INVALID`, the message saying it is an app-side function.

An `inputSchema` that has `properties` (or nothing) but no `type` is read as an object schema,
as TinyAgent does.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from ..errors import ConfigError

__all__ = ["IGNORED_KEY", "LEGACY", "TaskWarning", "check_legacy", "normalize_tools", "rewrite_legacy"]

IGNORED_KEY = "ERR_TASK_IGNORED_KEY"
LEGACY = "ERR_TASK_LEGACY"

_FILE_KEYS = ("tools",)
_TOOL_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta", "task")
_TASK_KEYS = ("instructions",)
_INSTRUCTION_KEYS = ("action", "params", "catchInstruction", "id")
_RENAMED_ACTIONS = {"vue_push": "vueRouterPush"}


@dataclass(frozen=True, slots=True)
class TaskWarning:
    """Something in a tool file that is ignored, as TinyAgent ignores it.

    Attributes:
        path: where it is (`tools[0].task.id`).
        message: what is ignored and why.
        code: `ERR_TASK_IGNORED_KEY` (the code it has as an error under `strict`).
    """

    path: str
    message: str
    code: str = IGNORED_KEY

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


# --- retired formats --------------------------------------------------------------------------


def _legacy_features(data: object) -> list[tuple[str, str]]:
    """`(path, feature)` for each retired TinyAgent format feature in `data`."""
    found: list[tuple[str, str]] = []
    if isinstance(data, list) and data and all(isinstance(t, dict) and "name" in t for t in data):
        found.append(("", 'a top-level JSON array of tools (TinyAgent now reads {"tools": [...]})'))
        tools = list(enumerate(data))
        prefix = ""
    elif (
        isinstance(data, dict)
        and "tools" not in data
        and data
        and all(isinstance(v, dict) and "name" in v for v in data.values())
    ):
        found.append(("", 'tools keyed by name at the top level (TinyAgent now reads {"tools": [...]})'))
        tools = [(k, v) for k, v in data.items()]
        prefix = ""
    elif isinstance(data, dict) and isinstance(data.get("tools"), list):
        tools = list(enumerate(data["tools"]))
        prefix = "tools"
    else:
        return found
    for key, tool in tools:
        if not isinstance(tool, dict):
            continue
        where = f"{prefix}[{key}]" if isinstance(key, int) else f"{prefix}[{key!r}]"
        schema = tool.get("inputSchema")
        if isinstance(schema, dict) and "instructions" in schema:
            found.append(
                (
                    f"{where}.inputSchema",
                    "instructions under inputSchema (TinyAgent now reads task.instructions)",
                )
            )
        elif isinstance(tool.get("params"), list) or isinstance(schema, list):
            at = "params" if isinstance(tool.get("params"), list) else "inputSchema"
            found.append(
                (
                    f"{where}.{at}",
                    f"arguments as a list of {{name, type}} in {at} (TinyAgent now reads "
                    'inputSchema: {"type": "object", "properties": {...}})',
                )
            )
        elif isinstance(schema, dict) and _is_bare_properties(schema):
            found.append(
                (
                    f"{where}.inputSchema",
                    "inputSchema as a bare map of properties (TinyAgent now reads "
                    'inputSchema: {"type": "object", "properties": {...}})',
                )
            )
        task = tool.get("task")
        instructions = task.get("instructions") if isinstance(task, dict) else None
        if instructions is None and isinstance(schema, dict):
            instructions = schema.get("instructions")
        for i, instruction in enumerate(instructions if isinstance(instructions, list) else []):
            _legacy_actions(instruction, f"{where}.task.instructions[{i}]", found)
    return found


def _legacy_actions(instruction: object, path: str, found: list[tuple[str, str]]) -> None:
    if not isinstance(instruction, dict):
        return
    action = instruction.get("action")
    if isinstance(action, str) and action in _RENAMED_ACTIONS:
        found.append(
            (f"{path}.action", f"the action {action!r} (TinyAgent renamed it {_RENAMED_ACTIONS[action]!r})")
        )
    _legacy_actions(instruction.get("catchInstruction"), f"{path}.catchInstruction", found)


def _is_bare_properties(schema: Mapping[str, object]) -> bool:
    """A map of property schemas where a JSON Schema object was expected."""
    if not schema or "type" in schema or "properties" in schema:
        return False
    return all(isinstance(v, dict) and ("type" in v or "description" in v) for v in schema.values())


def _legacy_message(found: list[tuple[str, str]]) -> str:
    seen: dict[str, str] = {}
    for path, feature in found:
        key = feature.split(" (")[0] if "action" not in feature else feature
        seen.setdefault(key, f"{feature}, at {path or 'the top level'}")
    return "; ".join(seen.values())


def check_legacy(data: object) -> None:
    """Refuse a tool file in one of TinyAgent's retired formats, naming every such feature.

    Raises:
        ConfigError: `ERR_TASK_LEGACY`, one message naming each feature once (with where it
            first appears) and what TinyAgent reads instead.
    """
    found = _legacy_features(data)
    if not found:
        return
    raise ConfigError(
        "this tool file uses TinyAgent's early mock-server format, which TinyAgent itself no longer "
        "reads: " + _legacy_message(found) + " (--strict: retired formats are errors)",
        code=LEGACY,
        details={"problems": [{"code": LEGACY, "path": p, "message": f} for p, f in found]},
    )


def rewrite_legacy(data: object, *, strict: bool = False) -> tuple[object, TaskWarning | None]:
    """Rewrite a tool file in one of TinyAgent's retired formats into the current one.

    The rewrite is mechanical and loses nothing: the tools are put under `tools`, instructions
    under `inputSchema` move to `task`, `{name, type}` argument lists and bare property maps
    become object schemas (each property keeps every key but `name`), `vue_push` becomes
    `vueRouterPush`. Keys the rewrite does not touch (`task.id`, a tool's `type`) are left for
    the ignored-key warnings.

    Returns:
        The data in the current format (a new object; `data` is not changed; `data` itself
        when nothing is retired), and one deprecation warning naming what was rewritten.

    Raises:
        ConfigError: `ERR_TASK_LEGACY` under `strict` (the same message as the warning);
            `ERR_TASK_INVALID` for a tool with no instructions anywhere (an app-side function).
    """
    found = _legacy_features(data)
    if not found:
        return data, None
    if strict:
        check_legacy(data)
    if isinstance(data, list):
        tools: list[object] = list(data)
        names: list[str] = [f"[{i}]" for i in range(len(tools))]
    elif isinstance(data, dict) and "tools" in data:
        tools = list(data["tools"])
        names = [f"tools[{i}]" for i in range(len(tools))]
    else:
        assert isinstance(data, dict)  # `_legacy_features` finds something only in a list or a dict
        tools = list(data.values())
        names = [f"[{k!r}]" for k in data]
    functions = [
        (where, tool.get("name"), tool.get("type"))
        for where, tool in zip(names, tools, strict=True)
        if isinstance(tool, dict) and _instructions_of(tool) is None
    ]
    if functions:
        shown = "; ".join(
            f"{where}: tool {name!r} has no task (no instructions anywhere): it is an app-side function"
            + (f" (TinyAgent type {kind!r})" if isinstance(kind, str) else "")
            + " that TinyAgent's page registered itself, which a task tool file cannot run; serve it "
            "as an MCP tool of your own, or give it task.instructions"
            for where, name, kind in functions
        )
        raise ConfigError(
            shown,
            code="ERR_TASK_INVALID",
            details={
                "problems": [
                    {"code": "ERR_TASK_INVALID", "path": w, "message": f"tool {n!r} is an app-side function"}
                    for w, n, _ in functions
                ]
            },
        )
    out = {"tools": [_rewrite_tool(t) if isinstance(t, dict) else t for t in tools]}
    warning = TaskWarning(
        "",
        "deprecated: TinyAgent's early mock-server format (which TinyAgent itself no longer reads) "
        "was rewritten on load: " + _legacy_message(found),
        code=LEGACY,
    )
    return out, warning


def _instructions_of(tool: Mapping[str, object]) -> object:
    task, schema = tool.get("task"), tool.get("inputSchema")
    if isinstance(task, dict):
        return task.get("instructions")
    if isinstance(schema, dict):
        return schema.get("instructions")
    return None


def _object_schema(args: object) -> object:
    """`[{name, type, ...}]` or `{name: {type, ...}}` as a JSON Schema object; else unchanged."""
    if isinstance(args, list) and all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in args):
        props = {a["name"]: {k: v for k, v in a.items() if k != "name"} for a in args}
        return {"type": "object", "properties": props}
    if isinstance(args, dict) and _is_bare_properties(args):
        return {"type": "object", "properties": dict(args)}
    return args


def _rewrite_tool(tool: dict[str, object]) -> dict[str, object]:
    out = dict(tool)
    schema = out.get("inputSchema")
    if isinstance(schema, dict) and "instructions" in schema and "task" not in out:
        out["task"] = {k: v for k, v in schema.items() if k in ("id", "instructions")}
        rest = {k: v for k, v in schema.items() if k not in ("id", "instructions")}
        if rest:
            out["inputSchema"] = rest
        else:
            del out["inputSchema"]
    params = out.pop("params", None) if isinstance(out.get("params"), list) else None
    if params is not None and "inputSchema" not in out:
        out["inputSchema"] = params
    if "inputSchema" in out:
        out["inputSchema"] = _object_schema(out["inputSchema"])
    task = out.get("task")
    if isinstance(task, dict) and isinstance(task.get("instructions"), list):
        out["task"] = {**task, "instructions": [_rename_actions(i) for i in task["instructions"]]}
    return out


def _rename_actions(instruction: object) -> object:
    if not isinstance(instruction, dict):
        return instruction
    out = dict(instruction)
    action = out.get("action")
    if isinstance(action, str) and action in _RENAMED_ACTIONS:
        out["action"] = _RENAMED_ACTIONS[action]
    if "catchInstruction" in out:
        out["catchInstruction"] = _rename_actions(out["catchInstruction"])
    return out


# --- ignored keys -------------------------------------------------------------------------------


@dataclass
class _Normalizer:
    params_of: Callable[[str], type[BaseModel] | None]
    warnings: list[TaskWarning]
    typos: list[tuple[str, str]]
    tool_name: str | None = None

    def keys(self, obj: dict[str, object], known: tuple[str, ...], path: str, what: str) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in obj.items():
            if key in known:
                out[key] = value
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            where = f"{path}.{key}" if path else key
            if close:
                named = f" (tool {self.tool_name!r})" if self.tool_name else ""
                self.typos.append((where, f"unknown key {key!r}; did you mean {close[0]!r}?{named}"))
                out[key] = value  # left for the structure check, which refuses it
            else:
                self.warnings.append(
                    TaskWarning(where, f"unknown {what} key {key!r} is ignored (as TinyAgent does)")
                )
        return out

    def instruction(self, data: object, path: str) -> object:
        if not isinstance(data, dict):
            return data
        out = self.keys(data, _INSTRUCTION_KEYS, path, "instruction")
        action, params = out.get("action"), out.get("params")
        model = self.params_of(action) if isinstance(action, str) else None
        if model is not None and isinstance(params, dict):
            names = _param_names(model)
            kept: dict[str, object] = {}
            for key, value in params.items():
                close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.8)
                if key in names or close:
                    kept[key] = value  # a near miss is refused by the params check
                else:
                    known = ", ".join(sorted(names)) or "none"
                    self.warnings.append(
                        TaskWarning(
                            f"{path}.params.{key}",
                            f"param {key!r} is not a param of {action!r} (params: {known}) "
                            "and is ignored (as TinyAgent does)",
                        )
                    )
            out["params"] = kept
        if "catchInstruction" in out:
            out["catchInstruction"] = self.instruction(out["catchInstruction"], f"{path}.catchInstruction")
        return out

    def tool(self, data: object, path: str) -> object:
        if not isinstance(data, dict):
            return data
        name = data.get("name")
        self.tool_name = name if isinstance(name, str) else None
        out = self.keys(data, _TOOL_KEYS, path, "tool")
        schema = out.get("inputSchema")
        if isinstance(schema, dict) and "type" not in schema and not _is_bare_properties(schema):
            out["inputSchema"] = {"type": "object", **schema}
        task = out.get("task")
        if isinstance(task, dict):
            task = self.keys(task, _TASK_KEYS, f"{path}.task", "task")
            instructions = task.get("instructions")
            if isinstance(instructions, list):
                task["instructions"] = [
                    self.instruction(item, f"{path}.task.instructions[{i}]")
                    for i, item in enumerate(instructions)
                ]
            out["task"] = task
        return out


def _param_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def normalize_tools(
    data: object,
    params_of: Callable[[str], type[BaseModel] | None],
    *,
    single: bool = False,
    strict: bool = False,
) -> tuple[object, list[TaskWarning]]:
    """Drop the keys TinyAgent ignores, as warnings; refuse near misses of known keys.

    Args:
        data: a whole tool file (or one tool with `single=True`).
        params_of: the params model of an action name (None when unknown).
        single: `data` is one tool object.
        strict: ignored keys are errors too.

    Returns:
        The data without the ignored keys (a new object; `data` is not changed) and the warnings.

    Raises:
        ConfigError: `ERR_TASK_INVALID` for a near miss of a known key; `ERR_TASK_IGNORED_KEY`
            for an ignored key under `strict`.
    """
    norm = _Normalizer(params_of, [], [])
    if single:
        out = norm.tool(data, "tool")
    elif isinstance(data, dict):
        out = norm.keys(data, _FILE_KEYS, "", "file")
        tools = out.get("tools")
        if isinstance(tools, list):
            out["tools"] = [norm.tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    else:
        return data, []
    problems = [{"code": "ERR_TASK_INVALID", "path": p, "message": m} for p, m in norm.typos]
    if strict:
        problems += [{"code": w.code, "path": w.path, "message": w.message} for w in norm.warnings]
    if problems:
        shown = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:10])
        if len(problems) > 10:
            shown += f"; and {len(problems) - 10} more"
        raise ConfigError(
            shown + (" (--strict: ignored keys are errors)" if strict and norm.warnings else ""),
            code=problems[0]["code"],
            details={"problems": problems},
        )
    return out, norm.warnings
