"""The task tool file format, as pydantic models, and the translation of their errors.

The format is TinyAgent's `mcp-tool.json`, kept compatible and made a little stricter:

```json
{"tools": [{
    "name": "add_user",
    "description": "Add a user through the web form.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    "outputSchema": {"type": "object"},
    "annotations": {"destructiveHint": false},
    "task": {"instructions": [
        {"action": "input", "params": {"selector": "#name", "value": "{{name}}"},
         "catchInstruction": {"action": "click", "params": {"selector": "#reset"}},
         "id": "step1"}
    ]}
}]}
```

A tool is an MCP tool (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
`annotations`, `_meta`) plus a `task`: instructions that run in order. An instruction names an
`action` of the action library, gives it `params` (which may hold `{{placeholders}}`), may carry
a `catchInstruction` that runs when it fails, and may carry an `id` so that later instructions
can use its result as `{{id.path}}`.

Unknown keys are refused (a misspelt `catchInstrution` would otherwise be silently ignored).
Structural errors become one `ConfigError` (code `ERR_TASK_INVALID`) whose message names the
path in the file, such as `tools[0].task.instructions[2].catchInstruction.action`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError

__all__ = [
    "InstructionModel",
    "TaskModel",
    "ToolModel",
    "ToolsFileModel",
    "format_loc",
]

_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]*$"


class InstructionModel(BaseModel):
    """One instruction: an action, its params, an optional fallback and an optional id."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    action: str = Field(min_length=1)
    params: dict[str, object] = Field(default_factory=dict)
    catch_instruction: InstructionModel | None = Field(default=None, alias="catchInstruction")
    id: str | None = Field(default=None, pattern=_ID_PATTERN)

    def to_json(self) -> dict[str, object]:
        """The instruction as it appears in a tool file (camelCase keys, no nulls)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class TaskModel(BaseModel):
    """The task of a tool: a non-empty sequence of instructions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: list[InstructionModel] = Field(min_length=1)


class ToolModel(BaseModel):
    """One task tool: the fields of an MCP tool plus its task."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_\-.]+$")
    title: str | None = None
    description: str = ""
    input_schema: dict[str, object] = Field(
        default_factory=lambda: dict[str, object](type="object", properties={}), alias="inputSchema"
    )
    output_schema: dict[str, object] | None = Field(default=None, alias="outputSchema")
    annotations: dict[str, object] | None = None
    meta: dict[str, object] | None = Field(default=None, alias="_meta")
    task: TaskModel


class ToolsFileModel(BaseModel):
    """A whole tool file: `{"tools": [...]}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[ToolModel]


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_loc(prefix: str, loc: Sequence[int | str]) -> str:
    """Render a pydantic location under `prefix` as `a.b[2].c`."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def parse_tools_file(data: object) -> ToolsFileModel:
    """Validate the structure of a whole tool file.

    Raises:
        ConfigError: `ERR_TASK_INVALID`, naming every path that is wrong.
    """
    if not isinstance(data, dict):
        raise ConfigError('a task tool file must be a JSON object {"tools": [...]}', code="ERR_TASK_INVALID")
    try:
        return ToolsFileModel.model_validate(data)
    except ValidationError as exc:
        raise _structure_error("", exc, data) from None


def parse_tool(data: object, prefix: str = "tool") -> ToolModel:
    """Validate the structure of one tool object.

    Raises:
        ConfigError: `ERR_TASK_INVALID`, naming every path that is wrong.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix}: a task tool must be a JSON object", code="ERR_TASK_INVALID")
    try:
        return ToolModel.model_validate(data)
    except ValidationError as exc:
        raise _structure_error(prefix, exc, {"tools": [data]}, single=True) from None


def _tool_name_at(data: object, loc: Sequence[int | str]) -> str | None:
    """The name of the tool a location of a whole file points into, when it has one."""
    if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
        tools = data.get("tools") if isinstance(data, dict) else None
        if isinstance(tools, list) and loc[1] < len(tools) and isinstance(tools[loc[1]], dict):
            name = tools[loc[1]].get("name")
            return name if isinstance(name, str) else None
    return None


def _structure_error(
    prefix: str, exc: ValidationError, data: Any = None, *, single: bool = False
) -> ConfigError:
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        path = format_loc(prefix, err["loc"])
        name = _tool_name_at(data, ("tools", 0, *err["loc"]) if single else err["loc"])
        problems.append((path, f"{err['msg']} (tool {name!r})" if name else err["msg"]))
    text = "; ".join(f"{path}: {msg}" for path, msg in problems[:10])
    if len(problems) > 10:
        text += f"; and {len(problems) - 10} more"
    return ConfigError(
        f"invalid task tool file: {text}",
        code="ERR_TASK_INVALID",
        details={"paths": [p for p, _ in problems]},
    )
