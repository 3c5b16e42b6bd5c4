"""Cleaning text that comes from MCP servers before a model or a terminal sees it.

Tool descriptions, titles and error texts are written by whoever runs the server. They can carry
things a reader never sees but a model or a terminal acts on:

- terminal escape sequences (ANSI CSI such as colours and cursor moves, OSC such as window titles
  and hyperlinks, DCS/SOS/PM/APC strings, and their single-byte C1 forms) that can rewrite what a
  person sees in a log or a terminal;
- control characters (C0 and C1, DEL), apart from newline and tab;
- invisible Unicode: zero-width characters, bidirectional overrides and isolates (which reorder
  displayed text), Unicode tag characters (U+E0000-U+E007F, which can hide a whole instruction in
  an innocent-looking string), other format characters, and invisible fillers.

`clean_text` removes all of these and keeps every visible character (any script, emoji,
punctuation), newlines and tabs. Carriage returns become newlines (`\\r\\n` one newline). It is
for text a model reads.

`visible_text` is for text a person reads on a terminal (the command line's output): instead of
removing, it shows every such character as an escape (`\\x1b`, `\\r`, `\\u202e`), so that nothing
sent by a server can clear the screen, set the window title, write the clipboard (OSC 52), move
the cursor or reorder a line, and nothing is hidden from the reader either.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["clean_schema", "clean_text", "is_clean", "visible_text"]

_ESCAPES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]                     # CSI: ESC [ params intermediates final
  | \x9b[0-?]*[ -/]*[@-~]                       # CSI, 8-bit form
  | (?:\x1b\]|\x9d).*?(?:\x07|\x1b\\|\x9c|\Z)   # OSC ... BEL or ST (or end of text)
  | (?:\x1b[P_^X]|[\x90\x98\x9e\x9f]).*?(?:\x1b\\|\x9c|\Z)  # DCS, APC, PM, SOS ... ST
  | \x1b[ -/]*[0-~]                             # other ESC sequences (charset, keypad, reset)
  | \x1b                                        # a lone ESC
    """,
    re.VERBOSE | re.DOTALL,
)

_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Characters of letter-like categories that render as nothing (Hangul fillers, blank Braille)."""

_KEEP_CONTROLS = frozenset("\n\t")


def _visible(ch: str) -> bool:
    if ch in _KEEP_CONTROLS:
        return True
    if ch in _INVISIBLE_LETTERS:
        return False
    category = unicodedata.category(ch)
    # Cc: control characters; Cf: format (zero-width, bidi controls, tags, soft hyphen, BOM);
    # Cs: lone surrogates; Zl/Zp: line and paragraph separators (handled as newlines before).
    return category not in ("Cc", "Cf", "Cs", "Zl", "Zp")


def clean_text(text: str) -> str:
    """`text` without terminal escape sequences, control characters or invisible Unicode.

    Newlines and tabs are kept; `\\r\\n`, `\\r`, U+2028 and U+2029 become `\\n`. Text that was
    already clean is returned unchanged (the same object).
    """
    if text.isascii() and text.isprintable():
        return text
    text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    return "".join(ch for ch in text if _visible(ch))


def clean_schema(value: Any) -> Any:
    """A copy of a JSON Schema (or any JSON value) with every `description` and `title` string
    cleaned by `clean_text`; everything else as it was."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in ("description", "title") and isinstance(item, str):
                out[key] = clean_text(item)
            else:
                out[key] = clean_schema(item)
        return out
    if isinstance(value, list):
        return [clean_schema(v) for v in value]
    return value


def is_clean(text: str) -> bool:
    """Whether `clean_text(text)` would leave `text` as it is."""
    return clean_text(text) == text


_NAMED_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible_text(text: str, *, multiline: bool = False) -> str:
    """`text` safe to print on a terminal: control and invisible characters shown as escapes.

    Escape sequences (ESC), every other C0 and C1 control character, DEL, carriage returns,
    bidirectional overrides and isolates, zero-width and other format characters, lone
    surrogates, line and paragraph separators and invisible fillers become `\\xNN`, `\\uNNNN`
    or `\\UNNNNNNNN` (`\\r`, `\\t`, `\\n` for those three). Everything visible is kept as it is.

    Args:
        text: untrusted text (a tool name, an error message, a result).
        multiline: keep newlines and tabs (for a tool's result text); otherwise they are
            escaped too, so the text stays on one line.
    """
    if text.isascii() and text.isprintable():
        return text
    keep = _KEEP_CONTROLS if multiline else frozenset()
    out: list[str] = []
    for ch in text:
        if ch in keep or (ch not in _KEEP_CONTROLS and _visible(ch) and ch != "\x7f"):
            out.append(ch)
        else:
            out.append(_escape(ch))
    return "".join(out)
