"""Approvals through elicitation, and pinning against a rug pull (withheld until the lock says so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, calls_of, gateway_http, gateway_stdio, upstream_manifest
from mcp import Client
from mcp.shared.exceptions import MCPError

APPROVAL_BINDING = """    effects: read
    exclude: [note]
  - provider: !ref Up
    prefix: w_
    include: [note]
    effects: write
    approval: write
"""
WRITER = """clients:
  - name: me
    local: true
    permissions:
      allow: [tool:up_echo, tool:up_mutate, tool:up_evil, effect:read, tool:w_note, effect:write]
"""


async def test_approval_granted_declined_cancelled_and_timed_out(tmp_path: Path) -> None:
    manifest = upstream_manifest(
        tmp_path, clients=WRITER, binding=APPROVAL_BINDING, gateway="approvalTimeoutMs: 1500"
    )
    answers = ["yes", "no", "decline", "cancel", "slow"]
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        answer = answers.pop(0)
        if answer == "slow":
            await anyio.sleep(5)
        if answer in ("yes", "no"):
            return types.ElicitResult(action="accept", content={"approve": answer == "yes"})
        return types.ElicitResult(action=answer)  # type: ignore[arg-type]

    async with gateway_stdio(manifest, elicitation_callback=elicit) as client:
        ok = await client.call_tool("w_note", {"text": "remember the milk"})
        assert not ok.is_error and ok.content[0].text == "noted"  # type: ignore[union-attr]
        for why in (
            "approval declined",
            "approval declined",
            "approval cancelled",
            "approval not given in time",
        ):
            refused = await client.call_tool("w_note", {"text": "again"})
            assert refused.is_error and refused.meta is not None
            assert refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
            assert refused.content[0].text.endswith(why)  # type: ignore[union-attr]
        # a tool whose binding needs no approval is not asked about
        assert not (await client.call_tool("up_echo", {"text": "x"})).is_error
    assert len(asked) == 5
    question = "Allow `w_note` of server `Up` (write) with these arguments?"
    assert asked[0] == f'{question}\n- text: "remember the milk"'
    assert calls_of(tmp_path) == ["note", "echo"]  # declined calls never reached the upstream


async def test_approval_without_elicitation_is_blocked_and_says_why(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=WRITER, binding=APPROVAL_BINDING)
    async with gateway_stdio(manifest) as client:
        refused = await client.call_tool("w_note", {"text": "x"})
        assert refused.is_error
        assert "no elicitation" in refused.content[0].text  # type: ignore[union-attr]
    assert calls_of(tmp_path) == []


async def test_rug_pull_is_withheld_until_the_lock_approves_it(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=WRITER, binding=APPROVAL_BINDING, lock="tools.lock")
    lock = tmp_path / "tools.lock"
    await anyio.run_process([TOOLBRIDGE, "lock", "--out", str(lock), str(manifest)])
    (tmp_path / "state" / "calls.log").unlink(missing_ok=True)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
            root = getattr(message, "root", message)
            if isinstance(root, types.ToolListChangedNotification):
                changed.set()

    async with gateway_stdio(manifest, message_handler=on_message) as client:
        before = {t.name: t.description for t in (await client.list_tools()).tools}
        assert set(before) == {"up_echo", "up_mutate", "w_note"}
        await client.call_tool("up_mutate", {})  # the upstream rewrites echo and adds `evil`
        with anyio.fail_after(20):
            await changed.wait()
        after = {t.name for t in (await client.list_tools()).tools}
        assert after == {"up_mutate", "w_note"}, "the changed echo and the new evil must be withheld"
        with pytest.raises(MCPError) as info:  # withheld: the gateway does not serve it
            await client.call_tool("up_echo", {"text": "x"})
        assert info.value.error.code == types.INVALID_PARAMS
        # a person reviews the change and renews the lock: the gateway re-reads it
        changed = anyio.Event()
        await anyio.run_process([TOOLBRIDGE, "lock", "--out", str(lock), str(manifest)])
        with anyio.fail_after(20):
            await changed.wait()
        renewed = {t.name: t.description for t in (await client.list_tools()).tools}
        assert set(renewed) == {"up_echo", "up_evil", "up_mutate", "w_note"}
        assert "ssh" in renewed["up_echo"]
    assert "echo" not in calls_of(tmp_path)  # the withheld tool never reached the upstream


@pytest.mark.parametrize("transport", ["stdio", "stateless-http"])
async def test_approval_in_the_2026_era_is_an_input_required_round_trip(
    tmp_path: Path, transport: str
) -> None:
    """2026-07-28 has no server-to-client request on a call: the gateway answers `input_required`
    with the approval form, bound to the tool and its exact arguments; the client's retry carries
    the person's answer."""
    runtime = "permissions: { allow: [tool:w_note, effect:write] }"  # no clients: stdio and HTTP alike
    manifest = upstream_manifest(tmp_path, binding=APPROVAL_BINDING, runtime=runtime)
    answers = ["yes", "no"]
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": answers.pop(0) == "yes"})

    async def exercise(client: Any) -> None:
        assert client.protocol_version == "2026-07-28"
        ok = await client.call_tool("w_note", {"text": "first"})
        assert not ok.is_error and ok.content[0].text == "noted"
        refused = await client.call_tool("w_note", {"text": "second"})
        assert refused.is_error and refused.content[0].text.endswith("approval declined")

    if transport == "stdio":
        async with gateway_stdio(manifest, "auto", elicitation_callback=elicit) as client:
            await exercise(client)
    else:
        with gateway_http(manifest, "--stateless") as url:
            async with Client(url, elicitation_callback=elicit) as client:
                await exercise(client)
    assert len(asked) == 2 and "first" in asked[0] and "second" in asked[1]
    assert calls_of(tmp_path) == ["note"]
