"""`toolbridge.discovery.ToolIndex`: ranked search, incremental updates, a user's reranker, and
hostile queries (plain words or one clear error, never a crash)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.discovery import MAX_QUERY_CHARS, IndexedTool, ToolIndex, indexed_tool, terms
from toolbridge.errors import ToolbridgeError
from toolbridge.tools import ToolSpec

TOOLS = [
    IndexedTool("fs_read_file", "fs", description="Read the contents of a file at a path."),
    IndexedTool("fs_write_file", "fs", description="Write text to a file, replacing it."),
    IndexedTool("fs_list_directory", "fs", description="List the entries of a directory."),
    IndexedTool(
        "gh_create_issue", "github", title="Create issue", description="Open a new issue in a repository."
    ),
    IndexedTool("gh_merge_pull_request", "github", description="Merge a pull request."),
    IndexedTool(
        "slack_post_message",
        "slack",
        description="Post a message to a channel.",
        parameters=(("channel", "the channel id"), ("text", "what to say")),
    ),
]


def _index() -> ToolIndex:
    index = ToolIndex()
    index.sync(TOOLS)
    return index


def test_terms_split_case_and_punctuation_and_stem() -> None:
    assert terms("listDirectory read_files the-Pull-Requests") == [
        "list",
        "directory",
        "read",
        "file",
        "pull",
        "request",
    ]


def test_search_ranks_by_name_and_description_and_says_why() -> None:
    index = _index()
    best = index.search("read a file", 3)
    assert best[0].name == "fs_read_file" and best[0].server == "fs"
    assert best[0].why == ("read (name, description)", "file (name, description)")
    assert index.search("send a message to the team channel")[0].name == "slack_post_message"
    assert index.search("merge PR pull requests")[0].name == "gh_merge_pull_request"
    assert index.search("") == [] and index.search("the of to") == []


def test_allowed_filters_before_the_limit() -> None:
    index = _index()
    found = index.search("file directory", 5, allowed=lambda n: n.startswith("fs_list"))
    assert [m.name for m in found] == ["fs_list_directory"]


def test_sync_is_incremental_and_follows_changes() -> None:
    index = _index()
    before = index.changes
    index.sync(TOOLS)  # nothing changed: nothing re-indexed
    assert index.changes == before
    changed = [*TOOLS[:-1], IndexedTool("slack_post_message", "slack", description="Send an email.")]
    index.sync(changed[1:])  # one changed, one removed
    assert index.changes == before + 2 + 1  # removed + (remove and add of the changed one)
    assert "fs_read_file" not in index and len(index) == 5
    assert index.search("email")[0].name == "slack_post_message"
    assert index.search("channel") == []


def test_bounded_entries_and_text() -> None:
    index = ToolIndex(max_tools=2)
    index.add(TOOLS[0])
    index.add(TOOLS[1])
    with pytest.raises(ToolbridgeError) as info:
        index.add(TOOLS[2])
    assert info.value.code == "ERR_DISCOVERY_FULL"
    huge = indexed_tool("big", ToolSpec(name="big", description="word " * 100_000))
    assert len(huge.description) <= 4000


def test_reranker_fuses_and_a_failing_one_is_ignored() -> None:
    def prefer_github(query: str, tools: Sequence[IndexedTool]) -> list[float]:
        return [1.0 if t.server == "github" else 0.0 for t in tools]

    index = ToolIndex(rerank=prefer_github)
    index.sync(TOOLS)
    lexical = ToolIndex()
    lexical.sync(TOOLS)
    query = "create a new file or issue"
    assert index.search(query)[0].name == "gh_create_issue"

    def broken(query: str, tools: Sequence[IndexedTool]) -> list[float]:
        raise RuntimeError("boom")

    failing = ToolIndex(rerank=broken)
    failing.sync(TOOLS)
    assert [m.name for m in failing.search(query)] == [m.name for m in lexical.search(query)]
    short = ToolIndex(rerank=lambda q, t: [1.0])
    short.sync(TOOLS)
    assert [m.name for m in short.search(query)] == [m.name for m in lexical.search(query)]


@pytest.mark.parametrize(
    "query", ['"', "NEAR(read file, 2)", "*", "-file", "file OR 1=1; --", "\x00\x1b[2J", "\\u0000"]
)
def test_query_syntax_is_plain_words(query: str) -> None:
    _index().search(query)


@pytest.mark.parametrize("limit", [0, 51, True, "5", 2.5])
def test_bad_limit_and_oversized_query_are_one_clear_error(limit: object) -> None:
    with pytest.raises(ToolbridgeError) as info:
        _index().search("file", limit)  # type: ignore[arg-type]
    assert info.value.code == "ERR_DISCOVERY_QUERY"
    with pytest.raises(ToolbridgeError) as info:
        _index().search("file " * MAX_QUERY_CHARS)
    assert info.value.code == "ERR_DISCOVERY_QUERY"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=500), st.integers(min_value=1, max_value=50))
def test_any_text_is_a_search_or_a_clear_error(query: str, limit: int) -> None:
    found = _index().search(query, limit)
    assert len(found) <= limit
    assert all(m.name in {t.name for t in TOOLS} for m in found)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=30), st.text(max_size=200)), max_size=20))
def test_any_tool_text_indexes(pairs: list[tuple[str, str]]) -> None:
    index = ToolIndex()
    index.sync(IndexedTool(name, description=desc) for name, desc in pairs)
    for name, _ in pairs:
        index.search(name)
    index.sync([])
    assert len(index) == 0 and not index._postings


def test_the_docs_example_runs() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "discovery.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^(<!-- fragment[^\n]*\n)?```python\n(.*?)^```", text, re.S | re.M)
    runnable = [code for fragment, code in blocks if not fragment]
    assert runnable
    for block in runnable:
        exec(compile(block, "docs/discovery.md", "exec"), {})


def test_recall_on_the_benchmark_catalog_does_not_regress() -> None:
    """The benchmark's 1,062 real tools and both query sets (bench/bench_discovery.py): the tuned
    set keeps recall@5 >= 0.9 and the held-out set, never tuned on, its measured 0.844."""
    import json
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        from bench_discovery import FIXTURES, load_catalog, ours, recall
    finally:
        sys.path.remove(str(bench))
    tools, _ = load_catalog()
    search = ours(tools)
    for name, floor in (("queries.json", 0.9), ("queries_heldout.json", 0.84)):
        queries = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
        _, at5, missed = recall(search, queries)
        assert at5 >= floor, (name, at5, missed)
