"""The `Gateway` kind under `toolbridge check`, hostile manifests, the cursor parser, and the example."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from gw_helpers import gateway_stdio
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from toolbridge.gateway._answers import page_of
from toolbridge.manifest import check_manifest, manifest_json_schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "manifests" / "gateway.yaml"
SERVER = """
---
kind: Mcp.StdioClient
metadata: { name: C }
command: node
---
kind: AiMcp.ToolProvider
metadata: { name: P }
client: !ref C
---
kind: Tasks.ToolSet
metadata: { name: T }
tools:
  - name: greet
    description: Greet.
    inputSchema: { type: object, properties: {} }
    task: { instructions: [{ action: result, params: { value: hi } }] }
"""


def codes(tmp_path: Path, gateway: str, env: dict[str, str] | None = None) -> list[tuple[str, str, int]]:
    path = tmp_path / "m.yaml"
    path.write_text("kind: Gateway\nmetadata: { name: G }\n" + gateway + SERVER, encoding="utf-8")
    report = check_manifest([path], env=env or {})
    return [(d.code, d.severity, d.line) for d in report.diagnostics]


def test_a_good_gateway_checks(tmp_path: Path) -> None:
    gateway = """toolProviders:
  - provider: !ref P
    prefix: p_
    approval: write
    effects: read
  - provider: !ref T
    include: [greet]
clients:
  - { name: alice, token: "${{ secrets.aliceToken }}", permissions: { allow: [tool:p_x] } }
  - { name: me, local: true, limits: { toolTimeoutMs: 1000 } }
"""
    assert codes(tmp_path, gateway, {"ALICE_TOKEN": "secret-value-1"}) == []


@pytest.mark.parametrize(
    ("gateway", "code", "line"),
    [
        ("toolProviders: [{ provider: !ref P, prefx: p_ }]\n", "ERR_MANIFEST_UNKNOWN_FIELD", 3),
        ("toolProviders: [{ provider: !ref P, approval: sometimes }]\n", "ERR_MANIFEST_INVALID_VALUE", 3),
        ("toolProviders: [{ provider: !ref C }]\n", "ERR_MANIFEST_REF_KIND", 3),
        ("toolProviders: [{ provider: P }]\n", "ERR_MANIFEST_REF_FORM", 3),
        ("toolProviders: [{ provider: !ref Nope }]\n", "ERR_MANIFEST_DANGLING_REF", 3),
        ("toolProviders: [{ provider: !ref T, include: [greeet] }]\n", "ERR_MANIFEST_UNKNOWN_TOOL", 3),
        ("clients: []\n", "ERR_MANIFEST_INVALID_VALUE", 1),
        ("tasks: [!ref T]\nclients: [{ name: a, token: plain-token }]\n", "ERR_MANIFEST_INVALID_VALUE", 4),
        ("tasks: [!ref T]\nclients: [{ name: a }]\n", "ERR_MANIFEST_INVALID_VALUE", 4),
        (
            "tasks: [!ref T]\nclients: [{ name: a, local: true }, { name: a, local: true }]\n",
            "ERR_MANIFEST_INVALID_VALUE",
            1,
        ),
        ("tasks: [!ref T]\npageSize: 0\n", "ERR_MANIFEST_INVALID_VALUE", 4),
        ("tasks: [!ref T]\nlock: 12\n", "ERR_MANIFEST_WRONG_TYPE", 4),
        (
            "tasks: [!ref T]\nclients: [{ name: a, token: '${{ secrets.missing }}' }]\n",
            "ERR_MANIFEST_SECRET_UNRESOLVED",
            4,
        ),
        ("tasks: [!ref T]\nlock: '${{ secrets.x }}'\n", "ERR_MANIFEST_SECRET_PLACEMENT", 4),
    ],
)
def test_bad_gateways_are_reported_at_their_line(tmp_path: Path, gateway: str, code: str, line: int) -> None:
    found = codes(tmp_path, gateway, {"X": "value-of-x"})
    assert (code, "error", line) in found, found


def test_lock_missing_or_without_the_server_is_a_warning(tmp_path: Path) -> None:
    gateway = "lock: tools.lock\ntoolProviders: [{ provider: !ref P }]\n"
    assert codes(tmp_path, gateway) == [("ERR_MANIFEST_LOCK", "warning", 3)]
    (tmp_path / "tools.lock").write_text('{"version": 1, "servers": {}}', encoding="utf-8")
    assert codes(tmp_path, gateway) == [("ERR_MANIFEST_LOCK", "warning", 4)]
    (tmp_path / "tools.lock").write_text("{not json", encoding="utf-8")
    assert [c for c, *_ in codes(tmp_path, gateway)] == ["ERR_MANIFEST_LOCK"]
    assert codes(tmp_path, gateway)[0][1] == "error"


def test_the_schema_has_the_gateway_kind() -> None:
    schema = manifest_json_schema()
    gateway = schema["$defs"]["GatewayDoc"]
    assert gateway["additionalProperties"] is False
    assert {"toolProviders", "tools", "tasks", "runtime", "lock", "clients"} <= set(gateway["properties"])


@given(st.text(max_size=40))
def test_any_cursor_is_a_page_or_invalid_params(cursor: str) -> None:
    items = list(range(25))
    try:
        page, nxt = page_of(items, cursor, 10)
    except MCPError as exc:
        assert exc.error.code == types.INVALID_PARAMS
        return
    assert all(isinstance(i, int) for i in page) and len(page) <= 10
    assert nxt is None or isinstance(nxt, str)


def test_cursors_walk_every_item_once() -> None:
    items = list(range(25))
    seen: list[int] = []
    cursor: str | None = None
    while True:
        page, cursor = page_of(items, cursor, 10)
        seen += page
        if cursor is None:
            break
    assert seen == items
    for forged in (base64.urlsafe_b64encode(b"o:99").decode(), base64.urlsafe_b64encode(b"o:-1").decode()):
        with pytest.raises(MCPError):
            page_of(items, forged, 10)


def _example(tmp_path: Path) -> Path:
    text = EXAMPLE.read_text(encoding="utf-8").replace("../../tests/servers", str(ROOT / "tests" / "servers"))
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    shutil.copytree(EXAMPLE.parent / "data", tmp_path / "data")
    return path


def test_the_example_checks() -> None:
    report = check_manifest([EXAMPLE], env={"VSCODE_TOKEN": "example-token-123"})
    assert report.diagnostics == []


async def test_the_example_serves_and_its_write_tool_asks_first(tmp_path: Path) -> None:
    manifest = _example(tmp_path)
    asked: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    env = {"VSCODE_TOKEN": "example-token-123"}
    async with gateway_stdio(manifest, env=env, elicitation_callback=elicit) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "fs_write_file" in names and "ev_get-sum" in names and "fs_read_text_file" in names
        summed = await client.call_tool("ev_get-sum", {"a": 2, "b": 3})
        assert "5" in summed.content[0].text  # type: ignore[union-attr]
        target = tmp_path / "data" / "note.txt"
        written = await client.call_tool("fs_write_file", {"path": str(target), "content": "hello"})
        assert not written.is_error, written
        assert written.structured_content is not None
    assert target.read_text() == "hello"
    assert len(asked) == 1 and asked[0].startswith("Allow `fs_write_file` of server `gateway Desk` (write)")
