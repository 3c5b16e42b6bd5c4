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

from .errors import ConfigError
from .tools import ToolSpec

__all__ = ["MAX_SCHEMA_DEPTH", "clean_schema", "clean_text", "is_clean", "model_spec", "visible_text"]

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


MAX_SCHEMA_DEPTH = 256
"""`clean_schema` refuses a value nesting deeper than this many objects and arrays (or holding a
cycle): a schema is walked without recursion, and none a model reads is anywhere near as deep."""

_TEXT_KEYS = frozenset({"description", "title"})
_VALUE_KEYS = frozenset({"enum", "const", "default", "examples"})


def clean_schema(value: Any) -> Any:
    """A copy of a JSON Schema (or any JSON value) as a model may read it: every `description`
    and `title` string, at any depth, cleaned by `clean_text`, and every string inside an `enum`,
    `const`, `default` or `examples` value too; everything else (keys, types, patterns) as it
    was. The original is not modified.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` when `value` nests deeper than `MAX_SCHEMA_DEPTH`
            objects and arrays (or holds a cycle).
    """
    root: list[object] = [None]
    # (source, destination container, slot in it, depth, inside a value keyword)
    stack: list[tuple[Any, Any, Any, int, bool]] = [(value, root, 0, 0, False)]
    while stack:
        item, parent, slot, depth, literal = stack.pop()
        if isinstance(item, str):
            parent[slot] = clean_text(item) if literal else item
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_SCHEMA_DEPTH:
                raise ConfigError(
                    f"a schema nests deeper than {MAX_SCHEMA_DEPTH} levels (or holds a cycle)",
                    code="ERR_INVALID_INPUT",
                )
            if isinstance(item, Mapping):
                out: dict[str, object] = {}
                parent[slot] = out
                for key, child in item.items():
                    if key in _TEXT_KEYS and isinstance(child, str):
                        out[key] = clean_text(child)
                    else:
                        out[key] = None
                        stack.append((child, out, key, depth + 1, literal or key in _VALUE_KEYS))
            else:
                items: list[object] = [None] * len(item)
                parent[slot] = items
                stack.extend((child, items, i, depth + 1, literal) for i, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


def model_spec(spec: ToolSpec, name: str | None = None) -> ToolSpec:
    """What a model is shown of a tool: `spec` with its description cleaned (`clean_text`) and
    its parameter and output schemas and annotations cleaned (`clean_schema`), under `name`
    (default: the spec's own name, which a caller makes model-legal). `mcp`, the definition as
    the server sent it, is kept as it was: the raw text stays there for the caller.

    Every model-facing listing goes through this one function (the agent's and the governed
    session's catalog, which every provider and framework adapter reads; pinned providers).

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for a schema nesting deeper than `MAX_SCHEMA_DEPTH`.
    """
    return ToolSpec(
        name=spec.name if name is None else name,
        description=clean_text(spec.description),
        parameters=clean_schema(spec.parameters),
        output_schema=None if spec.output_schema is None else clean_schema(spec.output_schema),
        annotations=None if spec.annotations is None else clean_schema(spec.annotations),
        mcp=spec.mcp,
    )


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
