"""An upstream's error text is redacted before it is cut: a secret that straddles the cut at
`ERROR_TEXT_LIMIT` characters leaves no head behind, in a JSON-RPC error (tools and the side
door alike) and in an `isError` result's text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError

from toolbridge.errors import JsonRpcError
from toolbridge.gateway._answers import ERROR_TEXT_LIMIT, upstream_error, upstream_rpc_error
from toolbridge.gateway._side import relayed_error
from toolbridge.redact import forget_secrets, register_secret

SECRET = "sk-straddle-0123456789abcdef"


@pytest.fixture(autouse=True)
def _secret() -> Iterator[None]:
    forget_secrets()
    register_secret(SECRET)
    yield
    forget_secrets()


def straddling() -> str:
    return "x" * (ERROR_TEXT_LIMIT - 10) + SECRET + " tail"


def test_a_secret_across_the_cut_leaves_no_head() -> None:
    head = SECRET[:10]
    exc = JsonRpcError("boom", rpc_code=-32603, rpc_message="ok")
    exc.rpc_message = straddling()  # the gateway's own cut, whatever the error held
    for message in (
        upstream_rpc_error(exc).error.message,
        relayed_error(MCPError(-32002, straddling())).error.message,
        str(upstream_error({"content": [{"type": "text", "text": straddling()}]}, 10**6).content[0].text),  # type: ignore[union-attr]
    ):
        assert head not in message, message[-40:]
        assert len(message) <= ERROR_TEXT_LIMIT + 3


def test_a_relayed_read_error_names_the_uri_only_when_it_is_the_one_asked() -> None:
    uri = "test://missing"
    # a handshake-era server's -32602 without data: the read's one parameter is named (SEP-2164)
    assert relayed_error(MCPError(-32602, "not found"), uri).error.data == {"uri": uri}
    # the server named it: kept; it named another URI, or sent other data: nothing passes
    assert relayed_error(MCPError(-32602, "nf", {"uri": uri}), uri).error.data == {"uri": uri}
    assert relayed_error(MCPError(-32602, "nf", {"uri": "file:///etc/passwd"}), uri).error.data is None
    assert relayed_error(MCPError(-32602, "nf", {"token": SECRET}), uri).error.data == {"uri": uri}
    # other codes keep no data of their own, and a request that was not a read adds none
    assert relayed_error(MCPError(-32002, "nf"), uri).error.data is None
    assert relayed_error(MCPError(-32602, "bad"), None).error.data is None
