"""A 2026-07-28 upstream sees the calling client's capabilities, not the gateway's.

The SDK's 2026 client writes its own connection's capabilities into every request, so over one
shared connection the upstream would see everything the gateway relays (sampling, elicitation,
roots) whoever called. A real HTTP upstream (tests/gateway/upstreams/caps_server.py) answers
which capabilities its request carried; clients declaring different sets call it through one
gateway at once.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gw_helpers import HERE, free_port, gateway_stdio, stop

CAPS_SERVER = HERE / "upstreams" / "caps_server.py"


@contextmanager
def caps_upstream() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(CAPS_SERVER), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the capabilities upstream did not start listening")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def _manifest(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        f"""kind: Gateway
metadata: {{ name: CapsGate }}
runtime: !ref Policy
toolProviders:
  - provider: !ref Caps
    prefix: caps_
    effects: none
---
kind: Runtime
metadata: {{ name: Policy }}
permissions: {{ allow: [tool:caps_seen] }}
---
kind: Mcp.HttpClient
metadata: {{ name: CapsMcp }}
url: {json.dumps(url)}
protocolVersion: "2026-07-28"
---
kind: AiMcp.ToolProvider
metadata: {{ name: Caps }}
client: !ref CapsMcp
""",
        encoding="utf-8",
    )
    return path


async def _sampling(context: Any, params: Any) -> types.CreateMessageResult:
    raise AssertionError("never asked")


async def _elicitation(context: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("never asked")


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


DECLARING: dict[str, dict[str, Any]] = {
    "none": {},
    "sampling": {"sampling_callback": _sampling},
    "elicitation,roots": {"elicitation_callback": _elicitation, "list_roots_callback": _roots},
    "sampling,elicitation,roots": {
        "sampling_callback": _sampling,
        "elicitation_callback": _elicitation,
        "list_roots_callback": _roots,
    },
}


async def test_a_2026_upstream_sees_each_callers_own_capabilities(tmp_path: Path) -> None:
    with caps_upstream() as url:
        manifest = _manifest(tmp_path, url)
        seen: dict[str, list[str]] = {}

        async def caller(expected: str, callbacks: dict[str, Any]) -> None:
            async with gateway_stdio(manifest, mode="2026-07-28", **callbacks) as client:
                for _ in range(3):
                    result = await client.call_tool("caps_seen", {})
                    assert not result.is_error, result
                    block = result.content[0]
                    assert isinstance(block, types.TextContent)
                    seen.setdefault(expected, []).append(block.text)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for expected, callbacks in DECLARING.items():
                    tg.start_soon(caller, expected, callbacks)
        assert seen == {expected: [expected] * 3 for expected in DECLARING}
