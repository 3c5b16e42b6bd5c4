"""Measure `toolbridge check` on the YAML blocks of Telo's docs (the 40 of its AI and MCP modules).

    .venv/bin/python scripts/telo_docblocks.py DIR

DIR is a folder of Telo docs blocks, one file each. Every secret a block names is given a
placeholder value (a user running the block would have the key), so a block fails only for what
it is. Each block is checked as `toolbridge check` checks it, and each failing block is
classified by its findings:

- `right`: the failure is right, for the stated reason: a kind of a Telo module toolbridge does
  not provide (or of one it does not implement, such as `Ai.Image`), a fragment that refers to a
  document of another block, a placeholder (`<Name>`, `…`), a reference form Telo itself refuses,
  or one of Telo's scopes toolbridge does not provide;
- `gap`: anything else (toolbridge's own gap).

It prints one line per block and the counts for all blocks and for the `modules__ai*` /
`modules__mcp-client*` ones. Nothing is started: `check` runs no server and no model.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from toolbridge.manifest import check_manifest

_SECRET = re.compile(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)")

# A finding is a right reason when its code and message say one of these.
_RIGHT = (
    ("ERR_MANIFEST_UNSUPPORTED", "which toolbridge does not provide"),
    ("ERR_MANIFEST_UNSUPPORTED", "a Telo kind toolbridge does not implement"),
    ("ERR_MANIFEST_UNSUPPORTED", "reads Telo's"),
    ("ERR_MANIFEST_UNSUPPORTED", "a Telo feature toolbridge does not implement"),
    ("ERR_MANIFEST_DANGLING_REF", "names no document"),  # a fragment: the document is in another block
    ("ERR_MANIFEST_REF_FORM", "Telo refuses"),
    ("ERR_MANIFEST_INVALID_VALUE", "`metadata.name` must be a name"),  # `<Name>` placeholders
    ("ERR_MANIFEST_REF_FORM", "must be a reference to"),  # `client: <ClientName>` placeholders
    ("ERR_MANIFEST_YAML", "invalid YAML"),  # `{ … documentId, page … }` placeholders
    ("ERR_MANIFEST_UNDEFINED_KIND", "Telo refuses the kind as UNDEFINED_KIND"),  # as Telo does
)


_PLACEHOLDER = re.compile(r"<[a-z][a-z_]*>")


def _right(code: str, message: str, text: str, line: str = "") -> bool:
    if code == "ERR_MANIFEST_WRONG_TYPE" and _PLACEHOLDER.search(line):
        return True  # `code: <jsonrpc_int>`: a placeholder where a value of another type goes
    if code == "ERR_MANIFEST_REF_FORM" and "must be a reference to" in message:
        return "<" in text  # only a placeholder explains a plain string in a reference slot
    if code == "ERR_MANIFEST_WRONG_TYPE" and "must be a mapping, not a string" in message:
        return "[ … ]" in text  # `entries: [ … ]`: an elided list
    if (
        code in ("ERR_MANIFEST_EXPRESSION", "ERR_MANIFEST_INVALID_VALUE")
        and "<" in text
        and _placeholder(message)
    ):
        return True
    return any(code == c and m in message for c, m in _RIGHT)


def _placeholder(message: str) -> bool:
    """A finding about a `<name>` placeholder (an entry's `name: <tool_id>`, `!cel "result.<y>"`)."""
    return ("Syntax error" in message and "<" in message) or "should match pattern" in message


def _line(text: str, number: int) -> str:
    lines = text.splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else ""


def measure(folder: Path) -> int:
    blocks = sorted(folder.glob("*.yaml"))
    tally: Counter[tuple[str, str]] = Counter()
    for block in blocks:
        text = block.read_text()
        secrets = {name: f"placeholder-{name}" for name in _SECRET.findall(text)}
        report = check_manifest(block, secrets=secrets)
        errors = [d for d in report.diagnostics if d.severity == "error"]
        group = "ai/mcp-client" if block.name.startswith(("modules__ai", "modules__mcp-client")) else "other"
        if not errors:
            verdict = "pass"
        elif all(_right(d.code, d.message, text, _line(text, d.line)) for d in errors):
            verdict = "right"
        else:
            verdict = "gap"
        tally[(group, verdict)] += 1
        print(f"{verdict:5} {block.name}")
        for d in errors:
            mark = " " if _right(d.code, d.message, text, _line(text, d.line)) else "!"
            print(f"   {mark} {d.line}:{d.column} {d.code}: {d.message[:150]}")
    for group in ("ai/mcp-client", "other"):
        total = sum(n for (g, _), n in tally.items() if g == group)
        counts = ", ".join(f"{v} {tally[(group, v)]}" for v in ("pass", "right", "gap"))
        print(f"{group}: {total} blocks: {counts}")
    total = len(blocks)
    passed = sum(n for (_, v), n in tally.items() if v == "pass")
    gaps = sum(n for (_, v), n in tally.items() if v == "gap")
    print(f"all: {passed} of {total} pass; {total - passed - gaps} fail for a right reason; {gaps} gaps")
    return 1 if gaps else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/telo_docblocks.py DIR (a folder of Telo docs blocks)")
    sys.exit(measure(Path(sys.argv[1])))
