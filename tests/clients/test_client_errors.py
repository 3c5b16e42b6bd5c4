"""The one boundary that turns SDK and transport exceptions into toolbridge errors."""

from __future__ import annotations

import asyncio

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from toolbridge.clients._errors import map_exception, map_sdk_errors, unwrap_group
from toolbridge.errors import (
    JsonRpcError,
    ProtocolError,
    SessionInvalidError,
    ToolbridgeError,
    TransportError,
)


def _validation_error() -> ValidationError:
    class Model(BaseModel):
        x: int

    try:
        Model.model_validate({"x": "nope"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def test_server_error_becomes_json_rpc_error_with_its_fields() -> None:
    error = map_exception(MCPError(-32602, "bad params", {"field": "a"}), what="tools/call 'x'")
    assert isinstance(error, JsonRpcError)
    assert error.code == "ERR_MCP_JSON_RPC_ERROR"
    assert (error.rpc_code, error.rpc_message, error.data) == (-32602, "bad params", {"field": "a"})
    assert "tools/call 'x'" in error.message


def test_connection_closed_is_a_transport_error_with_stderr() -> None:
    closed = MCPError(types.CONNECTION_CLOSED, "Connection closed")
    error = map_exception(closed, what="call", stderr_tail=lambda: "Traceback: boom")
    assert isinstance(error, TransportError)
    assert error.code == "ERR_MCP_TRANSPORT"
    assert "Traceback: boom" in error.message
    assert error.__cause__ is closed


def test_a_server_sending_minus_32000_is_not_a_closed_connection() -> None:
    generic = MCPError(types.CONNECTION_CLOSED, "Internal failure", {"detail": 1})
    assert isinstance(map_exception(generic, what="call", connection_closed=lambda: False), JsonRpcError)
    assert isinstance(map_exception(generic, what="call", connection_closed=lambda: True), TransportError)


def test_transport_marker_means_protocol_error() -> None:
    marked = MCPError(-32603, "response too large", {"toolbridge": "protocol", "reason": "message_too_large"})
    error = map_exception(marked, what="call")
    assert isinstance(error, ProtocolError)
    assert error.code == "ERR_MCP_PROTOCOL"


def test_session_rejections() -> None:
    terminated = MCPError(types.INVALID_REQUEST, "Session terminated")
    assert isinstance(map_exception(terminated, what="call"), SessionInvalidError)
    generic = MCPError(types.INTERNAL_ERROR, "Server returned an error response")
    assert isinstance(map_exception(generic, what="call"), JsonRpcError)
    assert isinstance(map_exception(generic, what="call", session_rejected=lambda: True), SessionInvalidError)


@pytest.mark.parametrize(
    ("foreign", "expected"),
    [
        (_validation_error(), ProtocolError),
        (RuntimeError("Invalid structured content returned by tool x"), ProtocolError),
        (OSError(32, "Broken pipe"), TransportError),
        (anyio.BrokenResourceError(), TransportError),
        (anyio.ClosedResourceError(), TransportError),
        (httpx2.ConnectError("refused"), TransportError),
    ],
)
def test_foreign_exceptions(foreign: BaseException, expected: type[ToolbridgeError]) -> None:
    error = map_exception(foreign, what="call")
    assert type(error) is expected
    assert error.__cause__ is foreign


def test_groups_are_unwrapped_to_their_meaningful_leaf() -> None:
    leaf = OSError("pipe closed")
    group = BaseExceptionGroup("outer", [asyncio.CancelledError(), ExceptionGroup("inner", [leaf])])
    assert unwrap_group(group) is leaf
    assert isinstance(map_exception(group, what="connect"), TransportError)


def test_cancellation_and_our_own_errors_pass_through() -> None:
    cancelled = asyncio.CancelledError()
    assert map_exception(cancelled, what="call") is cancelled
    ours = ProtocolError("already translated")
    assert map_exception(ours, what="call") is ours
    other = KeyError("a bug")
    assert map_exception(other, what="call") is other


def test_context_manager_raises_the_mapped_error() -> None:
    with pytest.raises(TransportError) as info, map_sdk_errors("tools/list"):
        raise ExceptionGroup("wrapped", [ConnectionResetError("reset")])
    assert not isinstance(info.value, BaseExceptionGroup)
    assert isinstance(info.value.__cause__, ConnectionResetError)


def test_http_client_repr_hides_credentials_in_the_url() -> None:
    from toolbridge import HttpClient

    text = repr(HttpClient("http://user:hunter2@example.invalid:8080/mcp?api_key=SECRET"))
    assert "hunter2" not in text and "SECRET" not in text and "user" not in text
    assert text == "HttpClient(http://example.invalid:8080)"  # scheme, host and port only


async def test_a_failing_handler_tells_the_server_nothing_but_that_it_failed() -> None:
    """The server is untrusted: a handler's exception text (paths, provider messages) stays local."""
    import mcp_types as types

    from toolbridge.clients._handlers import elicitation_callback, sampling_callback
    from toolbridge.errors import ModelError

    async def leaky(params: object) -> object:
        raise ValueError("/home/alice/.config/token=SECRET")

    async def refused(params: object) -> object:
        raise ModelError("provider said: key sk-SECRET is invalid", code="ERR_MODEL_AUTH")

    for make in (sampling_callback, elicitation_callback):
        for handler, reason in ((leaky, "ValueError"), (refused, "ERR_MODEL_AUTH")):
            answer = await make(handler)(None, None)  # type: ignore[arg-type]
            assert isinstance(answer, types.ErrorData)
            assert "SECRET" not in answer.message
            assert reason in answer.message
