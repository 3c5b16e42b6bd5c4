"""The input parser: any bytes give, per non-empty line, exactly one item or one error line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.batch._inputs import read_inputs

LINE = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    st.text(max_size=30).map(lambda t: json.dumps(t).encode()),
    st.builds(
        lambda i, t: json.dumps({"id": i, "input": t}).encode(),
        st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "é", ""]), st.booleans(), st.none()),
        st.one_of(st.text(max_size=20), st.integers()),
    ),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, max_size=25), cap=st.integers(8, 80))
def test_every_line_is_one_item_or_one_error(lines: list[bytes], cap: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        items, errors = read_inputs(path, max_line_bytes=cap)
    non_empty = [n + 1 for n, raw in enumerate(lines) if raw.strip()]
    numbers = sorted([it.line for it in items] + [e.line for e in errors])
    assert numbers == non_empty  # nothing lost, nothing twice
    assert len({it.key for it in items}) == len(items)  # ids unique among the items that run
    for it in items:
        assert it.line <= len(lines) and len(lines[it.line - 1]) <= cap
        assert isinstance(it.id, str | int) and not isinstance(it.id, bool)
    for e in errors:
        assert e.code in ("ERR_BATCH_INPUT", "ERR_BATCH_DUPLICATE_ID") and "\n" not in e.message
        json.dumps(e.to_line())  # always an output line
