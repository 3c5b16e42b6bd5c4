"""A desktop user starts the gateway in one step: the documented Claude Desktop config starts the
example manifest (without the HTTP client's token), `--print-config` prints configs that start
(stdio) or reach (HTTP) it, `--transport http` says where it listens, and `gateway` and `lock`
take `--secret`."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from gw_helpers import TOOLBRIDGE, stop
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from test_gateway_secrets import ENV, SECRET, TOKEN, secret_manifest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "gateway.md"
EXAMPLE = ROOT / "examples" / "manifests" / "gateway.yaml"
_JSON = re.compile(r"^```json\n(.*?)^```", re.S | re.M)
EXAMPLE_TOOLS = {"fs_read_text_file", "fs_list_directory", "fs_search_files", "ev_echo", "ev_get-sum"}


def _env(**more: str) -> dict[str, str]:
    """A desktop application's small environment (no tokens), plus the checkout under test."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **more}


def example_copy(tmp_path: Path) -> Path:
    """examples/manifests/gateway.yaml with its data, its upstreams found from anywhere."""
    folder = tmp_path / "examples" / "manifests"
    folder.mkdir(parents=True)
    text = EXAMPLE.read_text(encoding="utf-8").replace("../../tests/servers", str(ROOT / "tests" / "servers"))
    (folder / "gateway.yaml").write_text(text, encoding="utf-8")
    shutil.copytree(EXAMPLE.parent / "data", folder / "data")
    return folder / "gateway.yaml"


async def _tools_of(command: str, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    params = StdioServerParameters(command=command, args=args, env=env or _env(), cwd=cwd)
    async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
        return {t.name for t in (await client.list_tools()).tools}


def _toolbridge(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLBRIDGE, *args], env=env, capture_output=True, text=True, timeout=120)


def _print_config(*args: str, env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [TOOLBRIDGE, "gateway", *args], env=env or _env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    config: dict[str, object] = json.loads(done.stdout)
    return config, done.stderr


async def test_the_documented_claude_desktop_config_starts_the_example(tmp_path: Path) -> None:
    blocks = [json.loads(b) for b in _JSON.findall(DOC.read_text(encoding="utf-8")) if '"mcpServers"' in b]
    documented = blocks[0]["mcpServers"]["desk"]
    manifest = example_copy(tmp_path)
    assert documented["command"] == "/path/to/.venv/bin/toolbridge"
    args = [str(manifest) if a == "/path/to/gateway.yaml" else a for a in documented["args"]]
    elsewhere = tmp_path / "elsewhere"  # the application's working directory is not the manifest's
    elsewhere.mkdir()
    assert "VSCODE_TOKEN" not in _env()
    tools = await _tools_of(TOOLBRIDGE, args, elsewhere)
    assert tools >= EXAMPLE_TOOLS


@pytest.mark.parametrize("client", ["claude", "vscode", "cursor"])
async def test_a_printed_stdio_config_starts_the_gateway(
    tmp_path: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = example_copy(tmp_path)
    monkeypatch.chdir(tmp_path)  # a relative manifest path becomes absolute in the config
    config, hint = _print_config(str(manifest.relative_to(tmp_path)), "--print-config", client)
    servers = config["servers" if client == "vscode" else "mcpServers"]
    assert isinstance(servers, dict) and list(servers) == ["desk"]
    entry = servers["desk"]
    assert Path(entry["command"]).is_absolute() and entry["args"][-2:] == ["gateway", str(manifest)]
    if client == "vscode":
        assert entry["type"] == "stdio"
    assert "toolbridge: merge this into" in hint
    tools = await _tools_of(entry["command"], entry["args"], tmp_path / "examples")
    assert tools >= EXAMPLE_TOOLS


def test_a_printed_http_config_holds_a_placeholder_never_the_token(tmp_path: Path) -> None:
    manifest = example_copy(tmp_path)
    env = _env(VSCODE_TOKEN="vscode-token-0123456789")
    vscode, _ = _print_config(
        str(manifest), "--print-config", "vscode", "--transport", "http", "--port", "8765", env=env
    )
    assert vscode == {
        "inputs": [
            {
                "id": "desk-token",
                "type": "promptString",
                "password": True,
                "description": "Desk gateway token",
            }
        ],
        "servers": {
            "desk": {
                "type": "http",
                "url": "http://127.0.0.1:8765/mcp",
                "headers": {"Authorization": "Bearer ${input:desk-token}"},
            }
        },
    }
    cursor, hint = _print_config(
        str(manifest), "--print-config", "cursor", "--transport", "http", "--port", "9", env=env
    )
    assert cursor == {
        "mcpServers": {
            "desk": {
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${env:TOOLBRIDGE_GATEWAY_TOKEN}"},
            }
        }
    }
    assert "TOOLBRIDGE_GATEWAY_TOKEN" in hint
    refused = subprocess.run(
        [TOOLBRIDGE, "gateway", str(manifest), "--print-config", "claude", "--transport", "http"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1 and "ERR_INVALID_INPUT" in refused.stderr and "stdio" in refused.stderr
    with_secret = subprocess.run(
        [
            TOOLBRIDGE,
            "gateway",
            str(manifest),
            "--print-config",
            "claude",
            "--secret",
            "vscodeToken=abcdefgh",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert with_secret.returncode == 1 and "abcdefgh" not in with_secret.stdout + with_secret.stderr


@contextmanager
def _http_gateway(manifest: Path, *args: str, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """`gateway --transport http --port 0`: yields the URL its stderr names, and that line."""
    proc = subprocess.Popen(
        [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", "0", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        line = b""
        while b"serving" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"the gateway exited {proc.returncode} before saying where it listens")
            assert time.monotonic() < deadline, "no listening line within 60 s"
        text = line.decode().strip()
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/mcp)$", text)
        assert found is not None and int(found.group(2)) > 0, text
        yield found.group(1), text
    finally:
        stop(proc)


async def test_http_says_where_it_listens_and_serves_there(tmp_path: Path) -> None:
    manifest = secret_manifest(tmp_path)
    with _http_gateway(manifest, env=_env(**ENV)) as (url, line):
        assert line == f"toolbridge gateway: serving SecretGate at {url}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            assert "sx_leak" in {t.name for t in (await client.list_tools()).tools}


async def test_gateway_takes_secret_options(tmp_path: Path) -> None:
    """`--secret` gives the upstream's key; over stdio the HTTP client's token is not needed."""
    manifest = secret_manifest(tmp_path)
    args = ["gateway", str(manifest), "--secret", f"echoKey={SECRET}"]
    params = StdioServerParameters(command=TOOLBRIDGE, args=args, env=_env())
    async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
        result = await client.call_tool("sx_leak", {})
        assert "401 invalid api key ***" in result.content[0].text  # type: ignore[union-attr]
    # without it, one line naming the secret (never a value), before anything starts
    done = _toolbridge("gateway", str(manifest), env=_env())
    assert done.returncode == 1
    assert "echoKey" in done.stderr and "aliceToken" not in done.stderr
    # over HTTP the token is needed too
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"echoKey={SECRET}\n", encoding="utf-8")
    args = ["gateway", str(manifest), "--secrets-file", str(secrets), "--transport", "http", "--port", "0"]
    done = _toolbridge(*args, env=_env())
    assert done.returncode == 1 and "aliceToken" in done.stderr


def test_lock_takes_secret_options(tmp_path: Path) -> None:
    manifest = secret_manifest(tmp_path)
    out = tmp_path / "tools.lock"
    done = subprocess.run(
        [TOOLBRIDGE, "lock", "--out", str(out), "--secret", f"echoKey={SECRET}", str(manifest)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lock = json.loads(out.read_text(encoding="utf-8"))
    assert "EchoMcp" in json.dumps(lock)
    assert SECRET.lower() not in (done.stdout + done.stderr + out.read_text(encoding="utf-8")).lower()
    done = subprocess.run(
        [TOOLBRIDGE, "lock", "--out", str(out), str(manifest)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "echoKey" in done.stderr


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    manifest = secret_manifest(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = _toolbridge("gateway", str(manifest), "--transport", "http", "--port", port, env=_env(**ENV))
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"toolbridge: ERR_CONFIG: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


async def test_a_printed_config_names_the_secrets_and_passes_a_secrets_file(tmp_path: Path) -> None:
    manifest = secret_manifest(tmp_path)
    _, hint = _print_config(str(manifest), "--print-config", "claude")
    assert "the gateway reads the secrets ECHO_KEY from its environment" in hint
    assert "ALICE_TOKEN" not in hint  # an HTTP client's token: not needed over stdio
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"echoKey={SECRET}\n", encoding="utf-8")
    config, hint = _print_config(str(manifest), "--print-config", "claude", "--secrets-file", str(secrets))
    assert "ECHO_KEY" not in hint
    entry = config["mcpServers"]["secretgate"]  # type: ignore[index]
    assert entry["args"][-2:] == ["--secrets-file", str(secrets)]
    assert SECRET not in json.dumps(config)
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=_env(), cwd=tmp_path)
    async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
        result = await client.call_tool("sx_leak", {})
        assert "401 invalid api key ***" in result.content[0].text  # type: ignore[union-attr]
