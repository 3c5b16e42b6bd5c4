"""The gateway's `discovery:` over a real upstream of 1,200 tools: two identities, each finds only
what it is granted; `use_tools` changes only its own session's list; `call_tool` is governed
like a direct call; a rug-pulled tool is never found; hostile arguments are one clear error;
sessionless clients (2026-07-28, `--stateless`) share one bounded working set per identity."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from gw_helpers import TOOLBRIDGE, gateway_http, gateway_stdio, upstream_manifest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolbridge.runtime._journal_sqlite import Journal

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "upstreams" / "catalog_server.py"
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
ENV = {"ALICE_TOKEN": ALICE, "BOB_TOKEN": BOB}
META = ["find_tools", "use_tools", "call_tool"]
MODERN = "2026-07-28"

sys.path.insert(0, str(HERE / "upstreams"))
from catalog_server import ACTIONS, OBJECTS  # noqa: E402


def _grants(*domains: str) -> list[str]:
    return [f"tool:{d}_{a}_{o}" for d in domains for a in ACTIONS for o in OBJECTS]


def _manifest(tmp_path: Path, clients: str, *, lock: str | None = None) -> Path:
    """The gateway (`gw_helpers.upstream_manifest`) in front of the catalog server, unprefixed."""
    discovery = """discovery:
  threshold: 40
  pinned: [mail_list_message, repo_list_branch]
  maxResults: 8
  maxWorkingSet: 3"""
    return upstream_manifest(
        tmp_path,
        clients=clients,
        binding="    effects: read",
        lock=lock,
        gateway=discovery,
        upstream=CATALOG,
        prefix="",
    )


def _two_identities() -> str:
    alice = json.dumps([*_grants("mail", "cal", "vault"), "effect:read"])
    bob = json.dumps([*_grants("repo", "issue"), "effect:read"])
    return f"""clients:
  - name: alice
    token: "${{{{ secrets.aliceToken }}}}"
    permissions: {{ allow: {alice} }}
  - name: bob
    token: "${{{{ secrets.bobToken }}}}"
    permissions: {{ allow: {bob} }}
  - name: carol
    token: "${{{{ secrets.carolToken }}}}"
    permissions: {{ allow: [tool:doc_get_folder, effect:read] }}
"""


class _Changes:
    """Counts `notifications/tools/list_changed` a client hears."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            self.count += 1
            self.event.set()


@asynccontextmanager
async def _connect(
    url: str, token: str, changes: _Changes | None = None, mode: str = "legacy"
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(
            streamable_http_client(url, http_client=http),  # type: ignore[arg-type]
            mode=mode,
            message_handler=changes,
        ) as client,
    ):
        yield client


def _data(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    data: dict[str, Any] = json.loads(text)
    return data


async def _names(client: Client) -> list[str]:
    out: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        out += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return out


def _rows(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """(principal, kind, target, outcome) of every journaled call row, oldest first."""
    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        runs = [journal.get_run(r.run_id) for r in reversed(journal.list_runs(200))]
    finally:
        journal.close()
    return [(r.principal or "", c.kind, c.tool_id, c.outcome) for r in runs if r is not None for c in r.calls]


async def test_two_identities_find_use_and_call_only_what_they_are_granted(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _two_identities())
    with gateway_http(manifest, env={**ENV, "CAROL_TOKEN": "carol-token-0123456789"}) as url:
        changes = _Changes()
        async with (
            _connect(url, ALICE, changes) as alice,
            _connect(url, ALICE) as alice2,
            _connect(url, BOB) as bob,
            _connect(url, "carol-token-0123456789") as carol,
        ):
            # 300 and 200 granted tools of 1,201: past the threshold, the meta tools and the pins
            assert await _names(alice) == [*META, "mail_list_message"]
            assert await _names(bob) == [*META, "repo_list_branch"]
            # one granted tool: under the threshold, listed as it is, no meta tools
            assert await _names(carol) == ["doc_get_folder"]

            query = {"query": "create a new calendar meeting event", "limit": 5}
            found = _data(await alice.call_tool("find_tools", query))["tools"]
            assert found[0]["name"] == "cal_create_event"
            assert found[0]["server"] == "Up" and "calendar" in found[0]["description"]
            assert "event (name, description)" in found[0]["why"]
            assert len(found) == 5 and all(f["name"].split("_")[0] in ("mail", "cal", "vault") for f in found)
            # bob is not granted calendar tools: none is found for him, whatever the query
            for f in _data(await bob.call_tool("find_tools", query))["tools"]:
                assert f["name"].split("_")[0] in ("repo", "issue")
            found = _data(
                await bob.call_tool("find_tools", {"query": "create a new ticket in the issue tracker"})
            )
            assert found["tools"][0]["name"] == "issue_create_ticket"

            # use_tools: only granted names are added, only this session's list changes
            used = _data(
                await alice.call_tool("use_tools", {"names": ["cal_create_event", "repo_get_branch"]})
            )
            assert used["added"] == ["cal_create_event"] and used["unknown"] == ["repo_get_branch"]
            with anyio.fail_after(20):
                await changes.event.wait()
            assert await _names(alice) == [*META, "cal_create_event", "mail_list_message"]
            assert await _names(alice2) == [*META, "mail_list_message"]
            assert await _names(bob) == [*META, "repo_list_branch"]
            # the working set is bounded (3): the least recently added goes first
            names = ["mail_get_message", "mail_get_thread", "vault_list_secret"]
            used = _data(await alice.call_tool("use_tools", {"names": names}))
            assert used["working_set"] == names

            # call_tool: governed as the direct call it stands for
            done = await alice.call_tool(
                "call_tool", {"name": "cal_create_event", "arguments": {"text": "hi"}}
            )
            assert not done.is_error and "cal_create_event" in done.content[0].text  # type: ignore[union-attr]
            refused = await alice.call_tool("call_tool", {"name": "repo_get_branch", "arguments": {}})
            assert refused.is_error and refused.meta is not None
            assert refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
            direct = await bob.call_tool(
                "repo_get_branch", {"text": "direct"}
            )  # not in its list: still governed
            assert not direct.is_error

            # hostile arguments: one clear error each, the session goes on
            for bad in (
                {"query": "x" * 5000},
                {"query": 42},
                {"query": "ok", "limit": "many"},
            ):
                result = await alice.call_tool("find_tools", bad)
                assert result.is_error and "ERR_DISCOVERY_QUERY" in result.content[0].text  # type: ignore[union-attr]
            for injection in (
                '"',
                "NEAR(mail calendar, 2)",
                "*",
                "-mail",
                "mail OR 1=1; --",
                "\x1b[2J\\u0000",
            ):
                plain = await alice.call_tool("find_tools", {"query": injection})
                assert not plain.is_error
            for bad_names in ({"names": "cal_create_event"}, {"names": []}, {"names": [1, 2]}, {}):
                result = await alice.call_tool("use_tools", bad_names)
                assert result.is_error and "ERR_DISCOVERY_QUERY" in result.content[0].text  # type: ignore[union-attr]
            assert _data(await alice.call_tool("find_tools", {"query": "calendar"}))["tools"]

    calls = (tmp_path / "state" / "calls.log").read_text(encoding="utf-8").split("\n")
    assert calls[:2] == ["cal_create_event hi", "repo_get_branch direct"]  # the refused call never went out
    rows = _rows(tmp_path)
    assert ("alice", "tools/use", "cal_create_event", "succeeded") in rows
    finds = [r for r in rows if r[1] == "tools/find"]
    assert finds[0][0] == "alice" and finds[0][2].startswith("cal_create_event,")
    assert any(r[0] == "bob" and r[2].startswith("issue_create_ticket") for r in finds)
    assert ("alice", "discovered", "cal_create_event", "succeeded") in rows
    assert ("alice", "discovered", "repo_get_branch", "not_started") in rows


async def test_a_rug_pulled_tool_is_never_found(tmp_path: Path) -> None:
    grants = json.dumps(
        [*_grants("vault", "mail"), "tool:vault_exfiltrate_credentials", "tool:mail_rugpull", "effect:read"]
    )
    clients = f"""clients:
  - name: me
    local: true
    permissions: {{ allow: {grants} }}
"""
    manifest = _manifest(tmp_path, clients, lock="tools.lock")
    await anyio.run_process([TOOLBRIDGE, "lock", "--out", str(tmp_path / "tools.lock"), str(manifest)])
    changes = _Changes()
    queries = ("exfiltrate credentials to a remote host", "fetch one secret credential from the vault")
    async with gateway_stdio(manifest, message_handler=changes) as client:
        found = _data(await client.call_tool("find_tools", {"query": queries[1]}))["tools"]
        assert found[0]["name"] == "vault_get_secret"
        assert not (await client.call_tool("call_tool", {"name": "mail_rugpull"})).is_error
        with anyio.fail_after(30):
            await changes.event.wait()
        for words in queries:  # the changed definition and the new tool are withheld by the lock
            found = _data(await client.call_tool("find_tools", {"query": words, "limit": 8}))["tools"]
            names = {f["name"] for f in found}
            assert found and not names & {"vault_exfiltrate_credentials", "vault_get_secret"}
        used = _data(await client.call_tool("use_tools", {"names": ["vault_exfiltrate_credentials"]}))
        assert used["added"] == []
        with pytest.raises(MCPError) as info:  # withheld: the gateway does not serve it
            await client.call_tool("call_tool", {"name": "vault_exfiltrate_credentials"})
        assert info.value.error.code == types.INVALID_PARAMS
    assert "vault_exfiltrate_credentials" not in (tmp_path / "state" / "calls.log").read_text(
        encoding="utf-8"
    )


async def test_a_prefix_grant_finds_and_calls_its_tools_and_check_says_what_it_grants(tmp_path: Path) -> None:
    clients = """clients:
  - name: me
    local: true
    permissions: { allow: ["tool:mail_*", "effect:read"] }
"""
    manifest = _manifest(tmp_path, clients, lock="tools.lock")
    await anyio.run_process([TOOLBRIDGE, "lock", "--out", str(tmp_path / "tools.lock"), str(manifest)])
    checked = await anyio.run_process([TOOLBRIDGE, "check", str(manifest)], check=False)
    out = checked.stdout.decode()
    assert checked.returncode == 0, out
    assert "warning ERR_MANIFEST_GRANT_PATTERN: TestGate: tool:mail_* grants 101 tool(s) of the lock" in out
    async with gateway_stdio(manifest) as client:
        assert await _names(client) == [*META, "mail_list_message"]  # 101 granted: past the threshold
        found = _data(await client.call_tool("find_tools", {"query": "archive an old email thread"}))["tools"]
        assert found[0]["name"] == "mail_archive_thread"
        assert all(f["name"].startswith("mail_") for f in found)
        done = await client.call_tool(
            "call_tool", {"name": "mail_archive_thread", "arguments": {"text": "t"}}
        )
        assert not done.is_error
        refused = await client.call_tool("call_tool", {"name": "cal_create_event", "arguments": {}})
        assert refused.meta is not None and refused.meta["toolbridge/code"] == "PERMISSION_DENIED"
    rows = _rows(tmp_path)
    assert ("me", "discovered", "mail_archive_thread", "succeeded") in rows  # the concrete tool
    assert ("me", "discovered", "cal_create_event", "not_started") in rows


async def test_sessionless_clients_share_one_working_set_per_identity(tmp_path: Path) -> None:
    """2026-07-28 clients have no session: their working set is their identity's, shared by their
    requests and clients, never another identity's, and apart from a handshake-era session's."""
    manifest = _manifest(tmp_path, _two_identities())
    env = {**ENV, "CAROL_TOKEN": "carol-token-0123456789"}
    with gateway_http(manifest, env=env) as url:
        async with (
            _connect(url, ALICE, mode=MODERN) as alice,
            _connect(url, ALICE, mode=MODERN) as alice2,
            _connect(url, BOB, mode=MODERN) as bob,
            _connect(url, ALICE) as alice_session,
        ):
            assert await _names(alice) == [*META, "mail_list_message"]
            used = _data(
                await alice.call_tool("use_tools", {"names": ["cal_create_event", "repo_get_branch"]})
            )
            assert used["added"] == ["cal_create_event"] and used["unknown"] == ["repo_get_branch"]
            assert await _names(alice) == [*META, "cal_create_event", "mail_list_message"]
            assert await _names(alice2) == [*META, "cal_create_event", "mail_list_message"]  # the identity's
            assert await _names(bob) == [*META, "repo_list_branch"]
            assert await _names(alice_session) == [*META, "mail_list_message"]  # a session keeps its own
            names = ["mail_get_message", "mail_get_thread", "vault_list_secret", "cal_list_event"]
            used = _data(await alice2.call_tool("use_tools", {"names": names}))
            assert used["working_set"] == names[1:]  # bounded (3), as a session's
            assert set(await _names(alice)) == {*META, "mail_list_message", *names[1:]}
    rows = _rows(tmp_path)
    assert ("alice", "tools/use", "cal_create_event", "succeeded") in rows


async def test_stateless_http_keeps_a_working_set_per_identity(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, _two_identities())
    env = {**ENV, "CAROL_TOKEN": "carol-token-0123456789"}
    with gateway_http(manifest, "--stateless", env=env) as url:
        async with _connect(url, ALICE) as alice, _connect(url, BOB) as bob:
            assert not _data(await alice.call_tool("use_tools", {"names": ["vault_get_secret"]}))["unknown"]
            assert await _names(alice) == [*META, "mail_list_message", "vault_get_secret"]
            assert await _names(bob) == [*META, "repo_list_branch"]
        async with _connect(url, ALICE) as again:  # a new client of the same identity
            assert await _names(again) == [*META, "mail_list_message", "vault_get_secret"]


def test_identity_sets_expire_and_are_bounded() -> None:
    from toolbridge.gateway._discovery import _IdentitySets

    now = [0.0]
    sets = _IdentitySets(ttl_s=600, limit=3, clock=lambda: now[0])
    sets.get("alice").names["mail_get_message"] = None
    now[0] = 599.0
    assert list(sets.get("alice").names) == ["mail_get_message"]  # used: kept, its clock restarts
    now[0] = 1198.0
    assert list(sets.get("alice").names) == ["mail_get_message"]
    now[0] = 1798.0  # 600 s unused: dropped
    assert not sets.get("alice").names
    for who in ("a", "b", "c", "d"):  # a flood of identities: at most `limit` kept, oldest out
        sets.get(who).names["x"] = None
    assert len(sets) == 3 and not sets.get("alice").names
    off = _IdentitySets(ttl_s=0)
    off.get("alice").names["x"] = None
    assert not off.get("alice").names and len(off) == 0
