"""One hung upstream stalls only itself: an upstream whose `tools/list` hangs after it said its
list changed (`upstreams/hang_list_server.py`) beside a healthy one, behind a real stdio gateway.

What must hold while the hang lasts (the test releases it only at the end, so "before the
release" is by construction, not a clock): listings return, from the last good listing, the
hung upstream's tools marked `toolbridge/stale`; a call to the other upstream completes; the
breaker opens and calls to the hung upstream fail fast (`UPSTREAM_UNAVAILABLE`, nothing sent).
After the release: `list_changed` reaches the client, the new listing is served unmarked, the
breaker closes and calls go through again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from gw_helpers import gateway_stdio, journal_calls

SERVER = Path(__file__).resolve().parent / "upstreams" / "hang_list_server.py"
STALE = "toolbridge/stale"


class Heard:
    """The client's notifications, with a way to wait for one."""

    def __init__(self) -> None:
        self.changed = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed += 1
            self.event.set()
            self.event = anyio.Event()


def _manifest(tmp_path: Path) -> Path:
    docs = [
        """kind: Gateway
metadata: { name: Bulkheads }
runtime: !ref Policy
upstreamListTimeoutMs: 300
breakerFailures: 2
breakerCooldownMs: 400
toolProviders:
  - { provider: !ref A, prefix: a_, effects: read }
  - { provider: !ref B, prefix: b_, effects: read }
""",
        """kind: Runtime
metadata: { name: Policy }
profile: durable
journal: journal.db
permissions:
  allow: [tool:a_ping, tool:a_stall, tool:a_fresh, tool:b_ping, tool:b_stall, effect:read]
""",
    ]
    for name in ("A", "B"):
        state = tmp_path / name
        state.mkdir()
        docs.append(
            f"""kind: Mcp.StdioClient
metadata: {{ name: {name}Mcp }}
command: {sys.executable}
args: [{json.dumps(str(SERVER))}, {json.dumps(str(state))}, {name}]
mode: legacy
"""
        )
        docs.append(f"kind: AiMcp.ToolProvider\nmetadata: {{ name: {name} }}\nclient: !ref {name}Mcp\n")
    path = tmp_path / "gateway.yaml"
    path.write_text("---\n".join(docs), encoding="utf-8")
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _listing(result: types.ListToolsResult) -> dict[str, bool]:
    """Tool name -> whether it is marked stale."""
    return {t.name: bool((t.meta or {}).get(STALE)) for t in result.tools}


async def test_a_hung_listing_stalls_only_its_own_upstream(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    heard = Heard()
    release = tmp_path / "A" / "release"
    async with gateway_stdio(manifest, "legacy", message_handler=heard) as client:
        fresh = _listing(await client.list_tools())
        assert fresh == {"a_ping": False, "a_stall": False, "b_ping": False, "b_stall": False}
        assert not (await client.call_tool("a_stall", {})).is_error  # A says its list changed...
        with anyio.fail_after(60):  # ...and its listings hang from now on
            while "list:hung" not in _lines(tmp_path / "A" / "events.log"):  # noqa: ASYNC110 - another process
                await anyio.sleep(0.05)

            # listings return meanwhile, from A's last good listing, its tools marked
            while True:
                listed = _listing(await client.list_tools())
                assert not release.exists()
                if listed["a_ping"]:
                    break
                await anyio.sleep(0.05)
            assert listed == {"a_ping": True, "a_stall": True, "b_ping": False, "b_stall": False}

            # a call to the other upstream completes while A's listing hangs
            answer = await client.call_tool("b_ping", {})
            assert answer.content[0].text == "B pong"  # type: ignore[union-attr]

            # A keeps failing to list: its breaker opens and its calls fail fast, unsent
            while True:
                sent_before = _lines(tmp_path / "A" / "calls.log").count("ping")
                refused = await client.call_tool("a_ping", {})
                if refused.is_error:
                    break
                await anyio.sleep(0.05)
            assert refused.meta is not None and refused.meta["toolbridge/code"] == "UPSTREAM_UNAVAILABLE"
            assert _lines(tmp_path / "A" / "calls.log").count("ping") == sent_before
            assert (await client.call_tool("b_ping", {})).content[0].text == "B pong"  # type: ignore[union-attr]
            assert "list:hung" in _lines(tmp_path / "A" / "events.log") and not release.exists()

            # the release: A lists again, the client hears of it, nothing is marked, calls flow
            changed = heard.changed
            release.touch()
            while True:
                while heard.changed == changed:
                    await heard.event.wait()
                changed = heard.changed
                listed = _listing(await client.list_tools())
                if "a_fresh" in listed and not any(listed.values()):
                    break
            assert listed == {
                "a_fresh": False,
                "a_ping": False,
                "a_stall": False,
                "b_ping": False,
                "b_stall": False,
            }
            while (await client.call_tool("a_ping", {})).is_error:  # noqa: ASYNC110 - the breaker's probe
                await anyio.sleep(0.1)
            assert (await client.call_tool("a_ping", {})).content[0].text == "A pong"  # type: ignore[union-attr]
    # each refused call has its row: the tool's name, the code, nothing sent
    refused_rows = [row[1:] for row in journal_calls(tmp_path) if row[3] == "UPSTREAM_UNAVAILABLE"]
    assert refused_rows and set(refused_rows) == {("a_ping", "not_started", "UPSTREAM_UNAVAILABLE", False)}
