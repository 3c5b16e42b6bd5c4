"""The Pins page's data: tools whose definitions changed under a pin (or are new), with a diff,
and accepting one into the lock file as `toolbridge lock` would.

The lock keeps hashes, not definitions: the definition a tool had while it matched its pin is
known only when this console saw it (each review remembers the definitions of pinned tools), so
a diff shows when the change happened after the console first looked; otherwise the whole
current definition is shown. **Accept** writes the tool's current hash into the server's entry
of the lock file (atomically; the gateway re-reads it within a second, and with PostgreSQL pins
stores it for every replica); it is refused when the definition changed again since the page
was read (the form carries the hash the operator reviewed). **Keep withheld** writes nothing.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..errors import ConfigError
from ..tools import ToolSpec

__all__ = ["PinBoard", "PinReview"]

MAX_SEEN = 10_000


@dataclass(frozen=True)
class PinReview:
    """One tool that is not served because of its pin."""

    server: str
    name: str
    state: str
    """`changed`, `new` or `blocked` (the server's instructions changed)."""
    pinned: str | None
    current: str
    definition: str
    """The current definition (canonical JSON, indented)."""
    diff: str | None
    """A unified diff from the definition seen while pinned, when known."""


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
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)


class PinBoard:
    """The pinned upstreams of one gateway: `(server, PinnedToolProvider, lock path)` each."""

    def __init__(self, sources: Sequence[tuple[str, Any, Path]]) -> None:
        # one entry per server and lock file (bindings of one server share its pins)
        self.sources = list(
            {(server, path): (server, p, path) for server, p, path in reversed(sources)}.values()
        )
        self.sources.reverse()
        self._seen: dict[tuple[str, str, str], str] = {}
        self._lock = anyio.Lock()

    async def reviews(self) -> list[PinReview]:
        """Every tool withheld by its pin now (listing each pinned upstream).

        Raises:
            ConfigError: an upstream could not be listed.
        """
        out: list[PinReview] = []
        for server, pinned, _ in self.sources:
            try:
                with anyio.fail_after(30):
                    definitions = await pinned.definitions()
                    statuses = {s.name: s for s in await pinned.status()}
            except Exception as exc:  # an upstream that cannot be listed now
                raise ConfigError(f"server {server!r} could not be listed ({type(exc).__name__})") from None
            for name, digest, spec in definitions:
                status = statuses.get(name)
                shown = _shown(spec)
                if status is None or status.state in ("pinned", "approved"):
                    if len(self._seen) < MAX_SEEN:
                        self._seen[(server, name, digest)] = shown
                    continue
                before = self._seen.get((server, name, status.pinned or ""))
                diff = None
                if before is not None:
                    diff = "\n".join(
                        difflib.unified_diff(
                            before.splitlines(), shown.splitlines(), "pinned", "now", lineterm="", n=2
                        )
                    )
                out.append(PinReview(server, name, status.state, status.pinned, digest, shown, diff))
        return out

    async def accept(self, server: str, name: str, digest: str) -> bool:
        """Pin `name` of `server` at `digest` in its lock file: True when written, False when
        its definition is no longer `digest` (it changed again: review it anew).

        Raises:
            ConfigError: no such pinned server, or the lock file cannot be read or written.
        """
        from ..pinning import read_lock, write_lock

        found = next(((p, path) for s, p, path in self.sources if s == server), None)
        if found is None:
            raise ConfigError(f"no pinned server {server!r}")
        pinned, path = found
        async with self._lock:
            current = {n: d for n, d, _ in await pinned.definitions()}
            if current.get(name) != digest:
                return False
            lock = read_lock(path)
            lock.server(server).tools[name] = digest
            write_lock(path, lock)
        return True
