"""The action library of task tools: the registry, the context actions see, and the built-ins.

See `_registry` for how actions are declared and registered (including third-party actions
through the `toolbridge.actions` entry point group), `browser` for the Playwright/Chromium
actions and `builtin` for `wait`, `http`, `mcp` and `result`.
"""

from __future__ import annotations

from ._context import ActionContext, McpServerConfig, TaskServices
from ._registry import (
    ENTRY_POINT_GROUP,
    ActionParams,
    ActionRegistry,
    ActionResult,
    ActionSpec,
    NoParams,
    action,
    default_registry,
    registry_with,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionContext",
    "ActionParams",
    "ActionRegistry",
    "ActionResult",
    "ActionSpec",
    "McpServerConfig",
    "NoParams",
    "TaskServices",
    "action",
    "default_registry",
    "registry_with",
]
