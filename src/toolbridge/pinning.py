"""Tool pinning: a lock file of tool definitions, and a provider that offers only what it pins.

A server that was trusted once can change a tool's description or schema later (a "rug pull"), or
add tools nobody reviewed. Pinning makes such changes visible and inert:

1. `toolbridge lock` (or `lock_server` / `write_lock`) records, per server, a SHA-256 of each
   tool's canonical definition and of the server's instructions in a JSON lock file.
2. `PinnedToolProvider(source, lock, server=...)` wraps a provider or client. It offers a tool to
   the model only when the tool's current hash equals the pinned one. A changed tool is left out
   of `list_tools()` and a call to it raises `PolicyError` with code `ERR_TOOL_PIN_MISMATCH`, naming
   the pinned and the current hash, until the lock is renewed (or `approve(name)` pins the current
   definition in memory). A tool absent from the lock is treated the same way until approved. If
   the server's instructions changed, the whole server is blocked (they reach the model too).

What is hashed is the *raw* definition as the server sent it: `name`, `title`, `description`,
`inputSchema`, `outputSchema` and `annotations`, serialised as canonical JSON (sorted keys, no
spaces, UTF-8, absent fields as null). Hashing the raw text means that a change which only adds an
invisible character or a terminal escape still counts as a change. A name the server lists more
than once is pinned as a whole: one hash over all its entries (the sorted hashes, hashed), the
same in the lock file and in a run, so `toolbridge lock --check` and `PinnedToolProvider` judge
every entry alike. What the model then sees is
cleaned: the description (by `McpToolProvider`) and every `description`/`title` string inside the
parameter and output schemas (here) go through `sanitize.clean_text`.

Sources: a `McpToolProvider` or an MCP client (`StdioClient`, `HttpClient`, `InProcessClient`) give
raw definitions; any other `ToolProvider` (for example `FunctionTools`) is pinned on its
`ToolSpec`s (there is nothing rawer to hash, and no instructions).

Prompts, resources and resource templates of an MCP server are pinned the same way
(`SIDE_FIELDS`, `side_digests`, `PinnedToolProvider.side_status`; the gateway withholds what does
not match). A lock file without them (written before) records none: each is `new`.

Lock file (version 1; `prompts`, `resources`, `templates` optional):

```json
{
  "version": 1,
  "approvedAt": 1796181600.0,
  "servers": {
    "files": {
      "instructions": "sha256:…" | null,
      "tools": {"read_file": "sha256:…", "write_file": "sha256:…"},
      "prompts": {"review": "sha256:…"}, "resources": {"file:///a": "sha256:…"},
      "templates": {"file:///{path}": "sha256:…"}
    }
  }
}
```

`approvedAt` (optional; `toolbridge lock` writes it) is when the pins were approved: a gateway
never lets a lock file replace pins approved later (`toolbridge lock --rollback FILE` re-approves
an older lock on purpose).

Server names are chosen by whoever writes the lock (the manifest document name, or `--name`),
never taken from the server's self-reported `serverInfo.name`, which any server can spoof.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel

from ._bounded import MAX_JSON_FILE_BYTES, InputLimitError, loads_json, read_text_file
from ._side_listing import SideKind, side_listing
from .clients import HttpClient, InProcessClient, McpClient, StdioClient
from .errors import ConfigError, PolicyError
from .sanitize import clean_text, model_spec
from .tools import ToolProvider, ToolResult, ToolSpec, provider_generation

__all__ = [
    "LOCK_VERSION",
    "PIN_MISMATCH",
    "SIDE_FIELDS",
    "SIDE_KINDS",
    "PinStatus",
    "PinnedToolProvider",
    "ServerLock",
    "SideKind",
    "ToolLock",
    "canonical_side",
    "canonical_tool",
    "hash_instructions",
    "hash_tool",
    "lock_server",
    "read_lock",
    "side_digests",
    "side_listing",
    "write_lock",
]

LOCK_VERSION = 1
"""The lock file format this module reads and writes."""

PIN_MISMATCH = "ERR_TOOL_PIN_MISMATCH"
"""The `PolicyError` code for a tool (or server) whose definition does not match the lock."""

CANONICAL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The fields of a tool definition that are pinned (wire names)."""


SIDE_KINDS: tuple[SideKind, ...] = ("prompts", "resources", "templates")
"""What else of a server is pinned besides its tools."""

SIDE_FIELDS: dict[SideKind, tuple[str, ...]] = {
    "prompts": ("name", "title", "description", "arguments"),
    "resources": ("uri", "name", "title", "description", "mimeType"),
    "templates": ("uriTemplate", "name", "title", "description", "mimeType"),
}
"""The pinned fields of a prompt, a resource and a resource template (wire names); a prompt's
`arguments` are pinned with each argument's `name`, `title`, `description` and `required`."""

SIDE_KEYS: dict[SideKind, str] = {"prompts": "name", "resources": "uri", "templates": "uriTemplate"}
"""The field that names a pinned prompt, resource or template in the lock."""

_ARGUMENT_FIELDS = ("name", "title", "description", "required")


def _wire(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def canonical_tool(tool: object) -> dict[str, object]:
    """The pinned part of one tool definition, in wire form.

    Args:
        tool: an `mcp_types.Tool`, its wire dict, or a `ToolSpec`.

    Returns:
        A dict with exactly the keys of `CANONICAL_FIELDS` (absent ones are None).

    Raises:
        ConfigError: `tool` is none of these (`ERR_INVALID_INPUT`).
    """
    if isinstance(tool, ToolSpec):
        return {
            "name": tool.name,
            "title": None,
            "description": tool.description or None,
            "inputSchema": _plain(tool.parameters),
            "outputSchema": _plain(tool.output_schema),
            "annotations": _plain(tool.annotations),
        }
    data = _wire(tool)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ConfigError(f"not a tool definition: {type(tool).__name__}", code="ERR_INVALID_INPUT")
    return {key: _plain(data.get(key)) for key in CANONICAL_FIELDS}


def _plain(value: object) -> object:
    """Mappings and sequences as plain dicts and lists (so JSON sees one shape)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return _wire(value) if isinstance(value, BaseModel) else value


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_tool(tool: object) -> str:
    """`sha256:<hex>` of the canonical JSON of a tool definition (see `canonical_tool`).

    Raises:
        ConfigError: `tool` is not a tool definition, or holds values JSON cannot encode.
    """
    try:
        return _digest(canonical_tool(tool))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"tool definition cannot be hashed: {exc}", code="ERR_INVALID_INPUT") from exc


def canonical_side(kind: SideKind, item: object) -> dict[str, object]:
    """The pinned part of a prompt, resource or template definition (`SIDE_FIELDS`), in wire form.

    Raises:
        ConfigError: `item` has no string key field (`ERR_INVALID_INPUT`).
    """
    data = _wire(item)
    key = SIDE_KEYS[kind]
    if not isinstance(data, Mapping) or not isinstance(data.get(key), str):
        raise ConfigError(f"not a {kind[:-1]} definition: {type(item).__name__}", code="ERR_INVALID_INPUT")
    out = {name: _plain(data.get(name)) for name in SIDE_FIELDS[kind]}
    if kind == "prompts":
        arguments = out["arguments"] if isinstance(out["arguments"], list) else []
        out["arguments"] = [
            {name: a.get(name) for name in _ARGUMENT_FIELDS} for a in arguments if isinstance(a, Mapping)
        ]
    return out


def side_digests(kind: SideKind, items: Sequence[object]) -> list[tuple[str, str]]:
    """`(key, hash)` of every listed prompt, resource or template, one hash per key.

    A key listed more than once is pinned as a whole, as a tool name is (see `_by_name`).

    Raises:
        ConfigError: an item is not such a definition, or cannot be hashed.
    """
    entries: list[tuple[str, str]] = []
    for item in items:
        canonical = canonical_side(kind, item)
        try:
            entries.append((str(canonical[SIDE_KEYS[kind]]), _digest(canonical)))  # a str: checked
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"{kind[:-1]} definition cannot be hashed: {exc}", code="ERR_INVALID_INPUT"
            ) from exc
    groups: dict[str, list[str]] = {}
    for key, digest in entries:
        groups.setdefault(key, []).append(digest)
    return [(key, _digest(sorted(group)) if len(group) > 1 else group[0]) for key, group in groups.items()]


def hash_instructions(instructions: str | None) -> str | None:
    """`sha256:<hex>` of the server's instructions (UTF-8), or None when it gave none."""
    if instructions is None:
        return None
    return "sha256:" + hashlib.sha256(instructions.encode("utf-8")).hexdigest()


@dataclass
class ServerLock:
    """The pins of one server.

    Attributes:
        tools: tool name -> `sha256:` hash of its canonical definition.
        instructions: hash of the server's instructions (None: it gave none).
    """

    tools: dict[str, str] = field(default_factory=dict)
    instructions: str | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    """prompt name -> hash of its definition (`hash_prompt`)."""
    resources: dict[str, str] = field(default_factory=dict)
    """resource URI -> hash of its definition (`hash_resource`)."""
    templates: dict[str, str] = field(default_factory=dict)
    """resource template (`uriTemplate`) -> hash of its definition (`hash_template`)."""

    def side(self, kind: SideKind) -> dict[str, str]:
        """The pins of `prompts`, `resources` or `templates`."""
        if kind == "prompts":
            return self.prompts
        return self.resources if kind == "resources" else self.templates

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "instructions": self.instructions,
            "tools": dict(sorted(self.tools.items())),
        }
        for kind in SIDE_KINDS:
            out[kind] = dict(sorted(self.side(kind).items()))
        return out


@dataclass
class ToolLock:
    """A whole lock file: server name -> `ServerLock`."""

    servers: dict[str, ServerLock] = field(default_factory=dict)
    approved_at: float | None = None
    """When these pins were approved (epoch seconds; `toolbridge lock` writes it as
    `approvedAt`). An approval never gives way to an older one; None (a lock written before):
    the file's modification time stands in."""

    def server(self, name: str) -> ServerLock:
        """The pins of server `name`.

        Raises:
            ConfigError: the lock has no such server (`ERR_LOCK_INVALID`).
        """
        try:
            return self.servers[name]
        except KeyError:
            known = ", ".join(sorted(self.servers)) or "none"
            raise ConfigError(
                f"the lock has no server named {name!r} (servers: {known})", code="ERR_LOCK_INVALID"
            ) from None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"version": LOCK_VERSION}
        if self.approved_at is not None:
            data["approvedAt"] = self.approved_at
        data["servers"] = {name: lock.to_json() for name, lock in sorted(self.servers.items())}
        return data


def _invalid(path: str, why: str) -> ConfigError:
    return ConfigError(f"lock file {path}: {why}", code="ERR_LOCK_INVALID", details={"path": path})


def _is_hash(value: object) -> bool:
    return isinstance(value, str) and value.startswith("sha256:") and len(value) == 71


def read_lock(path: str | os.PathLike[str]) -> ToolLock:
    """Read and validate a lock file.

    Raises:
        ConfigError: `ERR_LOCK_INVALID` when the file is missing, not JSON, of another version, or
            malformed (the message says where).
    """
    where = os.fspath(path)
    try:
        data = loads_json(read_text_file(where, max_bytes=MAX_JSON_FILE_BYTES))
    except InputLimitError as exc:
        if exc.reason == "missing":
            raise _invalid(where, "not found (write one with `toolbridge lock`)") from None
        raise ConfigError(
            f"{exc.where(where)}: the lock file {exc.message}",
            code="ERR_LOCK_INVALID",
            details={"path": where},
        ) from None
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION:
        raise _invalid(where, f'expected an object with "version": {LOCK_VERSION}')
    servers = data.get("servers")
    if not isinstance(servers, dict):
        raise _invalid(where, '"servers" must be an object')
    approved = data.get("approvedAt")
    if approved is not None and (
        isinstance(approved, bool) or not isinstance(approved, (int, float)) or not 0 <= approved < 1e11
    ):
        raise _invalid(where, '"approvedAt" must be a time in epoch seconds')
    lock = ToolLock(approved_at=None if approved is None else float(approved))
    for name, entry in servers.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("tools"), dict):
            raise _invalid(where, f'servers.{name} must be an object with a "tools" object')
        instructions = entry.get("instructions")
        if instructions is not None and not _is_hash(instructions):
            raise _invalid(where, f"servers.{name}.instructions is not a sha256: hash")
        pins = {kind: _pins_of(where, entry, str(name), kind) for kind in ("tools", *SIDE_KINDS)}
        lock.servers[str(name)] = ServerLock(
            tools=pins["tools"],
            instructions=instructions,
            prompts=pins["prompts"],
            resources=pins["resources"],
            templates=pins["templates"],
        )
    return lock


def _pins_of(where: str, entry: Mapping[str, object], server: str, kind: str) -> dict[str, str]:
    """One `{key: hash}` object of a server's entry (absent side kinds: none recorded)."""
    value = entry.get(kind, {})
    if not isinstance(value, dict):
        raise _invalid(where, f"servers.{server}.{kind} must be an object")
    pins: dict[str, str] = {}
    for key, digest in value.items():
        if not _is_hash(digest):
            raise _invalid(where, f"servers.{server}.{kind}.{key} is not a sha256: hash")
        pins[str(key)] = digest
    return pins


def write_lock(path: str | os.PathLike[str], lock: ToolLock) -> None:
    """Write `lock` as JSON (atomically: a temporary file then a rename).

    Raises:
        ConfigError: the file cannot be written (`ERR_CONFIG`).
    """
    target = Path(os.fspath(path))
    text = json.dumps(lock.to_json(), indent=2, ensure_ascii=False) + "\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".lock-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        raise ConfigError(f"cannot write lock file {target}: {exc}", details={"path": str(target)}) from exc


# ------------------------------------------------------------------------------------------- sources


class _Source:
    """Raw definitions and calls of whatever `PinnedToolProvider` wraps."""

    def __init__(self, source: object) -> None:
        from .bridge import McpToolProvider

        self.client: McpClient | None = None
        if isinstance(source, McpToolProvider):
            self.provider: ToolProvider = source
            self.client = source.client
        elif hasattr(source, "server_info") and hasattr(source, "instructions"):
            # An MCP client (it also has list_tools/call_tool, but returns wire types).
            client = cast(McpClient, source)  # the client's shape, by the two names it has
            self.provider = McpToolProvider(client)
            self.client = client
        elif isinstance(source, ToolProvider):
            self.provider = source
        else:
            raise ConfigError(
                f"PinnedToolProvider needs a ToolProvider or an MCP client, got {type(source).__name__}",
                code="ERR_INVALID_INPUT",
            )

    async def definitions(self) -> list[tuple[str, str, ToolSpec]]:
        """(name, hash of the name's definitions, the spec a model would see) for every entry.

        A name listed more than once gets one hash for all its entries (see `_by_name`), so
        every entry of it is judged alike, by the lock file and by a run.
        """
        if self.client is None:
            return _by_name([(spec.name, hash_tool(spec), spec) for spec in await self.provider.list_tools()])
        from .bridge import tool_to_spec

        return _by_name(
            [(tool.name, hash_tool(tool), tool_to_spec(tool)) for tool in await self.client.list_tools()]
        )

    def instructions(self) -> str | None:
        if self.client is None:
            return None
        value = self.client.instructions
        return value if isinstance(value, str) else None


def _by_name(entries: list[tuple[str, str, ToolSpec]]) -> list[tuple[str, str, ToolSpec]]:
    """The entries with one hash per name: a name listed several times is pinned as a whole.

    Its hash is the SHA-256 of the sorted hashes of its entries, so a duplicate added, removed or
    changed is a change of that name, whatever order the server lists them in.
    """
    hashes: dict[str, list[str]] = {}
    for name, digest, _ in entries:
        hashes.setdefault(name, []).append(digest)
    if all(len(group) == 1 for group in hashes.values()):
        return entries
    combined = {
        name: _digest(sorted(group)) if len(group) > 1 else group[0] for name, group in hashes.items()
    }
    return [(name, combined[name], spec) for name, _, spec in entries]


async def _side_pins(client: McpClient) -> dict[SideKind, dict[str, str]]:
    """The hashes of everything but tools that an MCP client's server offers now."""
    if not isinstance(client, HttpClient | InProcessClient | StdioClient):  # not a toolbridge client:
        return {kind: {} for kind in SIDE_KINDS}  # nothing else to pin
    conn = client._ready_connection() or await client._connection()
    sdk = client._sdk_of(conn)
    out: dict[SideKind, dict[str, str]] = {}
    for kind in SIDE_KINDS:
        try:
            items = await side_listing(sdk, kind)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"listing the server's {kind} failed ({type(exc).__name__}): {exc}", code="ERR_LOCK_INVALID"
            ) from None
        out[kind] = dict(side_digests(kind, items))
    return out


async def lock_server(source: object) -> ServerLock:
    """Pin what `source` offers now: every tool's, prompt's, resource's and resource template's
    hash, and the instructions' hash (an MCP client's server only: other sources have no prompts).

    Args:
        source: an MCP client, a `McpToolProvider`, or any `ToolProvider`.

    Raises:
        ConfigError: `source` is none of these.
        McpError: listing the tools failed (its own subclass and code).
    """
    src = _Source(source)
    definitions = await src.definitions()
    side = await _side_pins(src.client) if src.client is not None else {k: {} for k in SIDE_KINDS}
    return ServerLock(
        tools={name: digest for name, digest, _ in definitions},
        instructions=hash_instructions(src.instructions()),
        prompts=side["prompts"],
        resources=side["resources"],
        templates=side["templates"],
    )


# ------------------------------------------------------------------------------------------ provider


@dataclass(frozen=True)
class PinStatus:
    """How one tool compares with the lock (see `PinnedToolProvider.status`).

    Attributes:
        name: the tool.
        state: `pinned` (offered), `changed` (hash differs), `new` (not in the lock),
            `approved` (not pinned in the file but approved in memory), `blocked` (the server's
            instructions changed, so nothing is offered).
        pinned: the hash in the lock (None for a new tool).
        current: the hash of what the server offers now.
    """

    name: str
    state: Literal["pinned", "changed", "new", "approved", "blocked"]
    pinned: str | None
    current: str


@runtime_checkable
class _TakesContext(Protocol):
    """A provider whose `call_tool` takes the caller's context (`accepts_context = True`)."""

    accepts_context: object

    async def call_tool(
        self, name: str, args: Mapping[str, object], *, context: object = None
    ) -> ToolResult: ...


@runtime_checkable
class _Closable(Protocol):
    """A provider that can be closed."""

    async def aclose(self) -> None: ...


class PinnedToolProvider:
    """A `ToolProvider` that offers only the tools whose definitions match a lock.

    Args:
        source: an MCP client, a `McpToolProvider`, or any `ToolProvider`.
        lock: a `ToolLock` (with `server` naming the entry), a `ServerLock`, or a lock file path.
        server: the server's name in the lock (needed with a `ToolLock` or a path that holds
            several servers; optional when it holds exactly one).

    Raises:
        ConfigError: a bad source, an unreadable lock (`ERR_LOCK_INVALID`), or a server name the
            lock does not have.

    Closing it (`aclose()` / `async with`) closes the source.
    """

    def __init__(
        self,
        source: object,
        lock: ToolLock | ServerLock | str | os.PathLike[str],
        *,
        server: str | None = None,
    ) -> None:
        self._source = _Source(source)
        if isinstance(lock, str | os.PathLike):
            lock = read_lock(lock)
        if isinstance(lock, ToolLock):
            if server is None:
                if len(lock.servers) != 1:
                    raise ConfigError(
                        "PinnedToolProvider: the lock holds several servers; say which with server=",
                        code="ERR_LOCK_INVALID",
                    )
                server = next(iter(lock.servers))
            lock = lock.server(server)
        self.server = server
        self.lock: ServerLock = ServerLock(
            tools=dict(lock.tools),
            instructions=lock.instructions,
            prompts=dict(lock.prompts),
            resources=dict(lock.resources),
            templates=dict(lock.templates),
        )
        self._approved: dict[str, str] = {}
        self._last: dict[str, PinStatus] = {}
        self._approvals = 0

    def __repr__(self) -> str:
        return f"PinnedToolProvider({self._source.provider!r}, server={self.server!r})"

    @property
    def generation(self) -> int:
        """The source's generation plus the number of approvals (both change what is offered)."""
        return provider_generation(self._source.provider) + self._approvals

    @property
    def instructions(self) -> str | None:
        """The server's instructions, cleaned, only while they match the lock."""
        raw = self._source.instructions()
        if raw is None or hash_instructions(raw) != self.lock.instructions:
            return None
        return clean_text(raw)

    def _instructions_changed(self) -> tuple[str | None, str | None] | None:
        current = hash_instructions(self._source.instructions())
        if self._source.client is None or current == self.lock.instructions:
            return None
        return self.lock.instructions, current

    def _judge(self, name: str, current: str, blocked: bool) -> PinStatus:
        pinned = self.lock.tools.get(name)
        if blocked:
            return PinStatus(name, "blocked", pinned, current)
        if pinned == current:
            return PinStatus(name, "pinned", pinned, current)
        if self._approved.get(name) == current:
            return PinStatus(name, "approved", pinned, current)
        return PinStatus(name, "changed" if pinned is not None else "new", pinned, current)

    def side_status(self, kind: SideKind, key: str, current: str) -> PinStatus:
        """How one prompt, resource or template (`key` with hash `current`, see `side_digests`)
        compares with the lock: `pinned`, `changed`, `new` or `blocked` (instructions changed).

        A lock written before prompts and resources were pinned records none: every one of them
        is `new` until the lock is renewed (`toolbridge lock`).
        """
        pinned = self.lock.side(kind).get(key)
        if self._instructions_changed() is not None:
            return PinStatus(key, "blocked", pinned, current)
        if pinned == current:
            return PinStatus(key, "pinned", pinned, current)
        return PinStatus(key, "changed" if pinned is not None else "new", pinned, current)

    async def definitions(self) -> list[tuple[str, str, ToolSpec]]:
        """(name, hash, spec) of every tool the source offers now, changed or not (for a review:
        the gateway console's Pins page).

        Raises:
            McpError: listing the tools failed.
        """
        return await self._source.definitions()

    async def status(self) -> list[PinStatus]:
        """How every tool the source offers now compares with the lock.

        Raises:
            McpError: listing the tools failed.
        """
        return self._judge_all(await self._source.definitions())

    def _judge_all(self, definitions: Sequence[tuple[str, str, ToolSpec]]) -> list[PinStatus]:
        """Judge every listed tool, and remember the verdicts for `approve`."""
        blocked = self._instructions_changed() is not None
        statuses = [self._judge(name, digest, blocked) for name, digest, _ in definitions]
        self._last = {s.name: s for s in statuses}
        return statuses

    async def list_tools(self) -> list[ToolSpec]:
        """The tools that match the lock (or were approved), with cleaned descriptions.

        Raises:
            McpError: listing the tools failed.
        """
        definitions = await self._source.definitions()
        statuses = self._judge_all(definitions)
        return [
            model_spec(spec)
            for (_, _, spec), status in zip(definitions, statuses, strict=True)
            if status.state in ("pinned", "approved")
        ]

    @property
    def accepts_context(self) -> bool:
        """Whether `call_tool` takes a caller's context (`context=`): when the pinned provider does."""
        provider = self._source.provider
        return isinstance(provider, _TakesContext) and provider.accepts_context is True

    async def call_tool(self, name: str, args: Mapping[str, object], context: object = None) -> ToolResult:
        """Call a tool, after checking its current definition against the lock.

        `context` (a caller's context of the call, such as the gateway's) goes to the pinned
        provider when it takes one (`accepts_context`).

        Raises:
            PolicyError: `ERR_TOOL_PIN_MISMATCH` when the tool changed since it was pinned, is not
                in the lock and was not approved, is neither listed nor pinned, or the server's
                instructions changed; `details` hold `tool`, `reason` (`changed`/`new`/`unknown`/
                `instructions_changed`), `pinned` and `current` hashes.
            ToolError: the tool reported failure.
            McpError: listing or calling failed.
        """
        changed = self._instructions_changed()
        if changed is not None:
            raise PolicyError(
                f"server {self.server or ''!s} is blocked: its instructions changed since they were "
                f"pinned (pinned {changed[0]}, now {changed[1]}); renew the lock after review",
                code=PIN_MISMATCH,
                details={
                    "tool": name,
                    "reason": "instructions_changed",
                    "pinned": changed[0],
                    "current": changed[1],
                },
            )
        current = next((d for n, d, _ in await self._source.definitions() if n == name), None)
        if current is not None:
            status = self._judge(name, current, False)
            if status.state == "changed":
                raise PolicyError(
                    f"tool {name!r} changed since it was pinned (pinned {status.pinned}, now {current}); "
                    "renew the lock after review",
                    code=PIN_MISMATCH,
                    details={"tool": name, "reason": "changed", "pinned": status.pinned, "current": current},
                )
            if status.state == "new":
                raise PolicyError(
                    f"tool {name!r} is not in the lock (now {current}); approve it or renew the lock",
                    code=PIN_MISMATCH,
                    details={"tool": name, "reason": "new", "pinned": None, "current": current},
                )
        elif name not in self.lock.tools and name not in self._approved:
            # Neither listed nor pinned: nothing was reviewed, so nothing is sent.
            raise PolicyError(
                f"tool {name!r} is neither in the lock nor offered by the server",
                code=PIN_MISMATCH,
                details={"tool": name, "reason": "unknown", "pinned": None, "current": None},
            )
        # A pinned tool the server no longer lists goes through: the server answers for it.
        provider = self._source.provider
        if context is not None and isinstance(provider, _TakesContext) and provider.accepts_context is True:
            return await provider.call_tool(name, args, context=context)
        return await self._source.provider.call_tool(name, args)

    def approve(self, name: str, digest: str | None = None) -> str:
        """Accept the current definition of `name` (changed or new) for this provider's lifetime.

        Args:
            name: the tool.
            digest: the hash to approve; default: the one seen at the last `list_tools()`/`status()`.

        Returns:
            The approved hash.

        Raises:
            ConfigError: `ERR_INVALID_INPUT` when no hash is given and the tool was not seen.
        """
        if digest is None:
            seen = self._last.get(name)
            if seen is None:
                raise ConfigError(
                    f"cannot approve {name!r}: not seen in the last listing (call list_tools() first)",
                    code="ERR_INVALID_INPUT",
                )
            digest = seen.current
        self._approved[name] = digest
        self._approvals += 1
        return digest

    async def renew(self) -> ServerLock:
        """Pin everything the source offers now; returns the new `ServerLock` (also in force here).

        Write it back with `write_lock` to make the renewal permanent.

        Raises:
            McpError: listing the tools failed.
        """
        self.lock = await lock_server(
            self._source.client if self._source.client is not None else self._source.provider
        )
        self._approved.clear()
        self._approvals += 1
        return self.lock

    async def aclose(self) -> None:
        """Close the source (if it can be closed)."""
        provider = self._source.provider
        if isinstance(provider, _Closable):
            await provider.aclose()

    async def __aenter__(self) -> PinnedToolProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
