"""Loading a `Tasks.ToolSet` statically, to know its tool names (and its load errors).

The task-tools package (`toolbridge.tasks`) validates a tools file completely: actions, params,
placeholders, JSON Schemas. When it is importable the analyzer uses it; its error message (which
names the tool, the instruction index and the field) becomes the diagnostic. Without it, only
the file's JSON shape and the tool names are checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .._bounded import MAX_JSON_FILE_BYTES, InputLimitError, loads_json, read_text_file
from ._kinds import TaskToolSetDoc

__all__ = ["TaskLoadError", "load_task_tool_names", "task_tools_json"]


class TaskLoadError(Exception):
    """The tool set cannot be loaded.

    Attributes:
        problems: `(path, message)` pairs; `path` points into the tools document
            (`("tools", 0, "task", ...)`) when the loader named a place, else is empty.
    """

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.problems: list[tuple[tuple[str | int, ...], str]] = [(path, message)]


_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_error_path(text: str) -> tuple[str | int, ...]:
    """`tools[0].task.params.x` -> `("tools", 0, "task", "params", "x")`."""
    out: list[str | int] = []
    for name, index in _PATH_TOKEN.findall(text):
        out.append(int(index) if index else name)
    return tuple(out)


def task_tools_json(doc: TaskToolSetDoc, base_dir: Path) -> dict[str, Any]:
    """The `{"tools": [...]}` document of a tool set (read from `file`, or the inline `tools`).

    Raises:
        TaskLoadError: the file cannot be read or is not a JSON object with a `tools` list.
    """
    if doc.tools is not None:
        return {"tools": [dict(t) for t in doc.tools]}
    assert doc.file is not None
    path = Path(doc.file)
    if not path.is_absolute():
        path = base_dir / path
    try:
        data = loads_json(read_text_file(path, max_bytes=MAX_JSON_FILE_BYTES))
    except InputLimitError as exc:
        raise TaskLoadError(f"{exc.where(doc.file)}: the tools file {exc.message}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        raise TaskLoadError(f"{doc.file}: expected a JSON object with a `tools` list")
    return data


def load_task_tool_names(doc: TaskToolSetDoc, base_dir: Path) -> list[str]:
    """Load a tool set fully (with `toolbridge.tasks` when available) and return its tool names.

    Raises:
        TaskLoadError: the tools fail to load; the message is the loader's.
    """
    data = task_tools_json(doc, base_dir)
    tools = data["tools"]
    names: list[str] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise TaskLoadError(f"tools[{i}] needs a string `name`", (i,))
        names.append(tool["name"])
    try:
        import toolbridge.tasks  # noqa: F401
    except ImportError:  # a build without task tools: the shape check above is all we can do
        return names
    return _validate_with_tasks(data, doc, base_dir)


def _validate_with_tasks(data: dict[str, Any], doc: TaskToolSetDoc, base_dir: Path) -> list[str]:
    from ..errors import ConfigError
    from ..tasks import compile_tools
    from ..tasks.actions import registry_with

    try:
        registry = registry_with(doc.actions, base_dir) if doc.actions else None
        loaded = compile_tools(data, registry)
    except ConfigError as exc:
        problems = exc.details.get("problems") or []
        error = TaskLoadError(exc.message)
        if problems:
            error.problems = [
                (
                    parse_error_path(str(p.get("path", ""))),
                    f"{p.get('path', '')}: {p.get('message', '')} [{p.get('code', exc.code)}]",
                )
                for p in problems
            ]
        raise error from None
    return [t.name for t in loaded]
