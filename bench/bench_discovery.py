"""Tool discovery: recall, search latency and context bytes on real tool definitions.

Usage: `python bench/bench_discovery.py [--json]`

The catalog is the recorded `tools/list` of real MCP servers from the npm registry
(bench/fixtures/discovery/<server>.json, made by bench/record_discovery_fixtures.py), each tool
named `<server>_<tool>` as a gateway binding's prefix would. The query set
(bench/fixtures/discovery/queries.json) is tasks in plain words, written by hand without copying
the descriptions, each with the one tool that does it. A second, held-out set
(queries_heldout.json, 32 tasks over tools the first set does not name) was written after the
index's synonym table and weights were tuned on the first, and is never tuned on: its recall is
what to expect of tasks nobody tuned for.

Measured:
- recall@1 and recall@5 of the query set and of the held-out set, on the real catalog;
- search latency (CPU median and p95 of every query, and the wall median, after one warm-up
  pass) at the real catalog's size and at 10,000 tools (the real catalog copied under numbered
  server names: the same vocabulary, ten times the postings);
- the same for SQLite FTS5 (in memory, the index's own terms, `bm25()` with the same field
  weights) and, when installed, `bm25s` (a sparse-matrix BM25; `pip install bm25s`), to justify
  the choice;
- context bytes a model reads per turn: the full `tools/list` (every definition as JSON) vs
  discovery (the three meta tools, plus one `find_tools` answer of 5 matches and one used tool's
  definition).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toolbridge.discovery import FIELD_WEIGHTS, IndexedTool, ToolIndex, indexed_tool, terms
from toolbridge.tools import ToolSpec

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "discovery"
FIELDS = ("name", "title", "server", "description", "parameters")


def load_catalog() -> tuple[list[IndexedTool], dict[str, dict[str, Any]]]:
    """The real tools (as the index reads them) and each one's wire definition, by served name."""
    tools: list[IndexedTool] = []
    wire: dict[str, dict[str, Any]] = {}
    for path in sorted(FIXTURES.glob("*.json")):
        if path.name.startswith("queries"):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        server = data["server"]
        prefix = server.replace("-", "_") + "_"
        for tool in data["tools"]:
            name = prefix + tool["name"]
            spec = ToolSpec(
                name=tool["name"],
                description=tool.get("description") or "",
                parameters=tool.get("inputSchema") or {},
                annotations=tool.get("annotations"),
                mcp=tool,
            )
            tools.append(indexed_tool(name, spec, server))
            wire[name] = {**tool, "name": name}
    return tools, wire


def copies(tools: Sequence[IndexedTool], count: int) -> list[IndexedTool]:
    """`count` tools: the real ones, then copies under numbered server names."""
    out = list(tools)
    n = 2
    while len(out) < count:
        for tool in tools:
            if len(out) >= count:
                break
            server = f"{tool.server}{n}"
            name = f"{server}_{tool.name}"
            out.append(
                IndexedTool(name, server, tool.title, tool.description, tool.parameters, tool.annotations)
            )
        n += 1
    return out


def timed(search: Callable[[str], list[str]], queries: Sequence[str]) -> tuple[float, float, float]:
    """Median and p95 CPU milliseconds of one search (the thread's CPU time: what a search costs,
    not how long a loaded machine took to schedule it), and the median wall milliseconds, over
    three passes of `queries` after a warm-up pass."""
    for q in queries:
        search(q)
    cpu: list[float] = []
    wall: list[float] = []
    for q in list(queries) * 3:
        start, start_cpu = time.perf_counter(), time.thread_time()
        search(q)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        wall.append((time.perf_counter() - start) * 1000)
    cpu.sort()
    return statistics.median(cpu), cpu[int(len(cpu) * 0.95) - 1], statistics.median(wall)


def ours(tools: Sequence[IndexedTool]) -> Callable[[str], list[str]]:
    index = ToolIndex()
    index.sync(tools)
    return lambda q: [m.name for m in index.search(q, 5)]


def fts5(tools: Sequence[IndexedTool]) -> Callable[[str], list[str]]:
    """SQLite FTS5 over the index's own terms (so the query is a list of quoted terms: no syntax)."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5({', '.join(FIELDS)}, tokenize='unicode61')")
    db.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?, ?)",
        [tuple(" ".join(terms(tool.fields()[f])) for f in FIELDS) for tool in tools],
    )
    names = [tool.name for tool in tools]
    weights = ", ".join(str(FIELD_WEIGHTS[f]) for f in FIELDS)

    def search(q: str) -> list[str]:
        wanted = list(dict.fromkeys(terms(q)))[:32]
        if not wanted:
            return []
        match = " OR ".join(f'"{w}"' for w in wanted)
        rows = db.execute(
            f"SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, {weights}) LIMIT 5", (match,)
        ).fetchall()
        return [names[r[0] - 1] for r in rows]

    return search


def bm25s_search(tools: Sequence[IndexedTool]) -> Callable[[str], list[str]] | None:
    try:
        import bm25s  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    corpus = [
        [t for f in FIELDS for t in terms(tool.fields()[f]) * FIELD_WEIGHTS[f]] or ["_"] for tool in tools
    ]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    names = [tool.name for tool in tools]

    def search(q: str) -> list[str]:
        wanted = [w for w in dict.fromkeys(terms(q)) if w in retriever.vocab_dict][:32]
        if not wanted:
            return []
        docs, _ = retriever.retrieve([wanted], k=5, show_progress=False, n_threads=1)
        return [names[int(i)] for i in docs[0]]

    return search


def recall(
    search: Callable[[str], list[str]], queries: Sequence[dict[str, str]]
) -> tuple[float, float, list[str]]:
    at1 = at5 = 0
    missed: list[str] = []
    for q in queries:
        found = search(q["query"])
        at1 += bool(found) and found[0] == q["expect"]
        at5 += q["expect"] in found[:5]
        if q["expect"] not in found[:5]:
            missed.append(f"{q['query']!r} -> {found[:3]} (expected {q['expect']})")
    return at1 / len(queries), at5 / len(queries), missed


def context_bytes(wire: dict[str, dict[str, Any]], tools: Sequence[IndexedTool]) -> dict[str, int]:
    from toolbridge.gateway._discovery import _meta_tools

    full = len(json.dumps(list(wire.values()), separators=(",", ":")).encode())
    meta = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in _meta_tools(10)]
    meta_bytes = len(json.dumps(meta, separators=(",", ":")).encode())
    index = ToolIndex()
    index.sync(tools)
    answer = {"tools": [m.to_dict() for m in index.search("create an issue in a repository", 5)]}
    answer_bytes = len(json.dumps(answer, separators=(",", ":")).encode())
    one_tool = max(len(json.dumps(w, separators=(",", ":")).encode()) for w in list(wire.values())[:50])
    return {"full": full, "meta": meta_bytes, "find_answer": answer_bytes, "one_tool": one_tool}


def main() -> None:
    tools, wire = load_catalog()
    queries = json.loads((FIXTURES / "queries.json").read_text(encoding="utf-8"))
    heldout = json.loads((FIXTURES / "queries_heldout.json").read_text(encoding="utf-8"))
    texts = [q["query"] for q in queries]
    servers = sorted({t.server for t in tools})
    result: dict[str, Any] = {
        "tools": len(tools),
        "servers": len(servers),
        "queries": len(queries),
        "held-out queries": len(heldout),
    }
    engines: dict[str, Callable[[Sequence[IndexedTool]], Callable[[str], list[str]] | None]] = {
        "toolbridge (pure-Python BM25)": ours,
        "SQLite FTS5": fts5,
        "bm25s": bm25s_search,
    }
    big = copies(tools, 10_000)
    for label, make in engines.items():
        small_search = make(tools)
        if small_search is None:
            result[label] = "not installed"
            continue
        r1, r5, missed = recall(small_search, queries)
        h1, h5, held_missed = recall(small_search, heldout)
        lat_small = timed(small_search, texts)
        big_search = make(big)
        assert big_search is not None
        lat_big = timed(big_search, texts)
        result[label] = {
            "recall@1": round(r1, 3),
            "recall@5": round(r5, 3),
            f"ms@{len(tools)} (cpu median, cpu p95, wall median)": [round(x, 3) for x in lat_small],
            "ms@10000 (cpu median, cpu p95, wall median)": [round(x, 3) for x in lat_big],
            "held-out recall@1": round(h1, 3),
            "held-out recall@5": round(h5, 3),
            "missed": missed,
            "held-out missed": held_missed,
        }
    ctx = context_bytes(wire, tools)
    discovery_turn = ctx["meta"] + ctx["find_answer"] + ctx["one_tool"]
    result["context bytes"] = {
        **ctx,
        "discovery turn (meta + one answer + one tool)": discovery_turn,
        "saved": f"{(1 - discovery_turn / ctx['full']) * 100:.1f}%",
    }
    if "--json" in sys.argv:
        print(json.dumps(result, indent=1))
        return
    print(
        f"catalog: {len(tools)} real tools of {len(servers)} servers; "
        f"{len(queries)} queries, {len(heldout)} held out"
    )
    for label in engines:
        print(f"{label}: {json.dumps(result[label], indent=1)}")
    print(f"context bytes: {json.dumps(result['context bytes'], indent=1)}")


if __name__ == "__main__":
    main()
