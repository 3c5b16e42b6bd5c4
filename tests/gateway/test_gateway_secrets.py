"""Nothing secret leaves the gateway: a hostile upstream echoes the secret the gateway gave it
(in every kind of answer, in three letter cases) and the raw SDK client, over stdio and over HTTP,
never receives it; the gateway's stderr has neither the secret nor raw terminal escapes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, clients_block, free_port, policy_doc, stdio_upstream, stop
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).resolve().parent
SERVER = HERE / "upstreams" / "secret_echo_server.py"
SECRET = "sk-Live-Echo-0123456789abcdef"
TOKEN = "alice-token-0123456789"
ENV = {"ECHO_KEY": SECRET, "ALICE_TOKEN": TOKEN}
GRANTS = (
    'tool:sx_leak, tool:sx_leak_error, tool:sx_leak_rpc, tool:sx_leak_log, effect:read, "resources:*", '
    '"prompts:*", "logs:*"'
)


def secret_manifest(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"""kind: Gateway
metadata: {{ name: SecretGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Echo
    prefix: sx_
    effects: read
{clients_block(("me", GRANTS), ("alice", GRANTS))}
{policy_doc()}{stdio_upstream("Echo", [sys.executable, str(SERVER)], env={"ECHO_SECRET": "echoKey"})}""",
        encoding="utf-8",
    )
    return path


def _base_env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}  # the checkout under test
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"), **keep}


async def exercise(client: Client) -> dict[str, Any]:
    """Ask for everything the upstream can leak through; return what the client made of it."""
    seen: dict[str, Any] = {"progress": []}
    with contextlib.suppress(MCPError):  # the 2026-07-28 era has no logging/setLevel
        await client.set_logging_level("debug")
    tools = await client.list_tools()
    seen["tools"] = sorted(t.name for t in tools.tools)
    seen["leak"] = await client.call_tool("sx_leak", {})
    seen["leak_error"] = await client.call_tool("sx_leak_error", {})
    with pytest.raises(MCPError) as raised:
        result = await client.call_tool("sx_leak_rpc", {})
        if isinstance(result, types.CallToolResult) and result.is_error:  # also acceptable: an error result
            raise MCPError(-1, str(result.content))
    seen["leak_rpc"] = str(raised.value)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen["progress"].append(message)

    seen["leak_log"] = await client.call_tool("sx_leak_log", {}, progress_callback=progress)
    seen["prompts"] = await client.list_prompts()
    seen["prompt"] = await client.get_prompt("sx_keyed", {"who": "me"})
    seen["resources"] = await client.list_resources()
    seen["templates"] = await client.list_resource_templates()
    seen["read"] = await client.read_resource("secret://key")
    seen["complete"] = await client.complete(
        types.PromptReference(type="ref/prompt", name="sx_keyed"), {"name": "who", "value": ""}
    )
    return seen


def assert_relayed_without_secret(seen: dict[str, Any], wire: bytes, stderr: bytes) -> None:
    # what leaked was relayed, scrubbed (not dropped): the client got the answers
    assert seen["tools"] == ["sx_leak", "sx_leak_error", "sx_leak_log", "sx_leak_rpc"]
    leak = seen["leak"]
    assert "401 invalid api key ***" in leak.content[0].text
    assert leak.structured_content is not None and leak.structured_content["key"] == "***"
    assert seen["leak_error"].is_error
    assert "401 invalid api key ***" in seen["leak_error"].content[0].text
    assert seen["complete"].completion.values[-1] == "plain"
    assert "the key: ***" in seen["read"].contents[0].text
    # the whole traffic, every letter case and form
    low = wire.lower()
    assert wire, "no traffic recorded"
    for form in (SECRET, json.dumps({"k": SECRET})[8:-2]):
        assert form.lower().encode() not in low
    assert b"sk-live-echo" not in low
    # the gateway's stderr: no secret, no raw terminal control
    assert SECRET.lower().encode() not in stderr.lower()
    assert b"\x1b" not in stderr and b"\x07" not in stderr and b"\x9d" not in stderr
    assert b"\ntoolbridge: all checks passed" not in stderr


def traffic_params(manifest: Path, wire: Path, err: Path) -> StdioServerParameters:
    """`toolbridge gateway MANIFEST` over stdio, its output copied to `wire` on the way (tee)."""
    script = '"$0" gateway "$1" 2>"$2" | tee "$3"'
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", script, TOOLBRIDGE, str(manifest), str(err), str(wire)],
        env={**_base_env(), **ENV},
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_nothing_secret_reaches_a_stdio_client(tmp_path: Path, mode: str) -> None:
    manifest = secret_manifest(tmp_path)
    wire, err = tmp_path / "wire.jsonl", tmp_path / "stderr.txt"
    logs: list[Any] = []

    async def heard(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with Client(traffic_params(manifest, wire, err), mode=mode, logging_callback=heard) as client:  # type: ignore[arg-type]
        seen = await exercise(client)
    traffic = wire.read_bytes()
    assert b'"plain"' in traffic, "the recorded traffic ends before the last answer"
    assert_relayed_without_secret(seen, traffic, err.read_bytes())
    if mode == "legacy":  # a 2026-07-28 client asks for logs per request (not done here)
        assert logs, "the upstream's log notifications were not relayed"
        assert any(p.data and "***" in json.dumps(p.data) for p in logs)
    assert any(m and "***" in m for m in seen["progress"])


class _Recording(httpx2.AsyncBaseTransport):
    """An HTTP transport that keeps every response byte (headers and bodies, SSE included)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        for key, value in response.headers.raw:
            self.seen.extend(key + b": " + value + b"\n")
        stream, seen = response.stream, self.seen

        class Recorded(httpx2.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in stream:  # type: ignore[union-attr]
                    seen.extend(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await stream.aclose()  # type: ignore[union-attr]

        response.stream = Recorded()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextmanager
def http_gateway(manifest: Path, err: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    with err.open("wb") as errfile:
        proc = subprocess.Popen(
            [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", str(port), *extra],
            env={**_base_env(), **ENV},
            stdout=subprocess.DEVNULL,
            stderr=errfile,
            start_new_session=True,
        )
    try:
        import socket

        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the gateway exited {proc.returncode}: {err.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the gateway did not start listening within 60 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


@asynccontextmanager
async def recorded_client(url: str, mode: str, recording: _Recording, **kwargs: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, transport=recording) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client,  # type: ignore[arg-type]
    ):
        yield client


@pytest.mark.parametrize(("stateless", "mode"), [(False, "legacy"), (True, "legacy"), (False, "auto")])
async def test_nothing_secret_reaches_an_http_client(tmp_path: Path, stateless: bool, mode: str) -> None:
    manifest = secret_manifest(tmp_path)
    err = tmp_path / "stderr.txt"
    recording = _Recording()
    extra = ("--stateless",) if stateless else ()
    with http_gateway(manifest, err, *extra) as url:
        async with recorded_client(url, mode, recording) as client:
            seen = await exercise(client)
    assert_relayed_without_secret(seen, bytes(recording.seen), err.read_bytes())
    assert b"***" in recording.seen
