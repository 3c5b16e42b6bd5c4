"""`toolbridge lock`: pin the tools, prompts, resources and resource templates of MCP servers in a
lock file (see `toolbridge.pinning`).

```
toolbridge lock [--out tools.lock] [--name NAME] -- COMMAND [ARGS...]   # a stdio server
toolbridge lock [--out tools.lock] [--name NAME] --url URL              # a Streamable HTTP server
toolbridge lock [--out tools.lock] MANIFEST.yaml                        # every Mcp.* client in it
toolbridge lock --check ...                                             # compare, do not write
toolbridge lock [--secret NAME=VALUE] [--secrets-file F] MANIFEST.yaml   # its secrets, as for `run`
toolbridge lock --rollback OLD.lock (--out tools.lock | MANIFEST.yaml)   # re-approve an older lock
```

Every lock written carries `approvedAt` (now): a gateway never lets a lock file replace pins
approved later (an old copy dropped into a replica's folder is refused, logged). `--rollback
OLD` is the explicit way back: it writes OLD's pins to the lock file (`--out`, or the manifest's
`lock:` file) approved now, without contacting any server, so every replica adopts them.

A server given by command or URL is stored under `--name` (default `server`); a manifest's clients
under their document names. Entries of other servers already in the lock file are kept, so one
file can pin several servers. With `--check` nothing is written: the command prints every
difference (changed, new or removed tools, prompts, resources and templates, changed
instructions) and exits 1 when there is one, 0
when the servers match the lock.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..pinning import SIDE_KINDS, ServerLock, ToolLock, lock_server, read_lock, write_lock
from ..sanitize import visible_text
from ._manifest import _given_secrets, _secret_options
from ._output import emit, parse_headers

__all__ = ["diff_locks", "register"]

DEFAULT_OUT = "tools.lock"
DEFAULT_NAME = "server"
_MCP_KINDS = ("Mcp.StdioClient", "Mcp.HttpClient")


def register(subparsers: Any) -> None:
    """Add the `lock` command."""
    lock = subparsers.add_parser(
        "lock",
        help="pin the tool definitions of MCP servers in a lock file",
        description=(
            "Write a lock file with a SHA-256 of each tool's definition and of the server's "
            "instructions. Give a stdio server after `--`, a Streamable HTTP server with --url, or a "
            "manifest file whose Mcp.StdioClient / Mcp.HttpClient documents are locked."
        ),
    )
    lock.add_argument(
        "--out",
        default=None,
        help=f"the lock file (default: the manifest's one `lock:` file, else {DEFAULT_OUT})",
    )
    lock.add_argument("--name", default=None, help=f"the server's name in the lock (default: {DEFAULT_NAME})")
    lock.add_argument("--url", help="Streamable HTTP endpoint of the server")
    lock.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="an HTTP header for --url"
    )
    lock.add_argument(
        "--mode",
        choices=("auto", "legacy", "modern"),
        default=None,
        help="protocol negotiation for --url or `-- COMMAND` (a manifest says `mode:` per client)",
    )
    lock.add_argument("--check", action="store_true", help="compare with the lock file instead of writing it")
    lock.add_argument(
        "--rollback",
        metavar="OLD_LOCK",
        default=None,
        help="write OLD_LOCK's pins to the lock file, approved now (contacts no server)",
    )
    _secret_options(lock)
    lock.add_argument(
        "words",
        nargs="*",
        metavar="MANIFEST | -- COMMAND [ARGS...]",
        help="a manifest, or after `--` a stdio server's command line",
    )
    lock.set_defaults(handler=_run_lock, server_command=[])


async def _lock_one(args: argparse.Namespace, command: list[str]) -> dict[str, ServerLock]:
    from ..clients import HttpClient, StdioClient

    name = args.name or DEFAULT_NAME
    client: Any
    if args.url:
        client = HttpClient(args.url, headers=parse_headers(args.header), mode=args.mode or "auto")
    else:
        if args.header:
            raise ConfigError("--header applies to --url only", code="ERR_INVALID_INPUT")
        client = StdioClient(command[0], command[1:], mode=args.mode or "auto")
    async with client:
        return {name: await lock_server(client)}


def _load_for_locking(path: str, secrets: dict[str, str], secrets_file: str | None) -> Any:
    """The manifest, analyzed; a missing or stale `lock:` file is no reason not to lock it again,
    nor are the secrets only a gateway's HTTP clients need (locking starts no gateway)."""
    from ..gateway import http_only_secret
    from ..manifest import load_manifest

    def tolerate(analysis: Any, diagnostic: Any) -> bool:
        return diagnostic.code == "ERR_MANIFEST_LOCK" or http_only_secret(analysis, diagnostic)

    return load_manifest(path, secrets=secrets, secrets_file=secrets_file, tolerate=tolerate)


def _manifest_lock_file(manifest: Any) -> Path | None:
    """The one `lock:` file the manifest's tool providers name (None for none or several)."""
    files = {
        (manifest.analysis.base_dir / doc.model.lock).resolve()
        for doc in manifest.analysis.of_kind("AiMcp.ToolProvider")
        if getattr(doc.model, "lock", None) is not None
    }
    return files.pop() if len(files) == 1 else None


async def _lock_manifest(manifest: Any, path: str) -> dict[str, ServerLock]:
    names = [doc.name for kind in _MCP_KINDS for doc in manifest.analysis.of_kind(kind)]
    if not names:
        raise ConfigError(f"{path} declares no Mcp.StdioClient or Mcp.HttpClient", code="ERR_INVALID_INPUT")
    locks: dict[str, ServerLock] = {}
    async with AsyncExitStack() as stack:
        live = await stack.enter_async_context(manifest.open())
        for name in names:
            locks[name] = await lock_server(await live.build(name))
    return locks


def diff_locks(pinned: ServerLock | None, current: ServerLock) -> list[str]:
    """Human-readable differences between a pinned server and what it offers now (empty: none)."""
    if pinned is None:
        return ["server is not in the lock"]
    lines: list[str] = []
    if pinned.instructions != current.instructions:
        lines.append(f"instructions changed: {pinned.instructions} -> {current.instructions}")
    kinds = [("tool", pinned.tools, current.tools)]
    kinds += [(kind[:-1], pinned.side(kind), current.side(kind)) for kind in SIDE_KINDS]
    for what, before, after in kinds:
        for key in sorted(set(before) | set(after)):
            old, new = before.get(key), after.get(key)
            if old == new:
                continue
            if old is None:
                lines.append(f"new {what} {key}: {new}")
            elif new is None:
                lines.append(f"removed {what} {key}: {old}")
            else:
                lines.append(f"changed {what} {key}: {old} -> {new}")
    return lines


def _rollback(args: argparse.Namespace) -> int:
    """`--rollback OLD`: OLD's pins written to the lock file as the newest approval."""
    before = list(args.words)
    if args.check or args.url or args.server_command or len(before) > 1:
        raise ConfigError(
            "--rollback takes the old lock and --out FILE or one MANIFEST", code="ERR_INVALID_INPUT"
        )
    if args.out:
        out = Path(args.out)
    elif before:
        manifest = _load_for_locking(before[0], _given_secrets(args), args.secrets_file)
        out = _manifest_lock_file(manifest) or Path(DEFAULT_OUT)
    else:
        raise ConfigError("--rollback needs --out FILE or the MANIFEST whose lock to roll back")
    old = read_lock(args.rollback)
    old.approved_at = time.time()
    write_lock(out, old)
    emit(f"rolled back {visible_text(os.fspath(out))} to {visible_text(args.rollback)}, approved now")
    return 0


def _run_lock(args: argparse.Namespace) -> int:
    if args.rollback is not None:
        return _rollback(args)
    before, command = list(args.words), list(args.server_command)
    # A ToolbridgeError is printed as one line with exit status 1 by `main`.
    sources = sum(1 for present in (bool(args.url), bool(command), bool(before)) if present)
    if sources != 1:
        raise ConfigError(
            "give exactly one server: -- COMMAND [ARGS...], --url URL, or a MANIFEST file",
            code="ERR_INVALID_INPUT",
        )
    if before:
        if len(before) > 1:
            raise ConfigError(f"one manifest at a time, got {before!r}", code="ERR_INVALID_INPUT")
        if args.name:
            raise ConfigError("--name does not apply to a manifest (its documents name the servers)")
        if args.mode:
            raise ConfigError(
                "--mode does not apply to a manifest (set `mode:` on its Mcp.StdioClient / Mcp.HttpClient)",
                code="ERR_INVALID_INPUT",
            )
        manifest = _load_for_locking(before[0], _given_secrets(args), args.secrets_file)
        out = Path(args.out) if args.out else (_manifest_lock_file(manifest) or Path(DEFAULT_OUT))
        if args.check:
            read_lock(out)  # a missing or broken lock file is said before any server starts
        current = asyncio.run(_lock_manifest(manifest, before[0]))
    else:
        out = Path(args.out or DEFAULT_OUT)
        if args.check:
            read_lock(out)
        current = asyncio.run(_lock_one(args, command))
    shown = visible_text(os.fspath(out))
    if args.check:
        existing = read_lock(out)
        problems = 0
        for name, server in current.items():
            for line in diff_locks(existing.servers.get(name), server):
                emit(f"{visible_text(name)}: {visible_text(line)}")
                problems += 1
        if problems == 0:
            emit(f"{visible_text(', '.join(current))}: matches {shown}")
        return 1 if problems else 0
    existing = read_lock(out) if out.exists() else ToolLock()
    existing.servers.update(current)
    existing.approved_at = time.time()
    write_lock(out, existing)
    for name, server in current.items():
        side = ", ".join(f"{len(server.side(kind))} {kind}" for kind in SIDE_KINDS)
        emit(f"locked {len(server.tools)} tools of {visible_text(name)} in {shown} ({side})")
    return 0
