"""`toolbridge gateway` over stdio, driven by the official SDK client in both protocol eras."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, calls_of, gateway_stdio, upstream_manifest
from mcp.shared.exceptions import MCPError

from toolbridge.runtime._journal_sqlite import Journal

ALL = (
    "tool:up_echo, tool:up_weather, tool:up_fail, tool:up_slow, tool:up_ask, tool:up_crash, "
    "tool:up_huge, tool:up_mutate, effect:read, effect:none"
)
ME = f"""clients:
  - name: me
    local: true
    permissions: {{ allow: [{ALL}, "resources:*", "prompts:*"] }}
"""
BINDING = """    effects: read
    exclude: [note]
"""

ERAS = ["legacy", "auto"]


def _journal_runs(tmp_path: Path) -> list[Any]:
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        return [journal.get_run(r.run_id) for r in journal.list_runs(100)]
    finally:
        journal.close()


@pytest.mark.parametrize("mode", ERAS)
async def test_list_and_call_both_eras(tmp_path: Path, mode: str) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest, mode) as client:
        assert (client.protocol_version == "2026-07-28") == (mode == "auto")
        tools = (await client.list_tools()).tools
        names = [t.name for t in tools]
        # the union, prefixed, filtered (note excluded), in a stable (sorted) order
        assert names == sorted(names)
        assert "up_note" not in names and "up_echo" in names and "up_weather" in names
        weather = next(t for t in tools if t.name == "up_weather")
        assert weather.output_schema is not None and weather.output_schema["required"] == ["city", "celsius"]

        echoed = await client.call_tool("up_echo", {"text": "hi"})
        assert not echoed.is_error and echoed.content[0].text == "hi"  # type: ignore[union-attr]
        result = await client.call_tool("up_weather", {"city": "Oslo"})
        assert not result.is_error
        assert result.structured_content == {"city": "Oslo", "celsius": 21.5}

        failed = await client.call_tool("up_fail", {})
        assert failed.is_error
        text = failed.content[0].text  # type: ignore[union-attr]
        assert "boom" in text and "\x1b" not in text and "\u202e" not in text
        assert len(text) <= 2100  # bounded

        with pytest.raises(MCPError) as info:
            await client.call_tool("up_nope", {})
        assert info.value.error.code == types.INVALID_PARAMS
        # a result over the runtime's max_output_bytes is refused, and the gateway keeps serving
        huge = await client.call_tool("up_huge", {})
        assert huge.is_error and huge.meta is not None
        # effects `read` were sent: the call's outcome is unknown, caused by the size limit
        assert huge.meta["toolbridge/code"] == "OUTCOME_UNKNOWN"
        assert huge.meta["toolbridge/cause"] == "LIMIT_EXCEEDED"
        again = await client.call_tool("up_echo", {"text": "still here"})
        assert again.content[0].text == "still here"  # type: ignore[union-attr]
    assert calls_of(tmp_path) == ["echo", "weather", "fail", "huge", "echo"]
    runs = _journal_runs(tmp_path)
    assert len(runs) == 6 - 1  # the unknown tool is a protocol error, not a run
    assert {r.principal for r in runs} == {"me"}
    assert all(r.agent == "gateway TestGate" for r in runs)
    assert all(call.request_sent for r in runs for call in r.calls)


async def test_ungranted_call_never_reaches_the_upstream(tmp_path: Path) -> None:
    clients = """clients:
  - name: me
    local: true
    permissions: { allow: [tool:up_echo, effect:read] }
"""
    manifest = upstream_manifest(tmp_path, clients=clients, binding=BINDING)
    async with gateway_stdio(manifest) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["up_echo"]  # a client is shown only what it may call
        refused = await client.call_tool("up_weather", {"city": "Oslo"})
        assert refused.is_error
        assert refused.content[0].text.startswith("PERMISSION_DENIED: ")  # type: ignore[union-attr]
        assert refused.meta is not None and refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
        ok = await client.call_tool("up_echo", {"text": "a"})
        assert not ok.is_error
    assert calls_of(tmp_path) == ["echo"]
    runs = _journal_runs(tmp_path)
    blocked = [r for r in runs if r.outcome == "blocked"]
    assert len(blocked) == 1 and blocked[0].error_code == "PERMISSION_DENIED"
    assert [c.outcome for c in blocked[0].calls] == ["not_started"]
    assert not blocked[0].calls[0].request_sent


async def test_without_clients_the_local_user_has_the_runtimes_grants(tmp_path: Path) -> None:
    manifest = upstream_manifest(
        tmp_path, binding=BINDING, runtime="permissions: { allow: [tool:up_echo, effect:read] }"
    )
    async with gateway_stdio(manifest) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["up_echo"]
        await client.call_tool("up_echo", {"text": "a"})
    (run,) = _journal_runs(tmp_path)
    assert run.principal is not None and run.principal.startswith("local:")


async def test_pagination(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING, gateway="pageSize: 3")
    async with gateway_stdio(manifest) as client:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await client.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            pages += 1
            seen += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        assert pages == 3 and len(seen) == 8 and seen == sorted(seen)
        with pytest.raises(MCPError) as info:
            await client.session.list_tools(params=types.PaginatedRequestParams(cursor="garbage!"))
        assert info.value.error.code == types.INVALID_PARAMS


async def test_progress_flows_back_and_cancellation_reaches_the_upstream(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    progress: list[tuple[float, float | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async with gateway_stdio(manifest) as client:
        done = await client.call_tool("up_slow", {"steps": 3}, progress_callback=on_progress)
        assert done.content[0].text == "done after 3 steps"  # type: ignore[union-attr]
        assert progress == [(1, 3), (2, 3), (3, 3)]
        progress.clear()
        with anyio.move_on_after(0.6):
            await client.call_tool("up_slow", {}, progress_callback=on_progress)
        assert progress, "no progress reached the client before it cancelled"
        # the client's cancellation reaches the upstream, which logs it
        with anyio.fail_after(10):
            while "slow:cancelled" not in calls_of(tmp_path):  # noqa: ASYNC110 - another process writes it
                await anyio.sleep(0.05)
        echoed = await client.call_tool("up_echo", {"text": "after"})
        assert echoed.content[0].text == "after"  # type: ignore[union-attr]


async def test_sampling_is_forwarded_to_a_client_that_offers_it(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    asked: list[str] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="forty-two"), model="test-model"
        )

    async with gateway_stdio(manifest, sampling_callback=sampling) as client:
        result = await client.call_tool("up_ask", {"text": "meaning of life?"})
        assert result.content[0].text == "the model said: forty-two"  # type: ignore[union-attr]
    assert asked == ["meaning of life?"]


async def test_sampling_is_declined_for_a_client_without_it(tmp_path: Path) -> None:
    """The upstream's sampling needs a capability the client did not declare: the upstream is
    refused, and the call fails with -32021 (missing required client capability)."""
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("up_ask", {"text": "hello?"})
        assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
        echoed = await client.call_tool("up_echo", {"text": "still here"})
        assert echoed.content[0].text == "still here"  # type: ignore[union-attr]
    assert calls_of(tmp_path) == ["ask", "echo"]


async def test_a_crashed_upstream_is_restarted_for_the_next_call(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest) as client:
        crashed = await client.call_tool("up_crash", {})
        assert crashed.is_error and crashed.meta is not None
        assert crashed.meta["toolbridge/code"] == "OUTCOME_UNKNOWN"  # effects read: it may have acted
        echoed = await client.call_tool("up_echo", {"text": "back"})
        assert echoed.content[0].text == "back"  # type: ignore[union-attr]
    assert calls_of(tmp_path) == ["crash", "echo"]


async def test_resources_and_prompts_pass_through_namespaced(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding=BINDING)
    async with gateway_stdio(manifest) as client:
        resources = (await client.list_resources()).resources
        assert [(r.name, str(r.uri)) for r in resources] == [("up_readme", "test://readme")]
        read = await client.read_resource("test://readme")
        assert read.contents[0].text == "read me"  # type: ignore[union-attr]
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["up_greeting"]
        got = await client.get_prompt("up_greeting")
        assert got.messages[0].content.text == "Hello!"  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await client.get_prompt("greeting")  # not namespaced: unknown


async def test_resources_need_their_grant(tmp_path: Path) -> None:
    clients = """clients:
  - name: me
    local: true
    permissions: { allow: [tool:up_echo, effect:read] }
"""
    manifest = upstream_manifest(tmp_path, clients=clients, binding=BINDING)
    async with gateway_stdio(manifest) as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_prompts()).prompts == []
        with pytest.raises(MCPError):
            await client.read_resource("test://readme")


def test_a_manifest_with_errors_is_refused_in_one_line(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=ME, binding="    approval: sometimes\n")
    proc = subprocess.run([TOOLBRIDGE, "gateway", str(manifest)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ERR_MANIFEST_INVALID_VALUE" in lines[0] and "Traceback" not in proc.stderr


def test_no_gateway_in_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"kind": "Runtime", "metadata": {"name": "R"}}), encoding="utf-8")
    proc = subprocess.run([TOOLBRIDGE, "gateway", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "ERR_GATEWAY_CONFIG" in proc.stderr and "Traceback" not in proc.stderr
