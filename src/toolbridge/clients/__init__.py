"""MCP clients on the official `mcp` SDK: stdio, Streamable HTTP, and in-process.

All three share one behaviour (see `toolbridge.clients._base`): a single persistent connection,
opened lazily and shared by concurrent calls; both protocol eras (2026-07-28 `server/discover`,
2025-11-25 `initialize`); paginated `list_tools()`, cached while a live change channel exists
(else for `tools_ttl` seconds, see `_changes`);
per-call deadlines that cancel on the server; a dead stdio server restarted by the next call; and
errors from the closed toolbridge set (`toolbridge.errors`).

```python
async with StdioClient("python", ["server.py"]) as client:
    tools = await client.list_tools()               # list[mcp_types.Tool]
    result = await client.call_tool("add", {"a": 1, "b": 2}, timeout=10)
    # result == {"content": [{"type": "text", "text": "3"}], "structuredContent": {...}}
```
"""

from __future__ import annotations

from ._base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TIMEOUT,
    DEFAULT_TOOLS_TTL,
    TOOLS_LIST_PAGE_CAP,
    ConnectionClient,
    McpClient,
    ProgressHandler,
    call_result_to_dict,
)
from ._call_requests import CallRequestKind, CallRequests, RootsHandler
from ._dpop import DPoPAuth, DPoPKey, DPoPKeyStore, DPoPMode, MemoryDPoPKeyStore
from ._handlers import ElicitationHandler, RootsSpec, SamplingHandler, decline_elicitation
from ._http import HttpClient
from ._inprocess import InProcessClient
from ._oauth import (
    FileTokenStorage,
    MemoryTokenStorage,
    TokenStorage,
    client_credentials_auth,
    headless_authorizer,
    id_jag_from_idp,
    identity_assertion_auth,
    oauth_auth,
)
from ._outbound import MAX_ARGUMENT_DEPTH
from ._stdio import StdioClient
from ._workload import AssertionSource, assertion_from_env, assertion_from_file, workload_identity_auth

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOOLS_TTL",
    "MAX_ARGUMENT_DEPTH",
    "TOOLS_LIST_PAGE_CAP",
    "AssertionSource",
    "CallRequestKind",
    "CallRequests",
    "ConnectionClient",
    "DPoPAuth",
    "DPoPKey",
    "DPoPKeyStore",
    "DPoPMode",
    "ElicitationHandler",
    "FileTokenStorage",
    "HttpClient",
    "InProcessClient",
    "McpClient",
    "MemoryDPoPKeyStore",
    "MemoryTokenStorage",
    "ProgressHandler",
    "RootsHandler",
    "RootsSpec",
    "SamplingHandler",
    "StdioClient",
    "TokenStorage",
    "assertion_from_env",
    "assertion_from_file",
    "call_result_to_dict",
    "client_credentials_auth",
    "decline_elicitation",
    "headless_authorizer",
    "id_jag_from_idp",
    "identity_assertion_auth",
    "oauth_auth",
    "workload_identity_auth",
]
