"""The closed set of toolbridge errors.

Every error toolbridge raises on purpose is one of the classes below, and every one carries a
stable string `.code` that programs may match on. The message is for people; the code is the
contract. Foreign exceptions (anyio, the `mcp` SDK, httpx, openai, pydantic) are translated at
one boundary per subsystem and kept as `__cause__`.

```
ToolbridgeError                      root; never raised directly
├── ConfigError                      the caller or a file asked for something invalid
│   │                                (ERR_CONFIG, ERR_INVALID_INPUT, ERR_MANIFEST_*, ERR_TASK_*)
│   └── MissingExtraError            ERR_MISSING_EXTRA: an optional dependency is not installed
│                                    (also an ImportError); the message names the extra
├── McpError                         talking to an MCP server failed
│   ├── TransportError               ERR_MCP_TRANSPORT: the connection or process failed
│   ├── ProtocolError                ERR_MCP_PROTOCOL: the server broke the protocol
│   ├── JsonRpcError                 ERR_MCP_JSON_RPC_ERROR: the server answered with an error
│   ├── McpTimeoutError              ERR_MCP_TIMEOUT: no answer in time (also a TimeoutError)
│   └── SessionInvalidError          ERR_MCP_SESSION_INVALID: the HTTP session was rejected twice
├── ToolError                        a tool ran and failed (ERR_MCP_TOOL_ERROR, ERR_TOOL_*)
├── ModelError                       a model provider failed (ERR_MODEL_*)
├── AgentError                       the agent loop could not go on (ERR_AGENT_*)
└── PolicyError                      the runtime refused or stopped something (PERMISSION_DENIED,
                                     BUDGET_EXCEEDED, GUARD_*, LIMIT_EXCEEDED, TIMEOUT,
                                     OUTCOME_UNKNOWN, ERR_TOOL_PIN_MISMATCH, ...)
```

Codes are documented where they are raised and listed in `docs/errors.md`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .redact import redact, redact_value

__all__ = [
    "AgentError",
    "ConfigError",
    "JsonRpcError",
    "McpError",
    "McpTimeoutError",
    "MissingExtraError",
    "ModelError",
    "PolicyError",
    "ProtocolError",
    "SessionInvalidError",
    "ToolError",
    "ToolbridgeError",
    "TransportError",
    "bounded",
]

MAX_MESSAGE_CHARS = 2000
"""Messages that quote foreign text (server output, stderr) are cut to this length."""


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Cut `text` to at most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


class ToolbridgeError(Exception):
    """Root of every error toolbridge raises.

    Args:
        message: what went wrong, for people.
        code: the stable code; defaults to the class's `default_code`.
        details: extra structured fields (never secrets).

    Every registered secret value (see `toolbridge.redact`) is scrubbed from the message and the
    details as the error is made, so no error can carry one out.
    """

    default_code: ClassVar[str] = "ERR_TOOLBRIDGE"

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None):
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code: str = code or self.default_code
        self.details: dict[str, Any] = redact_value(dict(details or {}))

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form: the code and the message, nothing else."""
        return {"code": self.code, "message": self.message}


class ConfigError(ToolbridgeError, ValueError):
    """Invalid configuration or input from the caller (a developer mistake, not a run-time fault)."""

    default_code = "ERR_CONFIG"


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed: the message names the extra that installs it.

    Also an `ImportError` (an adapter module imported without its framework raises it at import),
    with `.name` the module that is missing and `.extra` the extra to install.
    """

    default_code = "ERR_MISSING_EXTRA"

    def __init__(self, message: str, *, extra: str, module: str | None = None) -> None:
        super().__init__(message, details={"extra": extra})
        self.extra = extra
        self.name = module


class McpError(ToolbridgeError):
    """Base of the errors met while talking to an MCP server."""

    default_code = "ERR_MCP_TRANSPORT"


class TransportError(McpError):
    """The connection failed: the process could not start or died, the pipe or socket broke."""

    default_code = "ERR_MCP_TRANSPORT"


class ProtocolError(McpError):
    """The server sent something the protocol does not allow (malformed, oversized, invalid)."""

    default_code = "ERR_MCP_PROTOCOL"


class JsonRpcError(McpError):
    """The server answered a request with a JSON-RPC error object.

    Attributes:
        rpc_code: the JSON-RPC error code the server sent.
        rpc_message: the server's message (bounded in length).
        data: the server's `data` field, if any.
    """

    default_code = "ERR_MCP_JSON_RPC_ERROR"

    def __init__(self, message: str, *, rpc_code: int, rpc_message: str, data: object = None):
        super().__init__(message, details={"rpc_code": rpc_code})
        self.rpc_code = rpc_code
        self.rpc_message = redact(bounded(rpc_message))
        self.data = redact_value(data)


class McpTimeoutError(McpError, TimeoutError):
    """No answer arrived in time. The server was told the request is cancelled."""

    default_code = "ERR_MCP_TIMEOUT"


class SessionInvalidError(McpError):
    """A Streamable HTTP session was rejected and a fresh one was rejected too."""

    default_code = "ERR_MCP_SESSION_INVALID"


class ToolError(ToolbridgeError):
    """A tool ran and reported failure.

    For MCP tools (`ERR_MCP_TOOL_ERROR`) `server_text` holds the server's own error text,
    bounded in length: useful to a model that can correct its call. `details["is_error"]` is
    True when the server answered with an `isError` result (the governed runtime then knows the
    call's outcome: `failed`, `TOOL_ERROR`).
    """

    default_code = "ERR_MCP_TOOL_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        server_text: str | None = None,
        details: dict[str, Any] | None = None,
    ):
        super().__init__(message, code=code, details=details)
        self.server_text = redact(bounded(server_text)) if server_text is not None else None


class ModelError(ToolbridgeError):
    """A model provider failed: bad key, unknown model, rate limits that outlasted retries, bad output."""

    default_code = "ERR_MODEL"


class AgentError(ToolbridgeError):
    """The agent loop could not go on (collision, unknown tool, step limit, invalid output)."""

    default_code = "ERR_AGENT"


class PolicyError(ToolbridgeError):
    """The governed runtime refused or stopped something.

    `outcome` names the run outcome this error leads to (`blocked`, `failed`,
    `outcome_unknown`, `cancelled`).
    """

    default_code = "PERMISSION_DENIED"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        outcome: str = "blocked",
        details: dict[str, Any] | None = None,
    ):
        super().__init__(message, code=code, details=details)
        self.outcome = outcome
