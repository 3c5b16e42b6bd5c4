"""The Pins page's data: tools, prompts, resources and resource templates whose definitions
changed under a pin (or are new), with a diff, and accepting one into the lock file as
`toolbridge lock` would.

The lock keeps hashes, not definitions: the definition an item had while it matched its pin is
known only when this console saw it (each review keeps the definitions of pinned items by hash
in `LOCK.seen.json`, `_pin_memory`, checked against their hash when read back), so a diff shows
when the change happened after the console first saw the item, across restarts; otherwise the
whole current definition is shown and the page says why. Diffs compare the pinned forms (the
fields each hash covers: `pinning.canonical_tool`, `pinning.canonical_side`). **Accept** writes
the item's current hash into the server's entry of the lock file (atomically; the gateway re-reads it within a
second, and with PostgreSQL pins stores it for every replica); it is refused when the
definition changed again since the page was read (the form carries the hash the operator
reviewed). **Keep withheld** writes nothing.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import anyio
import mcp_types as types

from ..clients import ConnectionClient
from ..errors import ConfigError
from ..pinning import (
    SIDE_KEYS,
    SIDE_KINDS,
    PinnedToolProvider,
    SideKind,
    canonical_side,
    side_digests,
    side_listing,
)
from ..tools import ToolSpec
from ._pin_memory import PinMemory, pinned_form

__all__ = ["KINDS", "PinBoard", "PinReview"]

KINDS: dict[str, SideKind | None] = {
    "tool": None,
    "prompt": "prompts",
    "resource": "resources",
    "template": "templates",
}
"""What the Pins page reviews (its form's `kind`) -> the lock's section (None: `tools`)."""
_KIND_OF: dict[SideKind, str] = {"prompts": "prompt", "resources": "resource", "templates": "template"}


@dataclass(frozen=True)
class PinReview:
    """One tool, prompt, resource or template that is not served because of its pin."""

    server: str
    name: str
    """The tool's or prompt's name, the resource's URI, the template's `uriTemplate`."""
    state: str
    """`changed`, `new` or `blocked` (the server's instructions changed)."""
    pinned: str | None
    current: str
    definition: str
    """The current definition (canonical JSON, indented)."""
    diff: str | None
    """A unified diff from the definition seen while pinned, when known."""
    kind: str = "tool"
    """`tool`, `prompt`, `resource` or `template` (`KINDS`)."""


def _shown(spec: ToolSpec) -> str:
    """The definition as the server sent it (what the pin hashes), else as the provider gives it."""
    data: Any = spec.mcp
    if data is None:
        data = {
            "name": spec.name,
            "description": spec.description,
            "inputSchema": spec.parameters,
            "outputSchema": spec.output_schema,
            "annotations": spec.annotations,
        }
    return _dumped(data)


def _dumped(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _pinned_tool(spec: ToolSpec) -> dict[str, object] | None:
    """The part of a tool's definition its pin hashes (as the server sent it, else as given)."""
    try:
        return pinned_form("tool", spec.mcp if spec.mcp is not None else spec)
    except ConfigError:
        return None


def _diff(before_form: dict[str, object] | None, now: str) -> str | None:
    """A unified diff from the pinned definition (pinned form) to `now`, when it is known."""
    if before_form is None:
        return None
    before = _dumped(before_form)
    lines = difflib.unified_diff(before.splitlines(), now.splitlines(), "pinned", "now", lineterm="", n=2)
    return "\n".join(lines)


SideItem: TypeAlias = types.Prompt | types.Resource | types.ResourceTemplate
"""A listed prompt, resource or resource template (`pinning.side_listing`)."""

Source = tuple[str, PinnedToolProvider, Path, ConnectionClient | None]
"""(server, its `PinnedToolProvider`, its lock file, its MCP client or None)."""


class PinBoard:
    """The pinned upstreams of one gateway (`Source` each)."""

    def __init__(self, sources: Sequence[Source]) -> None:
        # one entry per server and lock file (bindings of one server share its pins)
        self.sources = list({(s[0], s[2]): s for s in reversed(sources)}.values())
        self.sources.reverse()
        self._memory = {path: PinMemory(path) for _, _, path, _ in self.sources}
        self._lock = anyio.Lock()

    async def reviews(self) -> list[PinReview]:
        """Everything withheld by its pin now (listing each pinned upstream).

        Raises:
            ConfigError: an upstream could not be listed.
        """
        out: list[PinReview] = []
        for server, pinned, path, client in self.sources:
            try:
                with anyio.fail_after(30):
                    definitions = await pinned.definitions()
                    statuses = {s.name: s for s in await pinned.status()}
                    sides = await _side_items(client)
            except Exception as exc:  # an upstream that cannot be listed now
                raise ConfigError(f"server {server!r} could not be listed ({type(exc).__name__})") from None
            memory = self._memory[path]
            for name, digest, spec in definitions:
                status = statuses.get(name)
                form = _pinned_tool(spec)
                if status is None or status.state in ("pinned", "approved"):
                    if form is not None:
                        memory.keep("tool", digest, form)
                    continue
                now = _dumped(form) if form is not None else _shown(spec)
                diff = _diff(memory.get(status.pinned), now)
                out.append(PinReview(server, name, status.state, status.pinned, digest, _shown(spec), diff))
            for side, items in sides.items():
                kind = _KIND_OF[side]
                form_of = {c[SIDE_KEYS[side]]: c for c in (canonical_side(side, i) for i in items)}
                for key, digest in side_digests(side, items):
                    verdict = pinned.side_status(side, key, digest)
                    if verdict.state == "pinned":
                        memory.keep(side, digest, form_of[key])
                        continue
                    shown = _dumped(form_of[key])
                    diff = _diff(memory.get(verdict.pinned), shown)
                    out.append(
                        PinReview(server, key, verdict.state, verdict.pinned, digest, shown, diff, kind)
                    )
            await anyio.to_thread.run_sync(memory.save)
        return out

    async def accept(self, server: str, name: str, digest: str, kind: str = "tool") -> bool:
        """Pin `name` (a tool's or prompt's name, a resource's URI, a template) of `server` at
        `digest` in its lock file: True when written, False when its definition is no longer
        `digest` (it changed again: review it anew).

        Raises:
            ConfigError: no such pinned server or kind, or the lock file cannot be read or written.
        """
        from ..pinning import read_lock, write_lock

        if kind not in KINDS:
            raise ConfigError(f"nothing of kind {kind!r} is pinned")
        side = KINDS[kind]
        found = next(((p, path, c) for s, p, path, c in self.sources if s == server), None)
        if found is None:
            raise ConfigError(f"no pinned server {server!r}")
        pinned, path, client = found
        async with self._lock:
            if side is None:
                current = {n: d for n, d, _ in await pinned.definitions()}
            else:
                with anyio.fail_after(30):
                    current = dict(side_digests(side, (await _side_items(client, side)).get(side, [])))
            if current.get(name) != digest:
                return False
            lock = read_lock(path)
            entry = lock.server(server)
            (entry.tools if side is None else entry.side(side))[name] = digest
            write_lock(path, lock)
        return True


async def _side_items(
    client: ConnectionClient | None, only: SideKind | None = None
) -> dict[SideKind, list[SideItem]]:
    """The prompts, resources and templates the upstream lists now (none without a client)."""
    if client is None:
        return {}
    out: dict[SideKind, list[SideItem]] = {}
    async with client.sdk_request() as sdk:
        for side in SIDE_KINDS if only is None else (only,):
            out[side] = await side_listing(sdk, side)
    return out
