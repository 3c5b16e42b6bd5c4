"""A searchable index of tool definitions: ranked lexical search (BM25), bounded, incremental.

One index serves the gateway's `find_tools` (over the union of its upstreams) and the agent's
`tool_search` (over its bindings). Each entry (`IndexedTool`) holds what a model would read to
pick a tool: its name, title, description, its parameters' names and descriptions, its server,
and its annotations' hints. Search is Okapi BM25 over those fields, the name and title weighted
above the description (`FIELD_WEIGHTS`), on the index's own inverted lists:

- **no network, no model**: tokens are lower-cased words, split at `snake_case`, `kebab-case`,
  `camelCase` and digits, with a light suffix stemmer (`files` / `file`, `listing` / `list`);
- **incremental**: `sync(entries)` changes only the entries whose text changed (a server's
  `list_changed` re-indexes that server's changed tools, not the catalog); `add`, `remove`;
- **bounded**: at most `max_tools` entries (`ERR_DISCOVERY_FULL` past it), each entry's text cut
  to `MAX_TEXT` characters, a query cut to `MAX_QUERY_TERMS` distinct terms and refused past
  `MAX_QUERY_CHARS` characters (`ERR_DISCOVERY_QUERY`); `limit` at most `MAX_LIMIT`;
- **plain text only**: a query is words, never a query language. Quotes, `NEAR(`, `*`, `-`,
  `OR`, escapes and control characters are split away like any other punctuation: there is no
  syntax to inject (this is why the index is not SQLite FTS5, whose `MATCH` parses a language;
  bench/bench_discovery.py measures both, and `bm25s`).

A user's own scoring (embeddings, a cross-encoder, rules) plugs in as `rerank`: given the query
and the best `rerank_depth` lexical candidates it returns one score per candidate (higher is
better); the final order is reciprocal-rank fusion of the lexical and the user's ranks
(`RRF_K`), so neither scale needs normalizing. A reranker that raises or returns the wrong
number of scores is logged and ignored for that search (lexical order): a user's function never
fails a search.

Every `Match` says why it matched: the query terms found, and in which fields.
"""

from __future__ import annotations

import heapq
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from .errors import ToolbridgeError, bounded
from .tools import ToolSpec

__all__ = [
    "FIELD_WEIGHTS",
    "MAX_LIMIT",
    "MAX_NAMES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MAX_TEXT",
    "USE_TOOLS_SCHEMA",
    "IndexedTool",
    "Match",
    "Reranker",
    "ToolIndex",
    "find_tools_schema",
    "indexed_tool",
    "one_line",
]

log = logging.getLogger("toolbridge.discovery")

MAX_QUERY_CHARS = 4096
"""A longer query is refused (`ERR_DISCOVERY_QUERY`): a task description, not a document."""
MAX_QUERY_TERMS = 32
"""Distinct terms of a query that are searched (the first ones); the rest are ignored."""
MAX_TEXT = 4000
"""Characters of one entry's text that are indexed (each field cut in turn)."""
MAX_LIMIT = 50
"""The most matches one search returns."""
DEFAULT_MAX_TOOLS = 100_000
RRF_K = 60
"""Reciprocal-rank fusion constant (the usual one): score = sum of 1 / (RRF_K + rank)."""

FIELD_WEIGHTS: Mapping[str, int] = {"name": 3, "title": 2, "server": 1, "description": 1, "parameters": 1}
"""How many times each field's terms count towards a term's frequency (BM25F, simplified)."""

SYNONYM_WEIGHT = 0.4
"""How much a synonym of a query's word counts, against 1 for the word itself."""
_CREATE = ("create",)
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "add": _CREATE,
    "new": _CREATE,
    "open": _CREATE,
    "start": _CREATE,
    "make": _CREATE,
    "register": _CREATE,
    "place": _CREATE,
    "compose": _CREATE,
    "insert": _CREATE,
    "write": ("create", "update"),
    "change": ("update",),
    "edit": ("update",),
    "modify": ("update",),
    "set": ("update",),
    "remove": ("delete",),
    "erase": ("delete",),
    "drop": ("delete",),
    "show": ("get", "list", "fetch"),
    "see": ("get", "list", "fetch"),
    "read": ("get", "fetch"),
    "get": ("fetch",),
    "fetch": ("get",),
    "find": ("search", "list"),
    "look": ("search",),
    "bug": ("issue",),
    "ticket": ("issue",),
    "phone": ("call",),
    "dial": ("call",),
    "text": ("message",),
    "sms": ("message",),
}
"""Query words (stemmed) and the words of tool names they also look for, at `SYNONYM_WEIGHT`:
the common verbs (`add`, `new`, `open` -> `create`, `remove` -> `delete`, ...) and a few nouns.
No model, no download: a small fixed table, in the index's own terms."""

MAX_NAMES = 50
"""Names one `use_tools` may give (the gateway's and the agent's)."""


def find_tools_schema(max_results: int) -> dict[str, Any]:
    """The input schema of `find_tools` (the gateway's and the agent's meta tool)."""
    limit = {"type": "integer", "minimum": 1, "maximum": max_results, "default": min(5, max_results)}
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "the task, in plain words"},
            "limit": limit,
        },
        "required": ["query"],
    }


USE_TOOLS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"names": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_NAMES}},
    "required": ["names"],
}
"""The input schema of `use_tools`."""

_PRUNE_DEPTH = 8
"""Candidates (times the results wanted) past which a common term only rescores candidates."""
_MAX_CACHED_TERMS = 4096
"""Terms whose BM25 weights are kept between searches (bounded memory)."""
_K1 = 1.2
_B = 0.75

_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "this",
        "to",
        "tool",
        "tools",
        "use",
        "using",
        "want",
        "with",
        "you",
        "your",
        "which",
        "what",
    }
)
_ANNOTATION_WORDS = {
    "readOnlyHint": "read only",
    "destructiveHint": "destructive delete",
    "idempotentHint": "idempotent",
    "openWorldHint": "external web",
}

Reranker = Callable[[str, Sequence["IndexedTool"]], Sequence[float]]
"""A user's scoring: (query, candidates) -> one score per candidate, higher is better."""


def _stem(word: str) -> str:
    """A light suffix stemmer: enough that `files`, `listing` and `created` meet their base."""
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "es" and not word.endswith(("shes", "ches", "xes", "zes", "sses")):
                return word[:-1]  # `files` -> `file`, `updates` -> `update`
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: len(word) - len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """The index's terms of `text` (lower-case, split at case and punctuation, stemmed, no stop
    words)."""
    out: list[str] = []
    for chunk in _WORD.findall(text):
        parts = _CAMEL.findall(chunk) if not chunk.isdigit() else [chunk]
        for part in parts or [chunk]:
            word = part.lower()
            if word in _STOP or len(word) > 40:
                continue
            out.append(_stem(word))
    return out


def one_line(text: str, limit: int = 160) -> str:
    """The first sentence or line of `text`, whitespace folded, at most `limit` characters."""
    first = " ".join(text.strip().split("\n", 1)[0].split())
    cut = first.find(". ")
    if 0 < cut < limit:
        first = first[: cut + 1]
    return bounded(first, limit)


def _plenty(scores: Mapping[str, float], allowed: Callable[[str], bool] | None, enough: int) -> bool:
    """Whether `scores` has at least `enough` candidates (`allowed` ones, when given)."""
    if len(scores) < enough:
        return False
    if allowed is None:
        return True
    return sum(1 for name in scores if allowed(name)) >= enough


@dataclass(frozen=True)
class IndexedTool:
    """One tool as the index reads it (build it from a `ToolSpec` with `indexed_tool`)."""

    name: str
    server: str = ""
    title: str = ""
    description: str = ""
    parameters: tuple[tuple[str, str], ...] = ()
    """Each parameter's name and description."""
    annotations: tuple[str, ...] = ()
    """The annotations' hints that are true, as words (`read only`, `destructive delete`, ...)."""

    def fields(self) -> dict[str, str]:
        """Each field's text, as indexed (cut to `MAX_TEXT` characters in all)."""
        params = " ".join(f"{name} {desc}" for name, desc in self.parameters)
        texts = {
            "name": self.name,
            "title": self.title,
            "server": self.server,
            "description": f"{self.description} {' '.join(self.annotations)}",
            "parameters": params,
        }
        left = MAX_TEXT
        out: dict[str, str] = {}
        for key, text in texts.items():
            out[key] = text[: max(left, 0)]
            left -= len(out[key])
        return out


def indexed_tool(name: str, spec: ToolSpec, server: str = "") -> IndexedTool:
    """`spec` (listed as `name`, from `server`) as the index reads it; malformed schema parts
    (an upstream's) are skipped, never raised."""
    wire = spec.mcp if isinstance(spec.mcp, Mapping) else {}
    title = wire.get("title")
    if not isinstance(title, str):
        annotations = spec.annotations or {}
        title = annotations.get("title") if isinstance(annotations.get("title"), str) else ""
    params: list[tuple[str, str]] = []
    props = spec.parameters.get("properties") if isinstance(spec.parameters, Mapping) else None
    if isinstance(props, Mapping):
        for pname, schema in list(props.items())[:64]:
            desc = schema.get("description") if isinstance(schema, Mapping) else None
            params.append((str(pname)[:100], desc[:500] if isinstance(desc, str) else ""))
    hints = tuple(
        words for key, words in _ANNOTATION_WORDS.items() if (spec.annotations or {}).get(key) is True
    )
    return IndexedTool(
        name=name,
        server=server,
        title=str(title or "")[:300],
        description=(spec.description or "")[:MAX_TEXT],
        parameters=tuple(params),
        annotations=hints,
    )


@dataclass(frozen=True)
class Match:
    """One search result."""

    name: str
    server: str
    summary: str
    """The description's first line (`one_line`)."""
    score: float
    why: tuple[str, ...]
    """How it matched: `term (field, field)` for each query term found, best first."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server": self.server,
            "description": self.summary,
            "why": ", ".join(self.why),
        }


@dataclass
class _Doc:
    tool: IndexedTool
    length: float
    tf: dict[str, float]
    where: dict[str, tuple[str, ...]]


@dataclass
class ToolIndex:
    """The index (see the module docs).

    Args:
        max_tools: the most entries it holds.
        rerank: a user's scoring of the best lexical candidates (hybrid ranking), or None.
        rerank_depth: how many lexical candidates `rerank` is given.
    """

    max_tools: int = DEFAULT_MAX_TOOLS
    rerank: Reranker | None = None
    rerank_depth: int = 50
    _docs: dict[str, _Doc] = field(default_factory=dict, repr=False)
    _postings: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    _total_length: float = field(default=0.0, repr=False)
    _weights: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)
    _weights_at: int = field(default=-1, repr=False)
    changes: int = field(default=0, repr=False)
    """Entries added, changed or removed since the index was made (to see that `sync` is
    incremental)."""

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, name: object) -> bool:
        return name in self._docs

    def get(self, name: str) -> IndexedTool | None:
        doc = self._docs.get(name)
        return doc.tool if doc is not None else None

    def names(self) -> list[str]:
        return list(self._docs)

    def add(self, tool: IndexedTool) -> None:
        """Index `tool` (replacing an entry of that name when its text changed).

        Raises:
            ToolbridgeError: `ERR_DISCOVERY_FULL` past `max_tools` entries.
        """
        old = self._docs.get(tool.name)
        if old is not None:
            if old.tool == tool:
                return
            self.remove(tool.name)
        elif len(self._docs) >= self.max_tools:
            raise ToolbridgeError(
                f"the tool index holds at most {self.max_tools} tools", code="ERR_DISCOVERY_FULL"
            )
        tf: dict[str, float] = {}
        where: dict[str, list[str]] = {}
        for key, text in tool.fields().items():
            weight = FIELD_WEIGHTS[key]
            for term in terms(text):
                tf[term] = tf.get(term, 0.0) + weight
                seen = where.setdefault(term, [])
                if key not in seen:
                    seen.append(key)
        length = sum(tf.values())
        self._docs[tool.name] = _Doc(tool, length, tf, {t: tuple(w) for t, w in where.items()})
        self._total_length += length
        for term, count in tf.items():
            self._postings.setdefault(term, {})[tool.name] = count
        self.changes += 1

    def remove(self, name: str) -> bool:
        """Take `name` out; False when it was not in."""
        doc = self._docs.pop(name, None)
        if doc is None:
            return False
        self._total_length -= doc.length
        for term in doc.tf:
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(name, None)
                if not posting:
                    del self._postings[term]
        self.changes += 1
        return True

    def sync(self, tools: Iterable[IndexedTool]) -> None:
        """Make the index hold exactly `tools`: unchanged entries are kept as they are, changed
        ones re-indexed, missing ones removed (what a catalog change costs is what changed).

        Raises:
            ToolbridgeError: `ERR_DISCOVERY_FULL` when `tools` are more than `max_tools`.
        """
        wanted = {t.name: t for t in tools}
        for name in [n for n in self._docs if n not in wanted]:
            self.remove(name)
        for tool in wanted.values():
            self.add(tool)

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        allowed: Callable[[str], bool] | None = None,
    ) -> list[Match]:
        """The best `limit` entries for `query` (only those `allowed` accepts, when given).

        Raises:
            ToolbridgeError: `ERR_DISCOVERY_QUERY` for a query that is not a string or is longer
                than `MAX_QUERY_CHARS` characters, or a `limit` that is not 1..`MAX_LIMIT`.
        """
        if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
            raise ToolbridgeError(
                f"a query is a string of at most {MAX_QUERY_CHARS} characters", code="ERR_DISCOVERY_QUERY"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ToolbridgeError(
                f"limit must be an integer from 1 to {MAX_LIMIT}", code="ERR_DISCOVERY_QUERY"
            )
        wanted = list(dict.fromkeys(terms(query)))[:MAX_QUERY_TERMS]
        if not wanted or not self._docs:
            return []
        weighted = {term: 1.0 for term in wanted}
        for term in wanted:  # the usual verbs of tool names, for the words people use instead
            for other in SYNONYMS.get(term, ()):
                weighted.setdefault(other, SYNONYM_WEIGHT)
        if not weighted:
            return []
        count = len(self._docs)
        if self._weights_at != self.changes:  # the corpus changed: every length norm did
            self._weights.clear()
            self._weights_at = self.changes
        depth = max(limit, self.rerank_depth if self.rerank is not None else limit)
        scores: dict[str, float] = {}
        get = scores.get
        postings = self._postings
        # Rarest terms first; a term far more common than the candidates found so far (when
        # they are plenty) only adds to those candidates: an entry that has none of the rarer
        # terms could not reach the top anyway, and a common term's long list is not walked.
        for term, boost in sorted(weighted.items(), key=lambda item: len(postings.get(item[0], ()))):
            weights = self._weights.get(term)
            if weights is None:
                weights = self._term_weights(term)
            if not weights:
                continue
            idf = boost * math.log(1.0 + (count - len(weights) + 0.5) / (len(weights) + 0.5))
            if len(weights) > 2 * len(scores) and _plenty(scores, allowed, _PRUNE_DEPTH * depth):
                for name, score in scores.items():
                    weight = weights.get(name)
                    if weight is not None:
                        scores[name] = score + idf * weight
                continue
            for name, weight in weights.items():
                scores[name] = get(name, 0.0) + idf * weight
        items: Iterable[tuple[str, float]] = scores.items()
        if allowed is not None:
            items = ((n, s) for n, s in items if allowed(n))
        best = heapq.nlargest(depth, items, key=itemgetter(1))
        if self.rerank is not None and best:
            best = self._fused(query, best)
        return [self._match(name, score, wanted) for name, score in best[:limit]]

    def _term_weights(self, term: str) -> dict[str, float]:
        """BM25's term-frequency part of `term` for each entry that has it (cached until the
        index changes: a search sums these, times the term's idf)."""
        posting = self._postings.get(term)
        if not posting:
            return {}
        average = self._total_length / len(self._docs)
        docs = self._docs
        weights = {
            name: tf * (_K1 + 1.0) / (tf + _K1 * (1.0 - _B + _B * docs[name].length / average))
            for name, tf in posting.items()
        }
        if len(self._weights) >= _MAX_CACHED_TERMS:
            self._weights.clear()
        self._weights[term] = weights
        return weights

    def _fused(self, query: str, best: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """`best` in reciprocal-rank-fusion order of the lexical and the user's ranks."""
        assert self.rerank is not None
        tools = [self._docs[name].tool for name, _ in best]
        try:
            user = [float(s) for s in self.rerank(query, tools)]
            if len(user) != len(tools) or any(math.isnan(s) for s in user):
                raise ValueError(f"{len(user)} scores for {len(tools)} candidates")
        except Exception as exc:  # a user's function never fails a search
            log.warning("the reranker failed; lexical order kept: %s", bounded(repr(exc), 200))
            return best
        by_user = sorted(range(len(tools)), key=lambda i: -user[i])
        fused = [1.0 / (RRF_K + rank + 1) for rank in range(len(tools))]
        for rank, i in enumerate(by_user):
            fused[i] += 1.0 / (RRF_K + rank + 1)
        order = sorted(range(len(tools)), key=lambda i: -fused[i])
        return [(best[i][0], fused[i]) for i in order]

    def _match(self, name: str, score: float, wanted: list[str]) -> Match:
        doc = self._docs[name]
        why = [f"{term} ({', '.join(doc.where[term])})" for term in wanted if term in doc.where]
        return Match(
            name=name,
            server=doc.tool.server,
            summary=one_line(doc.tool.description or doc.tool.title),
            score=round(score, 6),
            why=tuple(why[:8]),
        )
