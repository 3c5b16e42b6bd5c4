"""Helpers of the gateway tests: manifests around real upstreams, and the gateway run as a real
process (`toolbridge gateway`) that the official SDK client talks to."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from subprocess_helpers import free_port as free_port
from subprocess_helpers import listening, stop_process

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "upstream_server.py"
VENV_BIN = Path(sys.executable).parent
TOOLBRIDGE = str(VENV_BIN / "toolbridge")


def clients_block(*clients: tuple[str, str]) -> str:
    """A `Gateway`'s `clients:` list. Each (name, grants) is an identity allowed `grants` (the
    inside of the `allow: [...]` list): `me` is the local (stdio) client, any other name a bearer
    identity whose token is the secret `<name>Token`."""
    lines = ["clients:"]
    for name, grants in clients:
        lines.append(f"  - name: {name}")
        lines.append("    local: true" if name == "me" else f'    token: "${{{{ secrets.{name}Token }}}}"')
        lines.append(f"    permissions: {{ allow: [{grants}] }}")
    return "\n".join(lines)


def policy_doc(runtime: str = "permissions: { allow: [] }", *, durable: bool = False) -> str:
    """The `Policy` runtime a test gateway refers to (`runtime: !ref Policy`), with its journal
    in `journal.db` beside the manifest when `durable`."""
    journal = "profile: durable\njournal: journal.db\n" if durable else ""
    return f"---\nkind: Runtime\nmetadata: {{ name: Policy }}\n{journal}{runtime}\n"


def stdio_upstream(
    name: str, argv: list[str], *, env: dict[str, str] | None = None, mode: str = "legacy"
) -> str:
    """The documents of the provider `<name>` (`provider: !ref <name>`): the stdio upstream
    `<name>Mcp` running `argv`, `env` mapping a variable to the secret it takes."""
    variables = ", ".join(f'{var}: "${{{{ secrets.{secret} }}}}"' for var, secret in (env or {}).items())
    return f"""---
kind: Mcp.StdioClient
metadata: {{ name: {name}Mcp }}
command: {json.dumps(argv[0])}
args: {json.dumps(argv[1:])}
{f"env: {{ {variables} }}" if variables else ""}
mode: {mode}
---
kind: AiMcp.ToolProvider
metadata: {{ name: {name} }}
client: !ref {name}Mcp
"""


def upstream_manifest(
    tmp_path: Path,
    *,
    clients: str = "",
    binding: str = "",
    runtime: str = "permissions: { allow: [] }",
    lock: str | None = None,
    extra: str = "",
    gateway: str = "",
    upstream: Path = UPSTREAM,
    prefix: str = "up_",
) -> Path:
    """A manifest with a `Gateway` in front of `upstream` (default `upstream_server.py`, prefix
    `up_`; `prefix=""` serves its tools under their own names), run with `tmp_path/state`."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    text = f"""
kind: Gateway
metadata: {{ name: TestGate }}
runtime: !ref Policy
{f"lock: {lock}" if lock else ""}
{gateway}
toolProviders:
  - provider: !ref Up
{f"    prefix: {prefix}" if prefix else ""}
{binding}
{clients}
{policy_doc(runtime, durable=True)}{stdio_upstream("Up", [sys.executable, str(upstream), str(state)])}
{extra}
"""
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def calls_of(tmp_path: Path) -> list[str]:
    """The tool calls that reached the upstream, in order."""
    log = tmp_path / "state" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def journal_calls(tmp_path: Path) -> list[tuple[str, str, str, str | None, bool]]:
    """(principal, tool, call outcome, code, request sent) of every call row in the manifest's
    `journal.db` beside it, oldest first."""
    from toolbridge.runtime._journal_sqlite import Journal

    journal = Journal.open_existing(str(tmp_path / "journal.db"))
    try:
        runs = [journal.get_run(r.run_id) for r in reversed(journal.list_runs(50))]
    finally:
        journal.close()
    return [
        (run.principal or "", c.tool_id, c.outcome, c.error_code, c.request_sent)
        for run in runs
        if run is not None
        for c in run.calls
    ]


def stdio_params(manifest: Path, *extra: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    if "PYTHONPATH" in os.environ:  # a worktree's own sources (else the installed package runs)
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(
        command=TOOLBRIDGE, args=["gateway", str(manifest), *extra], env={**base, **(env or {})}
    )


@asynccontextmanager
async def gateway_stdio(manifest: Path, mode: str = "legacy", **kwargs: Any) -> AsyncIterator[Client]:
    """The official SDK client connected to `toolbridge gateway MANIFEST` over stdio."""
    async with Client(stdio_params(manifest, env=kwargs.pop("env", None)), mode=mode, **kwargs) as client:  # type: ignore[arg-type]
        yield client


@contextmanager
def gateway_http(
    manifest: Path, *extra: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[str]:
    """`toolbridge gateway MANIFEST --transport http` as a process; yields its MCP URL."""
    argv = [TOOLBRIDGE, "gateway", str(manifest), "--transport", "http", "--port", "{port}", *extra]
    with listening(argv, "the gateway", env, port=port, seconds=30) as url:
        yield url


stop = stop_process
