"""An upstream's error text is redacted before it is cut: a secret that straddles the cut at
`ERROR_TEXT_LIMIT` characters leaves no head behind, in a JSON-RPC error (tools and the side
door alike) and in an `isError` result's text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp.shared.exceptions import MCPError

from toolbridge.errors import JsonRpcError
from toolbridge.gateway._core import ERROR_TEXT_LIMIT, upstream_error, upstream_rpc_error
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
