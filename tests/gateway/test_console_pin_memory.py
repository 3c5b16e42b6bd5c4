"""The Pins page's memory of pinned definitions (`LOCK.seen.json`) is a file anyone with the
directory can edit: whatever it holds, reading it never raises, and a definition comes back only
under the hash it really has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.console._pin_memory import MAX_FILE_BYTES, PinMemory, memory_path
from toolbridge.pinning import hash_tool, side_digests

TOOL = {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}
PROMPT = {"name": "greeting", "description": "Say hello.", "arguments": []}

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(content=_json)
def test_any_json_in_the_file_is_read_without_raising(tmp_path_factory: Any, content: Any) -> None:
    lock = tmp_path_factory.mktemp("m") / "tools.lock"
    memory_path(lock).write_text(json.dumps(content))
    memory = PinMemory(lock)
    for digest in ("", "sha256:" + "0" * 64, hash_tool(TOOL)):
        assert memory.get(digest) is None


def test_kept_definitions_round_trip_and_forged_or_junk_ones_are_dropped(tmp_path: Path) -> None:
    lock = tmp_path / "tools.lock"
    tool_digest = hash_tool(TOOL)
    [(_, prompt_digest)] = side_digests("prompts", [PROMPT])
    memory = PinMemory(lock)
    memory.keep("tool", tool_digest, TOOL)
    memory.keep("prompts", prompt_digest, PROMPT)
    memory.keep("tool", "sha256:" + "1" * 64, TOOL)  # not its hash: never kept
    memory.save()
    again = PinMemory(lock)
    assert again.get(tool_digest) is not None and again.get(prompt_digest) is not None
    assert again.get("sha256:" + "1" * 64) is None
    data = json.loads(memory_path(lock).read_text())
    data["definitions"][tool_digest]["definition"]["description"] = "Forged."
    data["definitions"][prompt_digest]["kind"] = "tool"  # a prompt read as a tool hashes otherwise
    memory_path(lock).write_text(json.dumps(data))
    forged = PinMemory(lock)
    assert forged.get(tool_digest) is None and forged.get(prompt_digest) is None
    for junk in (b"\xff\xfe not json", b"[" * 100_000, b"{}"):
        memory_path(lock).write_bytes(junk)
        assert PinMemory(lock).get(tool_digest) is None
    with memory_path(lock).open("wb") as f:  # too large: not read at all
        f.truncate(MAX_FILE_BYTES + 1)
    assert PinMemory(lock).get(tool_digest) is None
