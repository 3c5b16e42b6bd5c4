"""What a failed tool call's answer proves: which failures are known, and which leave it unknown.

A call whose request was sent and which failed is `outcome_unknown` when the tool has effects
(the remote side may have acted), unless the server **answered** in a way that says what
happened. Two answers do:

- a result with `isError: true` (a `ToolError` whose `details["is_error"]` is True):
  `failed` / `TOOL_ERROR`: the tool ran and said it failed; its result is the answer.
- a 2026-07-28 `InputRequiredResult` (a `ToolError` whose `details["input_required"]` is True):
  `failed` / `INPUT_REQUIRED`: the server asked for input (elicitation, sampling, roots) before
  it would finish; the caller's answer is a new call with its own row. Charged nothing.
- JSON-RPC -32700 (parse error), -32600 (invalid request), -32601 (method not found), -32602
  (invalid params): `failed` / `TOOL_REFUSED`: JSON-RPC's codes for a request refused before it
  is processed.
- JSON-RPC -32020 (header mismatch), -32021 (missing required client capability), -32022
  (unsupported protocol version), -32042 (URL elicitation required): `failed` / `TOOL_REFUSED`:
  MCP's codes for a request the server will not run as sent.
- JSON-RPC -32603 (internal error), the server-defined -32000 … -32099 (such as -32001 request
  timeout) and any other code: not an answer about the outcome: `outcome_unknown`
  (`OUTCOME_UNKNOWN`, cause `TOOL_FAILED`) for a tool with effects, else `failed` /
  `TOOL_FAILED`. The server may have acted before it failed.

The server's word is taken for what it says (a server that acts and then answers -32602 is
out of scope, as one that lies in a result is). A refused call is charged nothing (the tool did
not run); a tool error is charged in full (it ran).
"""

from __future__ import annotations

from typing import Final

from ..errors import JsonRpcError, ToolbridgeError, ToolError

__all__ = ["REFUSED_RPC_CODES", "answered_code"]

REFUSED_RPC_CODES: Final[frozenset[int]] = frozenset(
    {-32700, -32600, -32601, -32602, -32020, -32021, -32022, -32042}
)
"""JSON-RPC error codes that mean the server refused the request before acting on it."""


def answered_code(exc: ToolbridgeError) -> str | None:
    """The run code of a failure the server answered with (see the module), or None."""
    if isinstance(exc, ToolError) and exc.details.get("is_error") is True:
        return "TOOL_ERROR"
    if isinstance(exc, ToolError) and exc.details.get("input_required") is True:
        return "INPUT_REQUIRED"
    if isinstance(exc, JsonRpcError) and exc.rpc_code in REFUSED_RPC_CODES:
        return "TOOL_REFUSED"
    return None
