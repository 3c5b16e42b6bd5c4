"""Closing an HTTP connection that holds a `subscriptions/listen` stream leaves nothing to log.

The SDK logs `ERROR mcp.client.streamable_http: Error parsing SSE message` (BrokenResourceError)
when an event arrives on a stream whose session is already closed. The client ends its change
stream and waits until the SDK has abandoned it before closing the session, so many connections
opened and closed in a row (each with a call in flight just before close, the racy case) log no
error at all.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from toolbridge.clients import HttpClient


async def test_many_connections_close_without_an_error_record(
    growing: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    listened = 0
    for i in range(40):
        async with HttpClient(growing.url, timeout=20) as client:
            result = await client.call_tool("echo", {"text": f"#{i}"})
            assert result["content"][0]["text"] == f"#{i}"
            conn = client._conn
            assert conn is not None and conn.channel.wanted  # a listen stream was opened
            listened += conn.channel.epoch
    assert listened >= 1  # the stream was acknowledged before close in some connections
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [f"{r.name}: {r.getMessage()}" for r in errors]
    noisy = [r for r in caplog.records if r.name.startswith(("mcp", "toolbridge"))]
    assert not noisy, [f"{r.levelname} {r.name}: {r.getMessage()}" for r in noisy]
