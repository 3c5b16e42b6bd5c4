"""toolbridge: bring the tools of MCP servers to AI agents, safely and fast.

Three ways in, one runtime:

- **Discover**: `McpToolProvider(client)` offers a whole MCP server's tools to an `Agent`.
- **Describe**: `McpToolParser` turns JSON instruction tools into real MCP tools.
- **Declare**: `define_mcp_tool(...)` wraps one remote tool with declared schemas, effects,
  capabilities, cost and timeout, run under `create_runtime(...)`'s checks.

Public names are imported lazily, so `import toolbridge` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # errors
    "ToolbridgeError": "toolbridge.errors",
    "ConfigError": "toolbridge.errors",
    "McpError": "toolbridge.errors",
    "TransportError": "toolbridge.errors",
    "ProtocolError": "toolbridge.errors",
    "JsonRpcError": "toolbridge.errors",
    "McpTimeoutError": "toolbridge.errors",
    "SessionInvalidError": "toolbridge.errors",
    "ToolError": "toolbridge.errors",
    "ModelError": "toolbridge.errors",
    "AgentError": "toolbridge.errors",
    "PolicyError": "toolbridge.errors",
    # content and the tool contract
    "TextPart": "toolbridge.content",
    "ImagePart": "toolbridge.content",
    "AudioPart": "toolbridge.content",
    "ToolSpec": "toolbridge.tools",
    "ToolResult": "toolbridge.tools",
    "ToolProvider": "toolbridge.tools",
    # clients and the bridge
    "StdioClient": "toolbridge.clients",
    "HttpClient": "toolbridge.clients",
    "InProcessClient": "toolbridge.clients",
    "McpClient": "toolbridge.clients",
    "McpToolProvider": "toolbridge.bridge",
    "FunctionTools": "toolbridge.functions",
    # agent and models
    "Agent": "toolbridge.agent",
    "ToolBinding": "toolbridge.agent",
    "RunResult": "toolbridge.agent",
    "Usage": "toolbridge.agent",
    "Model": "toolbridge.agent",
    "ScriptedModel": "toolbridge.agent",
    "FunctionModel": "toolbridge.agent",
    "OpenAIModel": "toolbridge.agent",
    "ModelSamplingHandler": "toolbridge.agent",
    # governed runtime
    "define_tool": "toolbridge.runtime",
    "define_mcp_tool": "toolbridge.runtime",
    "create_runtime": "toolbridge.runtime",
    "Runtime": "toolbridge.runtime",
    "DeclaredTool": "toolbridge.runtime",
    "RuntimeResult": "toolbridge.runtime",
    # task tools
    "McpToolParser": "toolbridge.tasks",
    "action": "toolbridge.tasks",
    "TaskToolSet": "toolbridge.tasks",
    # manifests
    "load_manifest": "toolbridge.manifest",
    "check_manifest": "toolbridge.manifest",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .content import AudioPart, ImagePart, TextPart
    from .errors import (
        AgentError,
        ConfigError,
        JsonRpcError,
        McpError,
        McpTimeoutError,
        ModelError,
        PolicyError,
        ProtocolError,
        SessionInvalidError,
        ToolbridgeError,
        ToolError,
        TransportError,
    )
    from .tools import ToolProvider, ToolResult, ToolSpec
