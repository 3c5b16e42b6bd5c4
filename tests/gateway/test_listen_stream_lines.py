"""A 2026-07-28 `subscriptions/listen` stream sent as JSON lines is heard (clients/_http_limits.py).

The conformance suite's reference server answers `subscriptions/listen` with `application/json` and
one JSON-RPC message per line, kept open. The SDK reads a JSON body whole, so before the fix the
acknowledgement never arrived (the listen timed out), and once the stream ended its lines were
"not a valid JSON-RPC message". `LimitedTransport` re-frames such a stream as SSE events, each
capped and checked like any event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from conformance_ref import reference_server
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolbridge.clients._http_limits import LimitedTransport, _NdjsonAsSse, _SseLimiter, limit_http_client


async def test_the_reference_servers_listen_stream_is_acknowledged_and_delivers_events() -> None:
    with reference_server() as url:
        http = limit_http_client(create_mcp_http_client(), 1 << 20)
        async with http, Client(streamable_http_client(url, http_client=http), mode="auto") as sdk:
            assert sdk.protocol_version == "2026-07-28"
            with anyio.fail_after(30):  # a hang guard: the acknowledgement used to never arrive
                async with sdk.listen(tools_list_changed=True) as stream:
                    assert stream.honored.tools_list_changed
                    await sdk.call_tool("test_trigger_tool_change", {})
                    async for event in stream:
                        assert type(event).__name__ == "ToolsListChanged"
                        break


class _Body(httpx2.AsyncByteStream):
    """A response body arriving in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece

    async def aclose(self) -> None:
        self.closed = True


def _owner(cap: int = 1 << 20) -> LimitedTransport:
    return LimitedTransport(httpx2.AsyncHTTPTransport(), cap)


async def _events(
    pieces: list[bytes], cap: int = 1 << 20, request_id: str = "listen-1"
) -> list[dict[str, object]]:
    """The JSON-RPC messages the SDK would read from the re-framed stream."""
    owner = _owner(cap)
    stream = _SseLimiter(owner, _NdjsonAsSse(owner, _Body(pieces)), request_id)
    raw = b"".join([chunk async for chunk in stream])
    out = []
    for block in raw.split(b"\n\n"):
        data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
        if data:
            out.append(json.loads(b"\n".join(data)))
    return out


def _note(n: int) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"n": n}}
    ).encode()


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=6),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=12),
    crlf=st.booleans(),
)
def test_any_split_of_the_lines_gives_the_same_messages(count: int, cuts: list[int], crlf: bool) -> None:
    end = b"\r\n" if crlf else b"\n"
    body = b"".join(_note(i) + end for i in range(count))
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    got = anyio.run(_events, pieces)
    assert [m["params"] for m in got] == [{"n": i} for i in range(count)]


async def test_a_last_line_without_its_newline_is_delivered_and_blank_lines_are_skipped() -> None:
    got = await _events([b"\n", _note(1) + b"\n\n", _note(2)])
    assert [m["params"] for m in got] == [{"n": 1}, {"n": 2}]


async def test_a_line_above_the_cap_is_dropped_as_it_streams_and_the_next_one_kept() -> None:
    owner = _owner(300)
    reframer = _NdjsonAsSse(owner, _Body([]))
    huge = b'{"jsonrpc":"2.0","method":"x","params":{"pad":"' + b"a" * 5000 + b'"}}'
    out = b""
    for i in range(0, len(huge), 97):  # arriving in small pieces: never held beyond the cap
        out += reframer._feed(huge[i : i + 97])
        assert len(reframer.pending) <= 300
    out += reframer._feed(b"\n" + _note(7) + b"\n")
    assert b"pad" not in out
    assert json.loads(out.split(b"data: ", 1)[1].split(b"\n", 1)[0])["params"] == {"n": 7}


async def test_a_malformed_line_fails_the_listen_request_with_a_protocol_error() -> None:
    got = await _events([_note(1) + b"\n", b"not json\n", _note(2) + b"\n"])
    assert got[0]["method"] == "notifications/tools/list_changed"
    error = got[1]["error"]
    assert isinstance(error, dict)
    assert got[1]["id"] == "listen-1"
    assert error["data"]["toolbridge"] == "protocol"
    assert error["data"]["reason"] == "malformed"
    assert len(got) == 3  # one error per request: what follows passes as it came (the SDK ends the listen)


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "subscriptions/listen"}},
    ],
)
async def test_only_a_listen_request_has_its_json_answer_reframed(body: dict[str, object]) -> None:
    from toolbridge.clients._http_limits import _request_method

    request = httpx2.Request("POST", "http://127.0.0.1/mcp", json=body)
    assert _request_method(request) != "subscriptions/listen"
    listen = httpx2.Request(
        "POST", "http://127.0.0.1/mcp", json={"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen"}
    )
    assert _request_method(listen) == "subscriptions/listen"
