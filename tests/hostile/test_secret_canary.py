"""The secret canary: one secret value, used everywhere a secret may go, is found nowhere.

The value goes into every manifest field that takes a secret (a stdio server's command, args and
env; an HTTP server's URL path, query and host, and a header; a model's API key and base URL),
into `--header`, `--url` and `--env` of `tools` and `call`, and reaches real servers that repeat
it back on every channel they have (stderr, tool results, tool errors, 401 bodies). Every command
of the CLI is run, succeeding and failing (a command that does not exist, an unreachable URL, a
host that does not resolve, a server that crashes printing its argv and environment, a model
endpoint that refuses), with DEBUG logging on (`-vv`: toolbridge's, the SDK's and httpx's
loggers). Then the value is searched for in stdout and stderr of each command, in every log
record of an in-process run at DEBUG, in every run event and in every row of the journal.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CANARY = "canary-7f3e9b2d41q8"
SERVER = Path(__file__).resolve().parent / "canary_server.py"
TOOLBRIDGE = str(Path(sys.executable).parent / "toolbridge")
SECRET = "${{ secrets.canaryToken }}"  # the manifest's reference to it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), CANARY],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the canary HTTP server did not start")
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _manifest(tmp: Path, port: int, *, variant: str = "ok") -> Path:
    """The canary manifest. `variant` breaks one part: bad-command, crash, unreachable, dns,
    tool-error, model."""
    launcher = tmp / f"{CANARY}-python"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    command = "${{ manifestDir }}/${{ secrets.canaryToken }}-python"
    mode = "stdio"
    url = f"http://127.0.0.1:{port}/{SECRET}/mcp?key={SECRET}"
    model = """kind: Ai.ScriptedModel
metadata: { name: Model }
turns:
  - toolCalls:
      - { name: local_echo, arguments: { text: hello } }
      - { name: local_whoami, arguments: {} }
      - { name: remote_echo, arguments: { text: there } }
  - text: done
"""
    if variant == "bad-command":
        command = "${{ manifestDir }}/${{ secrets.canaryToken }}-missing"
    elif variant == "crash":
        mode = "crash"
    elif variant == "unreachable":
        url = f"http://127.0.0.1:{_free_port()}/{SECRET}/mcp?key={SECRET}"
    elif variant == "dns":
        url = "http://${{ secrets.canaryToken }}.invalid/mcp"
    elif variant == "tool-error":  # the server's error quotes its argv and environment
        model = model.replace(
            "{ name: local_echo, arguments: { text: hello } }", "{ name: local_fail, arguments: {} }"
        )
    elif variant == "model":
        model = f"""kind: AiOpenai.OpenaiModel
metadata: {{ name: Model }}
model: gpt-test
apiKey: "${{{{ secrets.canaryToken }}}}"
baseUrl: "http://127.0.0.1:{_free_port()}/${{{{ secrets.canaryToken }}}}/v1"
maxRetries: 0
"""
    text = f"""kind: Runtime
metadata: {{ name: Policy }}
profile: durable
journal: journal.db
permissions:
  allow: [model:scripted, model:openai, tool:local_echo, tool:local_whoami, tool:remote_echo, tool:local_fail]
---
kind: Mcp.StdioClient
metadata: {{ name: Local }}
command: "{command}"
args: ["{SERVER}", "{mode}", "--token", "${{{{ secrets.canaryToken }}}}"]
env: {{ CANARY_TOKEN: "${{{{ secrets.canaryToken }}}}", PLAIN: "x-${{{{ secrets.canaryToken }}}}-y" }}
---
kind: Mcp.HttpClient
metadata: {{ name: Remote }}
url: "{url}"
headers: {{ X-Api-Key: "${{{{ secrets.canaryToken }}}}" }}
---
kind: AiMcp.ToolProvider
metadata: {{ name: LocalTools }}
client: !ref Local
---
kind: AiMcp.ToolProvider
metadata: {{ name: RemoteTools }}
client: !ref Remote
---
{model}---
kind: Ai.Agent
metadata: {{ name: Agent }}
model: !ref Model
toolProviders:
  - {{ provider: !ref LocalTools, prefix: local_, effects: none }}
  - {{ provider: !ref RemoteTools, prefix: remote_, effects: none }}
"""
    path = tmp / f"{variant}.yaml"
    path.write_text(text)
    return path


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"CANARY_TOKEN": CANARY, "PYTHONUNBUFFERED": "1", **extra})
    return env


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [TOOLBRIDGE, "-vv", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env or _env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    where = f"`toolbridge -vv {' '.join(args)}`"
    assert CANARY not in proc.stdout, f"{where} printed the secret on stdout:\n{proc.stdout}"
    assert CANARY not in proc.stderr, f"{where} printed the secret on stderr:\n{proc.stderr}"
    return proc


def test_the_canary_is_nowhere_in_what_the_manifest_commands_print(tmp_path: Path, http_port: int) -> None:
    manifest = _manifest(tmp_path, http_port)

    # check, in both forms: the manifest is clean.
    proc = _cli("check", str(manifest), cwd=tmp_path)
    assert proc.returncode == 0 and "ok:" in proc.stdout, proc.stdout + proc.stderr
    proc = _cli("check", str(manifest), "--json", cwd=tmp_path)
    assert json.loads(proc.stdout)["ok"] is True

    # run with the live view, then --json (the whoami result and the tool error repeat the secret).
    proc = _cli("run", str(manifest), "--input", "go", cwd=tmp_path)
    assert "local_echo" in proc.stderr and "done" in proc.stdout, proc.stdout + proc.stderr
    assert "DEBUG" in proc.stderr  # the loggers were on
    assert "***" in proc.stderr  # the server's stderr (argv, env) was logged, scrubbed
    proc = _cli(
        "run", str(manifest), "--input", "go", "--json", "--secret", f"canaryToken={CANARY}", cwd=tmp_path
    )
    result = json.loads(proc.stdout)
    assert result["outcome"] == "succeeded", result
    shown = json.dumps(result)
    assert "***" in shown and "hello" in shown and "there" in shown  # real results, scrubbed
    run_id = result["runId"]

    # runs, both forms.
    journal = tmp_path / "journal.db"
    proc = _cli("runs", "--journal", str(journal), cwd=tmp_path)
    assert run_id in proc.stdout
    proc = _cli("runs", "show", run_id, "--journal", str(journal), "--json", cwd=tmp_path)
    assert json.loads(proc.stdout)["runId"] == run_id

    # lock (every client of the manifest), then lock --check.
    lock = tmp_path / "tools.lock"
    proc = _cli("lock", "--out", str(lock), str(manifest), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert CANARY not in lock.read_text()
    proc = _cli("lock", "--check", "--out", str(lock), str(manifest), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_canary_is_nowhere_in_what_tools_and_call_print(tmp_path: Path, http_port: int) -> None:
    url = f"http://127.0.0.1:{http_port}/{CANARY}/mcp?key={CANARY}"
    header = f"X-Api-Key: {CANARY}"
    # tools and call over HTTP: the key is in the URL path, the query and a header.
    proc = _cli("tools", "--url", url, "--header", header, cwd=tmp_path)
    assert "echo" in proc.stdout and proc.returncode == 0, proc.stderr
    proc = _cli("tools", "--json", "--url", url, "--header", header, cwd=tmp_path)
    assert {t["name"] for t in json.loads(proc.stdout)} >= {"echo", "whoami"}
    proc = _cli("call", "--url", url, "--header", header, "echo", json.dumps({"text": CANARY}), cwd=tmp_path)
    assert json.loads(proc.stdout) == {"result": "***"}, proc.stdout
    # ... refused (the server's 401 body quotes the path and query it got).
    proc = _cli("call", "--url", url, "--header", f"X-Api-Key: wrong-{CANARY}", "echo", "{}", cwd=tmp_path)
    assert proc.returncode != 0 and "ERR_MCP_AUTH" in proc.stderr, proc.stderr


def test_the_canary_is_nowhere_in_what_stdio_tools_and_serve_tasks_print(tmp_path: Path) -> None:
    # tools and call over stdio: the key reaches the server through --env only.
    stdio = ["--", sys.executable, str(SERVER), "stdio"]
    proc = _cli("tools", "--env", "CANARY_TOKEN", *stdio, cwd=tmp_path)
    assert "whoami" in proc.stdout
    proc = _cli("call", "--env", "CANARY_TOKEN", "env", '{"name": "CANARY_TOKEN"}', *stdio, cwd=tmp_path)
    assert json.loads(proc.stdout) == {"result": "***"}  # the server had it; what it said was scrubbed
    proc = _cli("call", "--env", "CANARY_TOKEN", "fail", "{}", *stdio, cwd=tmp_path)
    assert proc.returncode == 1 and "cannot work like this" in proc.stderr

    # serve-tasks --check has no secret-bearing field; it runs clean with the secret in the env.
    tasks = tmp_path / "tasks.json"
    greet = {
        "name": "greet",
        "description": "Greet.",
        "inputSchema": {"type": "object"},
        "task": {"instructions": [{"action": "result", "params": {"value": "hi"}}]},
    }
    tasks.write_text(json.dumps({"tools": [greet]}))
    proc = _cli("serve-tasks", str(tasks), "--check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("variant", ["bad-command", "crash", "unreachable", "dns", "tool-error", "model"])
def test_the_canary_is_nowhere_when_things_fail(tmp_path: Path, http_port: int, variant: str) -> None:
    manifest = _manifest(tmp_path, http_port, variant=variant)
    for extra in ((), ("--json",)):
        proc = _cli("run", str(manifest), "--input", "go", *extra, cwd=tmp_path)
        assert proc.returncode != 0, (variant, proc.stdout, proc.stderr)
        assert "***" in proc.stdout + proc.stderr or variant == "model", (variant, proc.stdout, proc.stderr)


def test_a_secret_ending_with_a_line_break_is_refused_by_name(tmp_path: Path, http_port: int) -> None:
    manifest = _manifest(tmp_path, http_port)
    proc = _cli("check", str(manifest), cwd=tmp_path, env=_env(CANARY_TOKEN=CANARY + "\r\n"))
    assert proc.returncode == 1
    assert "ERR_MANIFEST_SECRET_VALUE" in proc.stdout and "canaryToken" in proc.stdout, proc.stdout


async def test_the_canary_is_nowhere_in_logs_events_or_the_journal(
    tmp_path: Path, http_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    from toolbridge import HttpClient, ToolbridgeError, load_manifest

    caplog.set_level(logging.DEBUG)  # every logger: toolbridge, mcp, httpx2, httpcore, asyncio...
    for name in ("toolbridge", "mcp", "httpx", "httpx2", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)  # restored after the test
    events: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        manifest = load_manifest(_manifest(tmp_path, http_port), secrets={"canaryToken": CANARY})
        async with manifest.open() as live:
            runtime = await live.runtime()
            runtime.subscribe(lambda event: events.append(event.to_dict()))
            result = await runtime.run(await live.agent(), "go")
            assert result.outcome == "succeeded", result
        for variant in ("crash", "unreachable", "dns", "bad-command", "tool-error"):
            manifest = load_manifest(
                _manifest(tmp_path, http_port, variant=variant), secrets={"canaryToken": CANARY}
            )
            async with manifest.open() as live:
                runtime = await live.runtime()
                runtime.subscribe(lambda event: events.append(event.to_dict()))
                failed = await runtime.run(await live.agent(), "go")
                assert failed.outcome != "succeeded"
                errors.append(f"{failed.error_code}: {failed.error_message}")
        # The Python API: credentials in the URL's userinfo and query, and in a header.
        client = HttpClient(
            f"http://user:{CANARY}@127.0.0.1:{_free_port()}/{CANARY}/mcp?api_key={CANARY}",
            headers={"Authorization": f"Bearer {CANARY}"},
            connect_timeout=5,
        )
        assert CANARY not in repr(client)
        with pytest.raises(ToolbridgeError) as info:
            async with client:
                await client.list_tools()
        errors.append(str(info.value))
        errors.append(repr(info.value))
    finally:
        records = list(caplog.records)
        caplog.clear()
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    texts = [formatter.format(r) for r in records]
    assert any(r.name.startswith("httpx") or r.name.startswith("httpcore") for r in records)
    assert any(r.name.startswith("mcp") for r in records)
    assert any("***" in t for t in texts)  # the server's stderr (argv, env) was logged, scrubbed
    leaked = [t for t in texts if CANARY in t]
    assert not leaked, leaked[:5]
    assert events and all(CANARY not in json.dumps(e) for e in events)
    assert all(CANARY not in e for e in errors), errors
    db = sqlite3.connect(tmp_path / "journal.db")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = [row for table in tables for row in db.execute(f"SELECT * FROM {table}")]
    finally:
        db.close()
    assert rows and all(CANARY not in repr(row) for row in rows)
