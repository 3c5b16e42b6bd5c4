"""Starting the gateway in one step: what a stdio gateway needs, and a desktop client's config.

- `http_only_secret`: the secrets only HTTP clients need (a client's bearer `token`, the `oauth`
  settings of a `Gateway` document, a client's `oauth` rule) are not required by a gateway served
  over stdio, nor by `toolbridge lock`: a desktop user does not hold the token of the team's
  VS Code client.
- `client_config(client, …)`: the JSON a client application reads to start (stdio) or reach
  (HTTP) the gateway, for Claude Desktop, VS Code and Cursor (`toolbridge gateway MANIFEST
  --print-config CLIENT`): absolute paths to the `toolbridge` command and the manifest, and, for
  HTTP, the URL with a placeholder the client fills in for the token, never a secret's value.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..manifest import AnalyzedManifest, Diagnostic

__all__ = [
    "CLIENTS",
    "client_config",
    "config_hint",
    "http_only_secret",
    "listening_url",
    "stdio_secrets",
    "toolbridge_command",
]

CLIENTS = ("claude", "vscode", "cursor")
"""The client applications `client_config` writes for."""

Client = Literal["claude", "vscode", "cursor"]

TOKEN_VARIABLE = "TOOLBRIDGE_GATEWAY_TOKEN"
"""The environment variable Cursor's HTTP config reads the bearer token from."""


def _http_only(path: tuple[str | int, ...]) -> bool:
    if not path:
        return False
    if path[0] in ("oauth", "console"):  # the console is served over HTTP only
        return True
    return len(path) >= 3 and path[0] == "clients" and path[2] in ("token", "oauth")


def http_only_secret(analysis: AnalyzedManifest, diagnostic: Diagnostic) -> bool:
    """Whether `diagnostic` is an unresolved secret that only the gateway's HTTP clients need.

    For `load_manifest(tolerate=...)`: a `${{ secrets.NAME }}` without a value under a `Gateway`
    document's `clients[].token`, `clients[].oauth`, `oauth` or `console`.
    """
    if diagnostic.code != "ERR_MANIFEST_SECRET_UNRESOLVED":
        return False
    where = (diagnostic.line, diagnostic.column)
    for doc in analysis.of_kind("Gateway"):
        for path, pos in doc.source.values.items():
            if (pos.line, pos.column) == where and _http_only(path):
                return True
    return False


def toolbridge_command() -> list[str]:
    """The absolute command line that starts this `toolbridge` (its script, else `python -m`)."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name in ("toolbridge", "toolbridge.exe") and script.is_file():
        return [os.path.abspath(script)]
    found = shutil.which("toolbridge")
    if found is not None and Path(found).parent == Path(sys.executable).parent:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "toolbridge.cli"]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "toolbridge"


def listening_url(host: str, port: int) -> str:
    """`http://HOST:PORT/mcp` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/mcp"


def client_config(
    client: Client,
    manifest: str | os.PathLike[str],
    *,
    name: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    secrets_file: str | os.PathLike[str] | None = None,
) -> dict[str, object]:
    """The config `client` reads to start (stdio) or reach (HTTP) the manifest's gateway.

    Nothing is started and no secret's value is needed (the manifest is checked; unresolved
    secrets are no error here). Over stdio: the absolute `toolbridge` command with `gateway`, the
    absolute manifest, `--name` and `--secrets-file` (absolute) when given. Over HTTP: the URL
    and, when the gateway's clients have bearer tokens, a placeholder for the token (VS Code asks
    for it; Cursor reads `$TOOLBRIDGE_GATEWAY_TOKEN`); with OAuth the client follows the 401.

    Args:
        client: `claude` (claude_desktop_config.json), `vscode` (.vscode/mcp.json) or `cursor`
            (~/.cursor/mcp.json).
        manifest: the manifest file.
        name: the `Gateway` document (default: the only one).
        transport: `stdio` (the client starts `toolbridge gateway`) or `http` (it connects).
        host: the HTTP host clients connect to.
        port: the HTTP port clients connect to.
        secrets_file: a secrets file the stdio gateway reads (its path, never its content).

    Raises:
        ConfigError: the manifest has errors, no such gateway, Claude Desktop over HTTP (it
            starts local servers: `ERR_INVALID_INPUT`), or port 0 over HTTP (`ERR_CONFIG`).
    """
    from ._build import gateway_doc_of

    doc = gateway_doc_of(manifest, name, secrets_file=secrets_file)
    key = _key(doc.metadata.name)
    if transport == "stdio":
        command = toolbridge_command()
        args = [*command[1:], "gateway", os.path.abspath(manifest)]
        if name:
            args += ["--name", name]
        if secrets_file is not None:
            args += ["--secrets-file", os.path.abspath(secrets_file)]
        entry: dict[str, object] = {"command": command[0], "args": args}
        if client == "vscode":
            return {"servers": {key: {"type": "stdio", **entry}}}
        return {"mcpServers": {key: entry}}
    if client == "claude":
        raise ConfigError(
            "Claude Desktop starts local servers from its config: print it for the stdio transport "
            "(add the HTTP URL in Claude's Settings > Connectors instead)",
            code="ERR_INVALID_INPUT",
        )
    if not 0 < port < 65536:
        raise ConfigError(f"a client config needs the port clients connect to, not {port}", code="ERR_CONFIG")
    url = listening_url(host, port)
    token = doc.oauth is None and any(c.token for c in doc.clients)
    if client == "vscode":
        server: dict[str, object] = {"type": "http", "url": url}
        out: dict[str, object] = {}
        if token:
            token_id = f"{key}-token"
            out["inputs"] = [
                {
                    "id": token_id,
                    "type": "promptString",
                    "password": True,
                    "description": f"{doc.metadata.name} gateway token",
                }
            ]
            server["headers"] = {"Authorization": f"Bearer ${{input:{token_id}}}"}
        out["servers"] = {key: server}
        return out
    server = {"url": url}
    if token:
        server["headers"] = {"Authorization": f"Bearer ${{env:{TOKEN_VARIABLE}}}"}
    return {"mcpServers": {key: server}}


def config_hint(
    client: Client,
    manifest: str | os.PathLike[str] | None = None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    secrets_file: str | os.PathLike[str] | None = None,
) -> str:
    """Where the printed config goes, and (stdio, no `secrets_file`) which secrets the gateway
    will read from its environment (one line, for stderr; names only, never a value)."""
    where = {
        "claude": "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, "
        "Windows: %APPDATA%\\Claude\\), then restart Claude Desktop",
        "vscode": ".vscode/mcp.json in the workspace (or the user mcp.json: MCP: Open User Configuration)",
        "cursor": "~/.cursor/mcp.json (or .cursor/mcp.json in the project)",
    }[client]
    extra = ""
    if transport == "http":
        extra = "; the gateway must be running (toolbridge gateway MANIFEST --transport http)"
        if client == "cursor":
            extra += f"; Cursor reads the token from ${TOKEN_VARIABLE}"
    elif manifest is not None and secrets_file is None:
        names = stdio_secrets(manifest)
        if names:
            shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
            extra = (
                f"; the gateway reads the secrets {shown} from its environment, which a desktop "
                "application does not share: print this again with --secrets-file FILE, or add them "
                'under "env"'
            )
    return f"toolbridge: merge this into {where}{extra}"


def stdio_secrets(manifest: str | os.PathLike[str]) -> list[str]:
    """The names of the secrets a stdio gateway of `manifest` reads (not those only HTTP clients
    need), as environment variable names (`openaiKey` -> `OPENAI_KEY`), in file order."""
    from ..manifest import Secret, analyze_file, upper_snake

    analysis = analyze_file(manifest, env={})
    names: list[str] = []

    def walk(value: object, path: tuple[str | int, ...], gateway: bool) -> None:
        if isinstance(value, Secret):
            if not (gateway and _http_only(path)):
                names.extend(n for n in (upper_snake(n) or n for n in value.names) if n not in names)
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, (*path, key), gateway)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(inner, (*path, index), gateway)

    for doc in analysis.docs.values():
        walk(doc.source.data, (), doc.kind == "Gateway")
    return names
