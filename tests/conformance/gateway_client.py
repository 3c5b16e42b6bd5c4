"""The conformance client scenarios through `toolbridge gateway`: the client under test is
`client.py`, talking to a gateway whose one upstream is the scenario's server.

Run by the suite's runner like `client.py` (the scenario's URL last, `MCP_CONFORMANCE_SCENARIO`
and `MCP_CONFORMANCE_CONTEXT` in the environment). It lists the scenario server's tools (to grant
each by name), writes a manifest with one `Mcp.HttpClient` upstream at the protocol version it
negotiates (the gateway conformance test's manifest),
starts `toolbridge gateway --transport http` on a free port, and runs `client.py` against the
gateway's URL. So what the scenario checks of a client is checked of the gateway's own upstream
side, with what it serves downstream in between: a tool schema must come through the gateway's
listing unchanged, and a call's `Mcp-Param-*` headers must be made again upstream.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gateway"))
sys.path.insert(0, str(HERE.parent))  # subprocess_helpers, which gw_helpers uses

from gw_helpers import gateway_http  # noqa: E402
from test_gateway_conformance import _manifest as manifest  # noqa: E402

from toolbridge.clients import HttpClient  # noqa: E402


async def tool_names(url: str) -> tuple[list[str], str]:
    """The scenario server's tools, and the protocol version it negotiates."""
    async with HttpClient(url, timeout=30) as client:
        names = [tool.name for tool in await client.list_tools()]
        return names, client.protocol_version or "2025-11-25"


def main() -> int:
    url = sys.argv[-1]
    names, version = asyncio.run(tool_names(url))
    with (
        tempfile.TemporaryDirectory(prefix="gateway-client-") as tmp,
        gateway_http(manifest(Path(tmp), url, version, names)) as gw,
    ):
        return subprocess.run(
            [sys.executable, str(HERE / "client.py"), gw], check=False, timeout=120
        ).returncode


if __name__ == "__main__":
    sys.exit(main())
