"""A stdio transport for the MCP SDK's client session that survives big and hostile output.

The official SDK keeps its JSON-RPC layer (request ids, pending calls, cancellation, EOF fan-out)
in `mcp.shared.jsonrpc_dispatcher`; a *transport* only turns bytes into messages and messages into
bytes. `StdioTransport` is a drop-in replacement for `mcp.client.stdio.stdio_client` that does
that part differently, because the SDK's own reader re-joins and re-splits its whole buffer for
every chunk (quadratic in the length of a line: a 50 MiB result takes ~17 s), caps nothing, and
lets one bad message end the connection.

The parts:

* `_lines`: bytes -> lines in linear time, with a size cap (`max_message_bytes`, default
  `DEFAULT_MAX_MESSAGE_BYTES` = 128 MiB). A line that starts like a message and passes the cap
  stops being stored and is thrown away up to its newline; junk without a newline (text that
  does not start with `{`) is trimmed up to the next place where a message may start, so the
  message printed after it still arrives.
* `_messages`: a line -> messages. Each line is validated once by pydantic-core (no recursion,
  so no nesting depth can raise anything but a validation error); messages glued to junk or to
  each other are recovered; a line that is no valid message but carries the id of a response
  becomes a synthesized error for that id, so that call fails at once (`ERR_MCP_PROTOCOL`);
  other junk is logged (the first line at INFO, the rest at DEBUG) and skipped.
* `_transport`: the process and the tasks that read its stdout and stderr. One bad line never
  ends the reader; a message of ours that cannot be encoded (a lone surrogate, too deep) is not
  sent and fails only its own request (`invalid_input`, mapped to `ERR_INVALID_INPUT`). stderr
  goes to the logger at INFO whatever its text says, and into a bounded tail for error
  messages. Shutdown is bounded: stdin closed, `shutdown_grace_s`, SIGTERM to the process
  group, `term_grace_s`, SIGKILL.
* `_streams`: the two streams the SDK session reads and writes. A parsed message goes straight
  to the waiting receive loop, and a message of ours is written to stdin in the caller's task:
  no memory streams and no writer task, so no event-loop turn per hand-off (a call costs about
  240 Python calls fewer than through memory streams: `bench/bench_calls.py`). Backpressure is
  kept on both sides: at most one message is held for the session, and a writer waits while
  stdin's buffer is above its high-water mark.
* `_process`: the process-group helpers; `_logs`: rate-limited logging and the SDK
  `logging_callback` for server log notifications.

Synthesized errors carry `error.data = {"toolbridge": "protocol", "reason": REASON, ...}` with
`REASON` one of `"message_too_large"` (plus `size` and `limit` in bytes) or `"malformed"` (plus a
bounded `detail`); the client layer maps that marker to `ProtocolError`. The transport does not
know which ids are pending; an error for an id nobody waits for is dropped by the dispatcher.

Environment policy: by default (`inherit_env=False`) the child gets only the SDK's safe set
(`get_default_environment()`: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`) plus `env`, which
keeps API keys of the host out of a server that was not given them. With `inherit_env=True` it gets
this process's whole environment with `env` merged over it (as a shell would start it).

Usage (what `StdioClient` does)::

    transport = StdioTransport("python", ["server.py"], logger=logging.getLogger("toolbridge.x"))
    async with mcp.Client(transport, logging_callback=make_logging_callback(log)) as client:
        await client.call_tool("echo", {"text": "hi"})
"""

from __future__ import annotations

from ._lines import (
    _HEAD_SCAN_BYTES,
    _TAIL_SCAN_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    JSONRPC_START,
    _Line,
    _LineAssembler,
    _OversizeEnded,
    _OversizeStarted,
)
from ._logs import _RateLimiter, _suffix, make_logging_callback
from ._messages import (
    INVALID_INPUT_MARKER,
    PROTOCOL_MARKER,
    REASON_MALFORMED,
    REASON_TOO_LARGE,
    REASON_UNENCODABLE,
    _is_request_like,
    _Junk,
    _Malformed,
    _mib,
    _parse_line,
    _read_line,
    _scan_head,
    _scan_tail,
    protocol_error_data,
    validation_detail,
)
from ._process import _group_alive
from ._transport import StdioTransport

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "INVALID_INPUT_MARKER",
    "JSONRPC_START",
    "PROTOCOL_MARKER",
    "REASON_MALFORMED",
    "REASON_TOO_LARGE",
    "REASON_UNENCODABLE",
    "_HEAD_SCAN_BYTES",
    "_TAIL_SCAN_BYTES",
    "StdioTransport",
    "_Junk",
    "_Line",
    "_LineAssembler",
    "_Malformed",
    "_OversizeEnded",
    "_OversizeStarted",
    "_RateLimiter",
    "_group_alive",
    "_is_request_like",
    "_mib",
    "_parse_line",
    "_read_line",
    "_scan_head",
    "_scan_tail",
    "_suffix",
    "make_logging_callback",
    "protocol_error_data",
    "validation_detail",
]
