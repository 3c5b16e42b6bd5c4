"""Task tools: JSON instruction tools (TinyAgent's format), served as real MCP tools.

A task tool is described in JSON as a sequence of instructions (`action` + `params`, with
`{{placeholders}}` for the model's arguments). When a model calls it, the arguments are checked
against the tool's `inputSchema`, substituted into the params, and a scheduler runs the
instructions against an action library: browser actions on Playwright driving Chromium, plus
`wait`, `http`, `mcp` and `result`.

- `McpToolParser(do_task)`: the parser API (`replace_instruction_param_value`, `extract_tool`,
  `extract_all_tools`, `get_task_output_schema`).
- `TaskToolSet.from_file(path)`: a tool file ready to run, as a `ToolProvider`, or served with
  `toolbridge serve-tasks TOOLS.json` (see `create_server`, `serve_stdio`, `serve_http`).
- `action("name")`: register an action; third-party packages use the entry point group
  `toolbridge.actions`.

See `docs/describe.md`.
"""

from __future__ import annotations

from ._compat import TaskWarning
from ._parser import TaskTool, compile_tools, task_output_schema
from ._provider import TaskToolSet, load_mcp_servers
from ._scheduler import Task, TaskOutcome, TaskRequest, TaskScheduler
from ._tool_parser import ExtractedTool, McpToolParser
from .actions import (
    ActionContext,
    ActionParams,
    ActionRegistry,
    ActionResult,
    ActionSpec,
    McpServerConfig,
    TaskServices,
    action,
    default_registry,
    registry_with,
)

__all__ = [
    "ActionContext",
    "ActionParams",
    "ActionRegistry",
    "ActionResult",
    "ActionSpec",
    "ExtractedTool",
    "McpServerConfig",
    "McpToolParser",
    "Task",
    "TaskOutcome",
    "TaskRequest",
    "TaskScheduler",
    "TaskServices",
    "TaskTool",
    "TaskToolSet",
    "TaskWarning",
    "action",
    "compile_tools",
    "default_registry",
    "load_mcp_servers",
    "registry_with",
    "task_output_schema",
]
