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
import logging
from typing import TYPE_CHECKING, Any

from ._version import __version__

# A library never prints through the root logger's last-resort handler: with no logging
# configured, toolbridge's records go nowhere (configure `logging` to see them).
logging.getLogger("toolbridge").addHandler(logging.NullHandler())

_EXPORTS: dict[str, str] = {
    # toolbridge.errors
    "ToolbridgeError": "toolbridge.errors",
    "ConfigError": "toolbridge.errors",
    "McpError": "toolbridge.errors",
    "TransportError": "toolbridge.errors",
    "ProtocolError": "toolbridge.errors",
    "JsonRpcError": "toolbridge.errors",
    "McpTimeoutError": "toolbridge.errors",
    "MissingExtraError": "toolbridge.errors",
    "SessionInvalidError": "toolbridge.errors",
    "ToolError": "toolbridge.errors",
    "ModelError": "toolbridge.errors",
    "AgentError": "toolbridge.errors",
    "PolicyError": "toolbridge.errors",
    # toolbridge.content
    "TextPart": "toolbridge.content",
    "ImagePart": "toolbridge.content",
    "AudioPart": "toolbridge.content",
    # toolbridge.tools
    "ToolSpec": "toolbridge.tools",
    "ToolResult": "toolbridge.tools",
    "ToolProvider": "toolbridge.tools",
    # toolbridge.clients
    "oauth_auth": "toolbridge.clients",
    "headless_authorizer": "toolbridge.clients",
    "identity_assertion_auth": "toolbridge.clients",
    "id_jag_from_idp": "toolbridge.clients",
    "client_credentials_auth": "toolbridge.clients",
    "workload_identity_auth": "toolbridge.clients",
    "FileTokenStorage": "toolbridge.clients",
    "MemoryTokenStorage": "toolbridge.clients",
    "TokenStorage": "toolbridge.clients",
    "StdioClient": "toolbridge.clients",
    "HttpClient": "toolbridge.clients",
    "InProcessClient": "toolbridge.clients",
    "McpClient": "toolbridge.clients",
    # toolbridge.bridge
    "McpToolProvider": "toolbridge.bridge",
    # toolbridge.functions
    "FunctionTools": "toolbridge.functions",
    # toolbridge.agent
    "Agent": "toolbridge.agent",
    "ToolBinding": "toolbridge.agent",
    "RunResult": "toolbridge.agent",
    "Usage": "toolbridge.agent",
    "Model": "toolbridge.agent",
    "ScriptedModel": "toolbridge.agent",
    "FunctionModel": "toolbridge.agent",
    "OpenAIModel": "toolbridge.agent",
    "AnthropicModel": "toolbridge.agent",
    "GeminiModel": "toolbridge.agent",
    "ModelSamplingHandler": "toolbridge.agent",
    "AgentHooks": "toolbridge.agent",
    "RunContext": "toolbridge.agent",
    "Step": "toolbridge.agent",
    "ToolCallRecord": "toolbridge.agent",
    "ToolResultRecord": "toolbridge.agent",
    "ModelRequest": "toolbridge.agent",
    "ModelResponse": "toolbridge.agent",
    "ModelPrices": "toolbridge.agent",
    # toolbridge.runtime
    "define_tool": "toolbridge.runtime",
    "define_mcp_tool": "toolbridge.runtime",
    "create_runtime": "toolbridge.runtime",
    "Runtime": "toolbridge.runtime",
    "DeclaredTool": "toolbridge.runtime",
    "RuntimeResult": "toolbridge.runtime",
    "GovernedSession": "toolbridge.runtime",
    "RunOutcomeEvent": "toolbridge.runtime",
    "Verdict": "toolbridge.runtime",
    # toolbridge.tasks
    "McpToolParser": "toolbridge.tasks",
    "action": "toolbridge.tasks",
    "TaskToolSet": "toolbridge.tasks",
    # toolbridge.manifest
    "manifest_json_schema": "toolbridge.manifest",
    "load_manifest": "toolbridge.manifest",
    "check_manifest": "toolbridge.manifest",
    # toolbridge.redact
    "register_secret": "toolbridge.redact",
    # toolbridge.sanitize
    "clean_text": "toolbridge.sanitize",
    # toolbridge.pinning
    "PinnedToolProvider": "toolbridge.pinning",
    "lock_server": "toolbridge.pinning",
    "read_lock": "toolbridge.pinning",
    "write_lock": "toolbridge.pinning",
}

__all__ = [
    "Agent",
    "AgentError",
    "AgentHooks",
    "AnthropicModel",
    "AudioPart",
    "ConfigError",
    "DeclaredTool",
    "FileTokenStorage",
    "FunctionModel",
    "FunctionTools",
    "GeminiModel",
    "GovernedSession",
    "HttpClient",
    "ImagePart",
    "InProcessClient",
    "JsonRpcError",
    "McpClient",
    "McpError",
    "McpTimeoutError",
    "McpToolParser",
    "McpToolProvider",
    "MemoryTokenStorage",
    "MissingExtraError",
    "Model",
    "ModelError",
    "ModelPrices",
    "ModelRequest",
    "ModelResponse",
    "ModelSamplingHandler",
    "OpenAIModel",
    "PinnedToolProvider",
    "PolicyError",
    "ProtocolError",
    "RunContext",
    "RunOutcomeEvent",
    "RunResult",
    "Runtime",
    "RuntimeResult",
    "ScriptedModel",
    "SessionInvalidError",
    "StdioClient",
    "Step",
    "TaskToolSet",
    "TextPart",
    "TokenStorage",
    "ToolBinding",
    "ToolCallRecord",
    "ToolError",
    "ToolProvider",
    "ToolResult",
    "ToolResultRecord",
    "ToolSpec",
    "ToolbridgeError",
    "TransportError",
    "Usage",
    "Verdict",
    "__version__",
    "action",
    "check_manifest",
    "clean_text",
    "client_credentials_auth",
    "create_runtime",
    "define_mcp_tool",
    "define_tool",
    "headless_authorizer",
    "id_jag_from_idp",
    "identity_assertion_auth",
    "load_manifest",
    "lock_server",
    "manifest_json_schema",
    "oauth_auth",
    "read_lock",
    "register_secret",
    "workload_identity_auth",
    "write_lock",
]


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
    from .agent import (
        Agent as Agent,
    )
    from .agent import (
        AgentHooks as AgentHooks,
    )
    from .agent import (
        AnthropicModel as AnthropicModel,
    )
    from .agent import (
        FunctionModel as FunctionModel,
    )
    from .agent import (
        GeminiModel as GeminiModel,
    )
    from .agent import (
        Model as Model,
    )
    from .agent import (
        ModelPrices as ModelPrices,
    )
    from .agent import (
        ModelRequest as ModelRequest,
    )
    from .agent import (
        ModelResponse as ModelResponse,
    )
    from .agent import (
        ModelSamplingHandler as ModelSamplingHandler,
    )
    from .agent import (
        OpenAIModel as OpenAIModel,
    )
    from .agent import (
        RunContext as RunContext,
    )
    from .agent import (
        RunResult as RunResult,
    )
    from .agent import (
        ScriptedModel as ScriptedModel,
    )
    from .agent import (
        Step as Step,
    )
    from .agent import (
        ToolBinding as ToolBinding,
    )
    from .agent import (
        ToolCallRecord as ToolCallRecord,
    )
    from .agent import (
        ToolResultRecord as ToolResultRecord,
    )
    from .agent import (
        Usage as Usage,
    )
    from .bridge import (
        McpToolProvider as McpToolProvider,
    )
    from .clients import (
        FileTokenStorage as FileTokenStorage,
    )
    from .clients import (
        HttpClient as HttpClient,
    )
    from .clients import (
        InProcessClient as InProcessClient,
    )
    from .clients import (
        McpClient as McpClient,
    )
    from .clients import (
        MemoryTokenStorage as MemoryTokenStorage,
    )
    from .clients import (
        StdioClient as StdioClient,
    )
    from .clients import (
        TokenStorage as TokenStorage,
    )
    from .clients import (
        client_credentials_auth as client_credentials_auth,
    )
    from .clients import (
        headless_authorizer as headless_authorizer,
    )
    from .clients import (
        id_jag_from_idp as id_jag_from_idp,
    )
    from .clients import (
        identity_assertion_auth as identity_assertion_auth,
    )
    from .clients import (
        oauth_auth as oauth_auth,
    )
    from .clients import (
        workload_identity_auth as workload_identity_auth,
    )
    from .content import (
        AudioPart as AudioPart,
    )
    from .content import (
        ImagePart as ImagePart,
    )
    from .content import (
        TextPart as TextPart,
    )
    from .errors import (
        AgentError as AgentError,
    )
    from .errors import (
        ConfigError as ConfigError,
    )
    from .errors import (
        JsonRpcError as JsonRpcError,
    )
    from .errors import (
        McpError as McpError,
    )
    from .errors import (
        McpTimeoutError as McpTimeoutError,
    )
    from .errors import (
        MissingExtraError as MissingExtraError,
    )
    from .errors import (
        ModelError as ModelError,
    )
    from .errors import (
        PolicyError as PolicyError,
    )
    from .errors import (
        ProtocolError as ProtocolError,
    )
    from .errors import (
        SessionInvalidError as SessionInvalidError,
    )
    from .errors import (
        ToolbridgeError as ToolbridgeError,
    )
    from .errors import (
        ToolError as ToolError,
    )
    from .errors import (
        TransportError as TransportError,
    )
    from .functions import (
        FunctionTools as FunctionTools,
    )
    from .manifest import (
        check_manifest as check_manifest,
    )
    from .manifest import (
        load_manifest as load_manifest,
    )
    from .manifest import (
        manifest_json_schema as manifest_json_schema,
    )
    from .pinning import (
        PinnedToolProvider as PinnedToolProvider,
    )
    from .pinning import (
        lock_server as lock_server,
    )
    from .pinning import (
        read_lock as read_lock,
    )
    from .pinning import (
        write_lock as write_lock,
    )
    from .redact import (
        register_secret as register_secret,
    )
    from .runtime import (
        DeclaredTool as DeclaredTool,
    )
    from .runtime import (
        GovernedSession as GovernedSession,
    )
    from .runtime import (
        RunOutcomeEvent as RunOutcomeEvent,
    )
    from .runtime import (
        Runtime as Runtime,
    )
    from .runtime import (
        RuntimeResult as RuntimeResult,
    )
    from .runtime import (
        Verdict as Verdict,
    )
    from .runtime import (
        create_runtime as create_runtime,
    )
    from .runtime import (
        define_mcp_tool as define_mcp_tool,
    )
    from .runtime import (
        define_tool as define_tool,
    )
    from .sanitize import (
        clean_text as clean_text,
    )
    from .tasks import (
        McpToolParser as McpToolParser,
    )
    from .tasks import (
        TaskToolSet as TaskToolSet,
    )
    from .tasks import (
        action as action,
    )
    from .tools import (
        ToolProvider as ToolProvider,
    )
    from .tools import (
        ToolResult as ToolResult,
    )
    from .tools import (
        ToolSpec as ToolSpec,
    )
