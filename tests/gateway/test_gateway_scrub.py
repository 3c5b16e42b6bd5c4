"""The gateway's outgoing scrubber (`gateway._scrub`) on its own: JSON-RPC text, the SDK write
stream, and HTTP responses (JSON with a corrected length, SSE cut anywhere), with hostile input."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from toolbridge.gateway._scrub import ScrubbedResponses, ScrubbedWrites, scrub_json
from toolbridge.redact import contains_secret, forget_secrets, redact, register_secret

SECRET = "sk-Live-0123456789abcdef"


@pytest.fixture(autouse=True)
def _secret() -> None:
    register_secret(SECRET, name="test key")


def test_a_message_without_a_secret_is_the_same_object() -> None:
    text = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}'
    assert scrub_json(text) is text
    data = text.encode()
    assert scrub_json(data) is data


def test_every_letter_case_and_form_is_scrubbed_and_the_protocol_kept() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"type": "text", "text": f"401 invalid api key {SECRET.upper()}"}],
            "structuredContent": {SECRET.lower(): {"k": [SECRET, 1, None, True]}},
            "_meta": {"x": json.dumps({"nested": SECRET})},
            "isError": True,
        },
    }
    out = scrub_json(json.dumps(message))
    assert SECRET.lower() not in out.lower()
    parsed = json.loads(out)
    assert parsed["id"] == 7 and parsed["jsonrpc"] == "2.0"
    assert parsed["result"]["content"][0]["text"] == "401 invalid api key ***"
    assert parsed["result"]["structuredContent"] == {"***": {"k": ["***", 1, None, True]}}
    assert parsed["result"]["isError"] is True
    # an error answer and a batch
    error = {"jsonrpc": "2.0", "id": "a", "error": {"code": -32001, "message": SECRET, "data": {"v": SECRET}}}
    batch = json.loads(
        scrub_json(json.dumps([error, {"jsonrpc": "2.0", "method": "x", "params": {"m": SECRET}}]))
    )
    assert batch[0] == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32001, "message": "***", "data": {"v": "***"}},
    }
    assert batch[1]["method"] == "x" and batch[1]["params"] == {"m": "***"}


def test_text_that_is_not_json_is_scrubbed_as_text() -> None:
    assert scrub_json(f"not json {SECRET.lower()}") == "not json ***"
    assert scrub_json(f"\xff\x00 {SECRET}".encode("latin-1")) == "\ufffd\x00 ***".encode()


def test_non_ascii_secrets_and_text() -> None:
    register_secret("pässwort-Ünïcode", name="unicode")
    text = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": {"t": "x PÄSSWORT-ÜNÏCODE y ✓"}}, ensure_ascii=False
    )
    assert json.loads(scrub_json(text))["result"]["t"] == "x *** y ✓"
    escaped = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"t": "pässwort-ünïcode"}})  # \\u00e4 form
    assert "***" in scrub_json(escaped)
    assert contains_secret("ascii only, no key ✓") is False


def test_nothing_registered_costs_nothing() -> None:
    forget_secrets()
    text = f'{{"x": "{SECRET}"}}'
    assert scrub_json(text) is text
    assert not contains_secret(text)


_SECRETS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=4, max_size=30
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(secret=_SECRETS, around=_JSON, case=st.sampled_from(["same", "upper", "lower", "swap"]))
def test_a_secret_anywhere_never_survives(secret: str, around: Any, case: str) -> None:
    forget_secrets()
    register_secret(secret)
    shown = {"same": secret, "upper": secret.upper(), "lower": secret.lower(), "swap": secret.swapcase()}[
        case
    ]
    message = {"jsonrpc": "2.0", "id": 3, "result": {"a": around, "b": f"x{shown}y", shown: [around, shown]}}
    out = scrub_json(json.dumps(message))
    assert secret.lower() not in out.lower()
    assert json.loads(out)["id"] == 3


async def test_the_write_stream_scrubs_each_message() -> None:
    send, receive = anyio.create_memory_object_stream[SessionMessage](4)
    writes = ScrubbedWrites(send)
    plain = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "fine"})
    leaky = types.JSONRPCResponse(jsonrpc="2.0", id=5, result={"content": [{"type": "text", "text": SECRET}]})
    await writes.send(SessionMessage(plain))
    await writes.send(SessionMessage(leaky))
    first, second = receive.receive_nowait(), receive.receive_nowait()
    assert first.message is plain
    assert second.message.model_dump(by_alias=True, exclude_unset=True) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"content": [{"type": "text", "text": "***"}]},
    }
    await writes.aclose()


async def _serve(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await ScrubbedResponses(app)({"type": "http", "path": "/mcp"}, receive, send)
    return sent


async def test_a_json_response_is_scrubbed_with_its_length_corrected() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"t": f"key {SECRET.upper()}"}}).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body[:10], "more_body": True})
        await send({"type": "http.response.body", "body": body[10:], "more_body": False})

    sent = await _serve(app)
    start, payload = sent[0], sent[1]["body"]
    assert dict(start["headers"])[b"content-length"] == str(len(payload)).encode()
    assert json.loads(payload)["result"]["t"] == "key ***"
    assert len(sent) == 2


async def test_an_sse_stream_cut_anywhere_is_scrubbed_line_by_line() -> None:
    event = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": SECRET.lower()}}
    )
    stream = f"event: message\r\nid: 1\r\ndata: {event}\r\n\r\n: ping\r\n\r\ndata: {event}\n\n".encode()
    for cut in range(1, len(stream), 7):  # the secret itself is cut in two at some of these
        chunks = [stream[:cut], stream[cut:]]

        async def app(scope: Any, receive: Any, send: Any, chunks: list[bytes] = chunks) -> None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            for i, chunk in enumerate(chunks):
                await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})

        sent = await _serve(app)
        out = b"".join(m.get("body", b"") for m in sent[1:])
        assert SECRET.lower().encode() not in out.lower()
        assert out.count(b"data: ") == 2 and b": ping\r\n" in out
        for line in out.splitlines():
            if line.startswith(b"data: "):
                assert json.loads(line[6:])["params"]["data"] == "***"
        assert sent[-1].get("more_body", False) is False


async def test_a_stream_without_secrets_passes_chunk_for_chunk() -> None:
    chunks = [b"data: {}\n\n", b'data: {"a": 1}\n\n']

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent = await _serve(app)
    assert [m["body"] for m in sent[1:]] == [*chunks, b""]


def test_redact_is_case_insensitive() -> None:
    assert redact(f"a {SECRET.swapcase()} b") == "a *** b"
    assert redact(f"https://{SECRET.lower()}.example.com/") == "https://***.example.com/"


def test_an_inline_credential_env_value_is_registered() -> None:
    from pathlib import Path

    from toolbridge.manifest._build import _stdio_launch
    from toolbridge.manifest._kinds import StdioClientDoc

    env = {"API_KEY": "inline-key-0123", "AUTH_MODE": "none", "PLAIN": "valuevalue", "GH_TOKEN": "short"}
    doc = StdioClientDoc.model_validate(
        {"kind": "Mcp.StdioClient", "metadata": {"name": "x"}, "command": "python", "env": env}
    )
    assert _stdio_launch(doc, Path("."))[2] == env  # the server still gets every value
    assert redact("inline-key-0123 none valuevalue short") == "*** none valuevalue short"


def test_base64_payloads_are_kept_and_text_beside_them_scrubbed() -> None:
    forget_secrets()
    register_secret("abcd")  # short: it occurs by chance in base64 data
    data = "QUJDRGFiY2Q=" * 3
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [
                {"type": "image", "data": data, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "x://y", "blob": data}},
                {"type": "text", "text": "ABCD leaked"},
            ],
            "structuredContent": {"data": "abcd as data"},
        },
    }
    out = json.loads(scrub_json(json.dumps(message)))
    content = out["result"]["content"]
    assert content[0]["data"] == data and content[1]["resource"]["blob"] == data
    assert content[2]["text"] == "*** leaked"
    assert out["result"]["structuredContent"] == {"data": "*** as data"}
