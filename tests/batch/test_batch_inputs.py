"""The input parser: any bytes give, per non-empty line, exactly one item or one error line."""

from __future__ import annotations

import json
import random
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


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(max_size=20), max_size=12, unique=True),
    seed=st.randoms(use_true_random=False),
    blanks=st.integers(0, 5),
)
def test_item_ids_never_depend_on_line_numbers(texts: list[str], seed: random.Random, blanks: int) -> None:
    """The same items, moved, with empty lines among them, keep their ids (digest or declared)."""
    lines = [json.dumps(t) if i % 2 else json.dumps({"input": t}) for i, t in enumerate(texts)]
    lines.append(json.dumps({"id": "declared", "input": "x"}))
    moved = lines + [""] * blanks
    seed.shuffle(moved)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.jsonl"
        path.write_text("\n".join(lines) + "\n")
        before, _ = read_inputs(path)
        path.write_text("\n".join(moved) + "\n")
        after, errors = read_inputs(path)
    assert not errors
    assert sorted((it.input, it.id) for it in before) == sorted((it.input, it.id) for it in after)
    assert all(isinstance(it.id, str) for it in after)  # never a line number
