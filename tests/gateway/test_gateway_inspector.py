"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`, pinned in
tests/conformance/package.json, installed with the Node 22 it needs by .ci/install-conformance.sh)
lists and calls through the gateway, over stdio and over HTTP with a bearer token."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from gw_helpers import TOOLBRIDGE, calls_of, gateway_http, upstream_manifest

ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / "tests" / "conformance" / "node_modules" / ".bin"
INSPECTOR = (
    ROOT / "tests" / "conformance" / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients"
)
LAUNCHER = INSPECTOR / "launcher" / "build" / "index.js"
TOKEN = "inspector-token-12345"
CLIENTS = """clients:
  - name: me
    local: true
    permissions: { allow: [tool:up_echo, tool:up_weather, effect:read, "resources:*", "prompts:*"] }
  - name: web
    token: "${{ secrets.webToken }}"
    permissions: { allow: [tool:up_echo, effect:read] }
"""


def inspector(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not (NODE_BIN / "node").exists() or not LAUNCHER.exists():
        pytest.fail(
            "the MCP Inspector is not installed under tests/conformance; "
            "run `bash .ci/install-conformance.sh`"
        )
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home)}
    return subprocess.run(
        [str(NODE_BIN / "node"), str(LAUNCHER), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def test_inspector_lists_and_calls_over_stdio(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    target = ["-e", f"WEB_TOKEN={TOKEN}", TOOLBRIDGE, "gateway", str(manifest)]
    listed = _json(inspector(tmp_path, *target, "--method", "tools/list"))
    assert [t["name"] for t in listed["tools"]] == ["up_echo", "up_weather"]  # type: ignore[attr-defined,index]
    called = _json(
        inspector(
            tmp_path,
            *target,
            "--method",
            "tools/call",
            "--tool-name",
            "up_weather",
            "--tool-arg",
            "city=Oslo",
        )
    )
    assert called["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    # a tool the identity is not granted is not listed, so the Inspector does not even send it
    hidden = inspector(tmp_path, *target, "--method", "tools/call", "--tool-name", "up_fail")
    assert hidden.returncode != 0 and "not found" in hidden.stderr
    resources = _json(inspector(tmp_path, *target, "--method", "resources/list"))
    assert [r["name"] for r in resources["resources"]] == ["up_readme"]  # type: ignore[attr-defined,index]
    assert calls_of(tmp_path) == ["weather"]


def test_inspector_over_http_with_a_bearer_token(tmp_path: Path) -> None:
    manifest = upstream_manifest(tmp_path, clients=CLIENTS, binding="    effects: read\n")
    with gateway_http(manifest, env={"WEB_TOKEN": TOKEN}) as url:
        auth = ["--header", f"Authorization: Bearer {TOKEN}"]
        listed = _json(inspector(tmp_path, url, "--transport", "http", *auth, "--method", "tools/list"))
        assert [t["name"] for t in listed["tools"]] == ["up_echo"]  # type: ignore[attr-defined,index]
        called = _json(
            inspector(
                tmp_path,
                url,
                "--transport",
                "http",
                *auth,
                "--method",
                "tools/call",
                "--tool-name",
                "up_echo",
                "--tool-arg",
                "text=hello",
            )
        )
        assert called["content"] == [{"type": "text", "text": "hello"}]
        anonymous = inspector(tmp_path, url, "--transport", "http", "--method", "tools/list")
        assert anonymous.returncode != 0 and "up_echo" not in anonymous.stdout
    assert calls_of(tmp_path) == ["echo"]
