"""`toolbridge gateway` on uvloop and httptools (the `fast` extra, pinned in `test`), or without them.

The gateway process says at `-v` which event loop it runs (`gateway NAME: event loop uvloop.Loop`)
and, over HTTP, which parser uvicorn serves with (`serving HTTP with BoundedHttpToolsProtocol on
...`): both read from the running process, not from what is installed. Each test also makes a
real call through a stdio upstream (a child process started on that loop) and checks the upstream
is gone once the gateway has exited (stdin closed, or SIGTERM). A hostile client gets the same
400 from httptools as from h11 when it sends a request head (or trailers) without end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from gw_helpers import TOOLBRIDGE, calls_of, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from subprocess_helpers import stderr_until

ME = """clients:
  - name: me
    local: true
    permissions: { allow: [tool:up_echo, effect:read] }
"""
ALICE = "alice-token-0123456789"
ALICE_CLIENT = """clients:
  - name: alice
    token: "${{ secrets.aliceToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
"""
OFF = {"TOOLBRIDGE_SPEEDUPS": "off"}


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLBRIDGE_SPEEDUPS"}
    return {**env, **extra}


def _http_gateway(tmp_path: Path, speedups: str) -> subprocess.Popen[bytes]:
    """`toolbridge -v gateway --transport http` on a free port, the speedups on or off."""
    manifest = upstream_manifest(tmp_path, clients=ALICE_CLIENT, binding="    effects: read\n")
    return subprocess.Popen(
        [TOOLBRIDGE, "-v", "gateway", str(manifest), "--transport", "http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env({"ALICE_TOKEN": ALICE, **(OFF if speedups == "off" else {})}),
        start_new_session=True,
    )


def _children(pid: int) -> set[int]:
    """The pids whose parent is `pid` (the gateway's upstreams)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != b"Z":
            found.add(int(entry))
    return found


def _gone(pids: set[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = {p for p in pids if os.path.exists(f"/proc/{p}") and not _zombie(p)}
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _read_line(proc: subprocess.Popen[bytes], seconds: float = 30.0) -> dict[str, Any]:
    """The next JSON-RPC message on the gateway's stdout (fails after `seconds`)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            assert time.monotonic() < deadline, f"no answer from the gateway: {data!r}"
            if sel.select(timeout=0.5):
                chunk = os.read(fd, 1)
                assert chunk, "the gateway closed its stdout"
                data += chunk
    message: dict[str, Any] = json.loads(data)
    return message


async def _echo(url: str, text: str) -> str:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        echoed = await client.call_tool("up_echo", {"text": text})
        return str(echoed.content[0].text)  # type: ignore[union-attr]


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


@pytest.mark.parametrize("speedups", ["on", "off"])
def test_stdio_gateway_runs_on_uvloop_unless_turned_off(tmp_path: Path, speedups: str) -> None:
    import uvloop  # the `test` extra pins it: the gateway must find it too

    assert uvloop.__version__
    manifest = upstream_manifest(tmp_path, clients=ME, binding="    effects: read\n")
    proc = subprocess.Popen(
        [TOOLBRIDGE, "-v", "gateway", str(manifest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(OFF if speedups == "off" else {}),
        start_new_session=True,
    )
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        )
        assert _read_line(proc)["id"] == 1
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "up_echo", "arguments": {"text": "on this loop"}},
            },
        )
        answer = _read_line(proc)
        assert answer["id"] == 2 and answer["result"]["content"][0]["text"] == "on this loop"
        upstreams = _children(proc.pid)
        assert upstreams, "the stdio upstream is a child of the gateway"
        _, err = proc.communicate(timeout=30)  # closes stdin: the client leaves, the gateway stops
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    stderr = err.decode(errors="replace")
    assert proc.returncode == 0, stderr
    loop = re.search(r"gateway TestGate: event loop (\S+)", stderr)
    assert loop is not None, stderr
    if speedups == "on":
        assert loop.group(1) == "uvloop.Loop"
    else:
        assert loop.group(1).startswith("asyncio.") and "uvloop" not in loop.group(1)
    assert _gone(upstreams), "the upstream outlived the gateway"
    assert calls_of(tmp_path) == ["echo"]


@pytest.mark.parametrize("speedups", ["on", "off"])
def test_http_gateway_uses_httptools_and_uvloop_unless_turned_off(tmp_path: Path, speedups: str) -> None:
    proc = _http_gateway(tmp_path, speedups)
    try:
        seen = stderr_until(proc, "/mcp\n", "the gateway listening", seconds=60)
        url = re.search(r"serving TestGate at (http://\S+/mcp)", seen)
        assert url is not None, seen
        assert anyio.run(_echo, url.group(1), "over http") == "over http"
        upstreams = _children(proc.pid)
        assert upstreams, "the stdio upstream is a child of the gateway"
        proc.send_signal(signal.SIGTERM)  # as a service manager stops it
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    stderr = seen + err.decode(errors="replace")
    assert proc.returncode == 0, stderr  # SIGTERM: the upstreams stopped, then a clean exit
    loop = re.search(r"gateway TestGate: event loop (\S+)", stderr)
    parser = re.search(r"serving HTTP with (\w+) on (\S+)", stderr)
    assert loop is not None and parser is not None, stderr
    if speedups == "on":
        assert (loop.group(1), parser.groups()) == (
            "uvloop.Loop",
            ("BoundedHttpToolsProtocol", "uvloop.Loop"),
        )
    else:
        assert "uvloop" not in loop.group(1) and parser.groups() == ("H11Protocol", loop.group(1))
    assert _gone(upstreams), "the upstream outlived the gateway"
    assert calls_of(tmp_path) == ["echo"]


def test_importing_toolbridge_loads_neither(tmp_path: Path) -> None:
    """The speedups are the serving commands' business: `import toolbridge` (and the gateway's
    package) stay as light as without them."""
    code = (
        "import sys, toolbridge, toolbridge.gateway, toolbridge.cli\n"
        "print(sorted(m for m in ('uvloop', 'httptools') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=True)
    assert out.stdout.decode().strip() == "[]"


def _exchange(port: int, data: bytes, seconds: float = 20.0) -> bytes:
    """Send `data` (as much of it as the gateway reads) and return what it answers until it closes
    the connection or `seconds` pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as sock:
        with contextlib.suppress(OSError):  # the gateway may close before it has read it all
            sock.sendall(data)
        answer = b""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
            if b"\r\n\r\n" in answer and b"content-length: 0" not in answer.lower():
                head, _, body = answer.partition(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length: (\d+)", head)
                if length is not None and len(body) >= int(length.group(1)):
                    break
        return answer


@pytest.mark.parametrize("speedups", ["on", "off"])
def test_request_heads_without_end_get_400_with_either_parser(tmp_path: Path, speedups: str) -> None:
    proc = _http_gateway(tmp_path, speedups)
    try:
        seen = stderr_until(proc, "/mcp\n", "the gateway listening", seconds=60)
        parser = re.search(r"serving HTTP with (\w+)", seen)
        assert parser is not None
        assert parser.group(1) == ("BoundedHttpToolsProtocol" if speedups == "on" else "H11Protocol")
        port = int(re.search(r"127\.0\.0\.1:(\d+)/mcp", seen).group(1))  # type: ignore[union-attr]
        start = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
        auth = f"Authorization: Bearer {ALICE}\r\n".encode()
        hostile = {
            "one endless header": start + b"X-Big: " + b"a" * (2 * 1024 * 1024),
            "headers without end": start + b"".join(b"X-%d: v\r\n" % i for i in range(100_000)),
            "an endless URL": b"GET /mcp?" + b"q" * (2 * 1024 * 1024),
            "endless trailers": start
            + auth
            + b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n"
            + b"X-Trailer: "
            + b"t" * (2 * 1024 * 1024),
        }
        for what, data in hostile.items():
            answer = _exchange(port, data)
            assert answer.startswith(b"HTTP/1.1 400 "), (what, answer[:200])
        # what is not a head is not bounded: a 10 KiB header and a 1 MiB body are served
        initialize = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
            "_meta": {"pad": "p" * 2**20},
        }
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}).encode()
        request = (
            start
            + auth
            + b"X-Padding: "
            + b"x" * 10_000
            + b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            + body
        )
        answer = _exchange(port, request)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)


@pytest.mark.parametrize("speedups", ["on", "off"])
async def test_header_values_are_read_without_the_whitespace_around_them(
    monkeypatch: pytest.MonkeyPatch, speedups: str
) -> None:
    """RFC 9110 5.5, as h11 reads them: httptools alone kept the trailing whitespace, and the SDK
    then refused `Mcp-Name: tool  ` as not matching the body's name (a conformance check)."""
    from toolbridge._serving import run_http

    if speedups == "off":
        monkeypatch.setenv("TOOLBRIDGE_SPEEDUPS", "off")
    else:
        monkeypatch.delenv("TOOLBRIDGE_SPEEDUPS", raising=False)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = dict(scope["headers"]).get(b"x-name", b"<none>")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})

    ports: list[int] = []
    listening = anyio.Event()

    def on_listening(_host: str, port: int) -> None:
        ports.append(port)
        listening.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(run_http, app, host="127.0.0.1", port=0, on_listening=on_listening)
            )
            await listening.wait()
            async with await anyio.connect_tcp("127.0.0.1", ports[0]) as stream:
                await stream.send(
                    b"GET / HTTP/1.1\r\nHost: x\r\nX-Name: \t up_echo \t \r\nConnection: close\r\n\r\n"
                )
                answer = b""
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    while True:
                        answer += await stream.receive()
            tg.cancel_scope.cancel()
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nup_echo"), answer
