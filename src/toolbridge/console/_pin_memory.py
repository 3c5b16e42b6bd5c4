"""The definitions the Pins page has seen while they matched their pins, kept by hash beside the
lock file, so that a diff can be shown after a restart, or when the change came before the page
was first opened.

The lock keeps hashes only. Each definition this console sees with a pinned hash is kept in
`LOCK.seen.json` (beside the lock file, written atomically; at most `MAX_KEPT` definitions, a file
of at most `MAX_FILE_BYTES`), under that hash: `{"version": 1, "definitions": {"sha256:…":
{"kind": "tool", "definition": {…}}}}`, the definition in its pinned form (`pinning.canonical_tool`,
`pinning.canonical_side`: the fields the hash covers). A definition read back is used only when
it hashes to its key again: an edited, truncated or foreign file shows nothing rather than a
wrong "before" (it is then left out, with one log line). A definition the console never saw is
not invented: the page says so and shows the current one in full.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from ..pinning import SIDE_KINDS, canonical_side, canonical_tool, hash_tool, side_digests

__all__ = ["MAX_FILE_BYTES", "MAX_KEPT", "PinMemory", "memory_path"]

log = logging.getLogger("toolbridge.console")

MAX_KEPT = 10_000
MAX_FILE_BYTES = 16 * 1024 * 1024
_VERSION = 1


def memory_path(lock: Path) -> Path:
    """Where the definitions seen under the pins of `lock` are kept."""
    return lock.with_name(lock.name + ".seen.json")


def _digest_of(kind: str, definition: Any) -> str | None:
    """The pin hash of a definition in pinned form, or None when it is not one."""
    try:
        if kind == "tool":
            return hash_tool(definition)
        if kind in SIDE_KINDS:
            found = side_digests(kind, [definition])
            return found[0][1] if len(found) == 1 else None
    except Exception:  # not a definition of that kind
        return None
    return None


def pinned_form(kind: str, definition: Any) -> dict[str, object]:
    """The part of a definition its pin hashes (`kind`: `tool`, `prompts`, `resources`, `templates`).

    Raises:
        ConfigError: not such a definition.
    """
    return canonical_tool(definition) if kind == "tool" else canonical_side(kind, definition)  # type: ignore[arg-type]


class PinMemory:
    """Pinned definitions by hash, for one lock file (see the module docstring)."""

    def __init__(self, lock: Path) -> None:
        self.path = memory_path(lock)
        self._kept: dict[str, tuple[str, dict[str, object]]] | None = None
        self._dirty = False

    def _load(self) -> dict[str, tuple[str, dict[str, object]]]:
        if self._kept is not None:
            return self._kept
        self._kept = {}
        try:
            if self.path.stat().st_size > MAX_FILE_BYTES:
                log.warning("console: %s is too large; not read", self.path.name)
                return self._kept
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return self._kept
        except (OSError, ValueError, RecursionError):
            log.warning("console: %s could not be read; not used", self.path.name)
            return self._kept
        entries = (
            data.get("definitions") if isinstance(data, dict) and data.get("version") == _VERSION else None
        )
        if not isinstance(entries, dict):
            log.warning("console: %s is not a file of seen definitions; not used", self.path.name)
            return self._kept
        dropped = 0
        for digest, entry in list(entries.items())[:MAX_KEPT]:
            kind = entry.get("kind") if isinstance(entry, dict) else None
            definition = entry.get("definition") if isinstance(entry, dict) else None
            if (
                isinstance(kind, str)
                and isinstance(definition, dict)
                and _digest_of(kind, definition) == digest
            ):
                self._kept[digest] = (kind, definition)
            else:
                dropped += 1
        if dropped:
            log.warning(
                "console: %d definitions in %s do not match their hash; not used", dropped, self.path.name
            )
        return self._kept

    def get(self, digest: str | None) -> dict[str, object] | None:
        """The definition (pinned form) whose pin hash is `digest`, when this console saw it."""
        if not digest:
            return None
        found = self._load().get(digest)
        return found[1] if found is not None else None

    def keep(self, kind: str, digest: str, definition: dict[str, object]) -> None:
        """Remember a pinned definition (written by `save`), when it hashes to `digest`."""
        kept = self._load()
        if digest in kept or len(kept) >= MAX_KEPT or _digest_of(kind, definition) != digest:
            return
        kept[digest] = (kind, definition)
        self._dirty = True

    def save(self) -> None:
        """Write what was added since the last save (atomically; a failure is one log line)."""
        if not self._dirty or self._kept is None:
            return
        data = {
            "version": _VERSION,
            "definitions": {d: {"kind": k, "definition": v} for d, (k, v) in self._kept.items()},
        }
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("console: %s could not be written (%s)", self.path.name, type(exc).__name__)
            return
        self._dirty = False
