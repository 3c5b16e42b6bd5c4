"""Splitting a byte stream into lines in linear time, with a cap on one line (pure, synchronous).

`_LineAssembler.feed(chunk)` looks for newlines only in `chunk` and keeps the pieces of the
unfinished line in a list; a complete line is handed out as its pieces (joined once by the
consumer). What happens when a line grows past the cap depends on how it starts:

* A line that starts with `{` is a message (or means to be one): its pieces are dropped, only
  its head and a rolling tail are kept, and the rest of it is counted and thrown away until its
  newline (`_OversizeStarted`, then `_OversizeEnded`).
* A line that starts with anything else is junk a server printed without a newline (a banner, a
  progress bar), and a JSON-RPC message may follow it on the same line. The junk is trimmed
  instead: everything before the first place where a JSON-RPC object may start
  (`JSONRPC_START`) is dropped and counted in `_Line.skipped`, so memory stays bounded by the
  cap however much junk arrives, and the message after it is still delivered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "JSONRPC_START",
    "_Event",
    "_Line",
    "_LineAssembler",
    "_OversizeEnded",
    "_OversizeStarted",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 128 * 1024 * 1024
"""Default cap on one message (one line), in bytes: 128 MiB.

Generous on purpose: real tool results of tens of MiB (file contents, screenshots, query dumps)
must pass. Receiving a message costs about 2-3x its size in memory at the peak (the pieces, the
joined line, the parsed objects), so this bounds one connection at roughly 400 MiB. Lower it for
untrusted servers.
"""

_HEAD_SCAN_BYTES: Final = 8192
_TAIL_SCAN_BYTES: Final = 1024

JSONRPC_START: Final = re.compile(rb'\{[ \t\r]{0,16}"(?:jsonrpc|id|result|error|method)"[ \t\r]{0,16}:')
"""Where a JSON-RPC object may start: `{` and one of the keys every SDK writes first."""

_START_CARRY: Final = 64
"""Bytes kept at the end of trimmed junk, so a start split between two chunks is still found."""

_WS: Final = b" \t\r\n"
_JUNK: Final = -1
"""`_lead` of a line known to start with junk."""


@dataclass(slots=True)
class _Line:
    """A complete line, still in pieces (joined by the consumer, possibly on a thread).

    `skipped`: bytes of junk trimmed from its front (see the module text); 0 for most lines.
    """

    pieces: list[bytes]
    size: int
    skipped: int = 0


@dataclass(slots=True)
class _OversizeStarted:
    """The current line just crossed the cap; `head` is its first bytes."""

    head: bytes
    size: int


@dataclass(slots=True)
class _OversizeEnded:
    """An oversized line ended (its newline arrived); it was `size` bytes long."""

    head: bytes
    tail: bytes
    size: int


_Event = _Line | _OversizeStarted | _OversizeEnded


class _LineAssembler:
    """Split a byte stream into lines in linear time, discarding or trimming lines over a cap.

    Memory stays bounded by about `max_bytes` plus one chunk, whatever arrives.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._pieces: list[bytes] = []
        self._size = 0
        self._lead: int | None = None  # the line's first byte that is not whitespace
        self._skipped = 0
        self._discarding = False
        self._head = b""
        self._tail = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes of the unfinished line seen so far (stored, trimmed or discarded)."""
        return self._size + self._skipped

    @property
    def stored_bytes(self) -> int:
        """Bytes of the unfinished line held in memory right now."""
        return self._size if not self._discarding else len(self._head) + len(self._tail)

    def feed(self, chunk: bytes) -> list[_Event]:
        events: list[_Event] = []
        start = 0
        length = len(chunk)
        while start < length:
            newline = chunk.find(b"\n", start)
            end = length if newline < 0 else newline
            if end > start:
                piece = chunk if (start == 0 and end == length) else chunk[start:end]
                self._append(piece, events)
            if newline < 0:
                break
            events.append(self._finish())
            start = newline + 1
        return events

    def _append(self, piece: bytes, events: list[_Event]) -> None:
        if self._discarding:
            self._size += len(piece)
            self._tail = (self._tail + piece[-_TAIL_SCAN_BYTES:])[-_TAIL_SCAN_BYTES:]
            return
        if self._lead is None:
            stripped = piece.lstrip(_WS)
            if stripped:
                self._lead = stripped[0]
        if self._size + len(piece) <= self._max:
            self._pieces.append(piece)
            self._size += len(piece)
            return
        if self._lead != ord("{"):
            if self._trim(piece):  # stores what is left of `piece`
                return
            piece = b""  # what is left is a message start over the cap: discard it below
        head_parts: list[bytes] = []
        have = 0
        for part in [*self._pieces, piece]:
            head_parts.append(part[: _HEAD_SCAN_BYTES - have])
            have += len(head_parts[-1])
            if have >= _HEAD_SCAN_BYTES:
                break
        self._head = b"".join(head_parts)
        self._pieces = []
        self._size += len(piece)
        self._tail = piece[-_TAIL_SCAN_BYTES:]
        self._discarding = True
        events.append(_OversizeStarted(self._head, self._size))

    def _trim(self, piece: bytes) -> bool:
        """Store `piece`, dropping the junk before the first possible message start.

        Returns True when the line may go on being stored: it holds only the last few bytes of
        junk, or it now starts at a possible message start and is within the cap. False: what
        is left from that start is itself over the cap (the caller discards it as a message).
        """
        data = b"".join([*self._pieces, piece])
        found = JSONRPC_START.search(data)
        if found is None:
            keep = data[-_START_CARRY:]
            self._lead = _JUNK
        else:
            keep = data[found.start() :]
            self._lead = ord("{")
        self._skipped += len(data) - len(keep)
        self._pieces = [keep]
        self._size = len(keep)
        return found is None or self._size <= self._max

    def _finish(self) -> _Event:
        event: _Event
        if self._discarding:
            event = _OversizeEnded(self._head, self._tail, self._size + self._skipped)
        else:
            event = _Line(self._pieces, self._size, self._skipped)
        self._pieces = []
        self._size = 0
        self._skipped = 0
        self._lead = None
        self._discarding = False
        self._head = b""
        self._tail = b""
        return event
