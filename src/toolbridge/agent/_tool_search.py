"""`Agent(tool_search=...)`: past a threshold, the model starts with two tools and finds the rest.

When an agent's catalog holds more than `threshold` tools, each model request carries only:

- `find_tools {query, limit?}`: ranked matches among the agent's tools (`toolbridge.discovery`:
  BM25 over names, descriptions and parameters; name, server, one line, why it matched);
- `use_tools {names}`: the named tools are shown from the next turn on;
- the `pinned` tools, and the tools the run's `use_tools` calls asked for (at most
  `max_working_set`, the most recently asked).

The working set is read from the conversation itself (the `use_tools` calls in the messages the
next request carries), so it needs no state: concurrent runs of one agent each have their own,
and a run continued from its messages keeps it. A tool not shown may still be called by its name
(the catalog routes it as before): discovery narrows what the model is shown, grants decide what
may be called.

The meta tools are one provider binding (`ToolSearch.binding`, effects `none`): under a
governed runtime they need the grants `tool:find_tools` and `tool:use_tools`, and each of their
calls is journaled like any tool call.

The provider's native form, when the model has one (`native_tool_search` true: `AnthropicModel`)
and `native` is set (default `bm25`): every tool goes in the request, all but the pinned ones
and the final answer marked deferred (`ModelRequest.tool_search`), and the provider's own search
(Anthropic's tool search tool) loads what the model looks for, in the same turn: no extra model
turn, no meta tools, no grants for them. The search then runs on the provider's side over all the
agent's tool definitions, and it is not a journaled tool call (the calls of the tools it loaded
are): `Step.native_searches` records each search (query, tools loaded) and a governed run emits
`model.tool_search` (the loaded names). The search's blocks ride on the turn's message
(`Message.native`), so a conversation continued elsewhere keeps the tools they loaded; a turn the
provider pauses (`pause_turn`) goes back as it came (`Agent`, at most `MAX_PAUSES` in a row).
Past `MAX_NATIVE` tools (the API's limit, 10,000), or when a tool's name is one the
provider's search tool takes, the meta tools are used. OpenAI's hosted tool search lives in the
Responses API and Gemini's in its Interactions API; `OpenAIModel` and `GeminiModel` speak Chat
Completions and generateContent, so they get the meta tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..calls import ToolBinding, ToolTarget
from ..catalog import FINAL_RESULT_TOOL, Catalog
from ..discovery import (
    MAX_LIMIT,
    MAX_NAMES,
    USE_TOOLS_SCHEMA,
    Reranker,
    ToolIndex,
    find_tools_schema,
    indexed_tool,
)
from ..errors import ConfigError, ToolbridgeError, ToolError
from ..tools import ToolResult, ToolSpec
from .models import Message, ModelRequest, NativeToolSearch
from .models._base import searches_natively

__all__ = ["FIND_TOOLS", "MAX_NATIVE", "USE_TOOLS", "ToolSearch", "tool_search_of"]

FIND_TOOLS = "find_tools"
USE_TOOLS = "use_tools"
MAX_NATIVE = 10_000
"""The most tools a native search is given (Anthropic's limit); past it the meta tools are used."""
_NATIVE_NAMES = frozenset({"tool_search_tool_bm25", "tool_search_tool_regex"})
_FIND = ToolSpec(
    name=FIND_TOOLS,
    description=(
        "Search the tools you may use for a task. Give the task in plain words; get the best "
        "matching tools (name, server, what it does, why it matched). Then call use_tools with "
        "the names you need: they are yours from your next turn."
    ),
    parameters=find_tools_schema(MAX_LIMIT),
    annotations={"readOnlyHint": True},
)
_USE = ToolSpec(
    name=USE_TOOLS,
    description="Add tools (names from find_tools) to your tools, from your next turn on.",
    parameters=USE_TOOLS_SCHEMA,
    annotations={"readOnlyHint": True},
)


@dataclass
class ToolSearch:
    """The agent's tool search (see the module docs).

    Args:
        threshold: the search is on when the agent has more tools than this (default 30).
        pinned: model-facing names always shown.
        max_results: the most matches one `find_tools` returns (1..50).
        max_working_set: the most tools `use_tools` calls keep shown (the most recent).
        rerank: a user's scoring of the lexical candidates (`toolbridge.discovery.Reranker`).
        native: the provider's own search when the model has one (`bm25`, the default, or
            `regex`; None: always the meta tools).

    Raises:
        ConfigError: `ERR_CONFIG` for a negative threshold or limits out of range.
    """

    threshold: int = 30
    pinned: tuple[str, ...] = ()
    max_results: int = 10
    max_working_set: int = 32
    rerank: Reranker | None = None
    native: Literal["bm25", "regex"] | None = "bm25"
    index: ToolIndex = field(init=False, repr=False)
    _indexed: Catalog | None = field(init=False, repr=False, default=None)
    _binding: ToolBinding | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        for label, value, low, high in (
            ("threshold", self.threshold, 0, 10**9),
            ("max_results", self.max_results, 1, MAX_LIMIT),
            ("max_working_set", self.max_working_set, 1, 10_000),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(
                    f"tool_search: {label} must be an integer from {low} to {high}", code="ERR_CONFIG"
                )
        if self.native not in ("bm25", "regex", None):
            raise ConfigError("tool_search: native must be 'bm25', 'regex' or None", code="ERR_CONFIG")
        self.pinned = tuple(self.pinned)
        self.index = ToolIndex(rerank=self.rerank)

    @property
    def binding(self) -> ToolBinding:
        """The meta tools' binding (effects `none`), one per search."""
        if self._binding is None:
            self._binding = ToolBinding(provider=_MetaTools(self), effects="none")
        return self._binding

    # ------------------------------------------------------------------- what the model sees

    def request(
        self, catalog: Catalog, messages: Sequence[Message], options: Mapping[str, object], model: object
    ) -> ModelRequest:
        """The model request of one turn: the provider's own search when `model` has one and the
        catalog is past the threshold, else what `shown` gives."""
        if self.native is not None and searches_natively(model):
            specs = [s for s in catalog.specs if s.name not in (FIND_TOOLS, USE_TOOLS)]
            searchable = [s.name for s in specs if s.name != FINAL_RESULT_TOOL]
            if self.threshold < len(searchable) <= MAX_NATIVE and _NATIVE_NAMES.isdisjoint(searchable):
                deferred = frozenset(searchable) - frozenset(self.pinned)
                return ModelRequest(
                    messages=tuple(messages),
                    tools=tuple(specs),
                    options=options,
                    tool_search=NativeToolSearch(deferred, self.native),
                )
        return ModelRequest(messages=tuple(messages), tools=self.shown(catalog, messages), options=options)

    def shown(self, catalog: Catalog, messages: Sequence[Message]) -> tuple[ToolSpec, ...]:
        """The specs of a model request: all of `catalog`'s under the threshold; past it the meta
        tools, the final answer, the pinned tools and the working set read from `messages`."""
        searchable = [s for s in catalog.specs if s.name not in (FIND_TOOLS, USE_TOOLS, FINAL_RESULT_TOOL)]
        if len(searchable) <= self.threshold:
            return tuple(s for s in catalog.specs if s.name not in (FIND_TOOLS, USE_TOOLS))
        if self._indexed is not catalog:
            self.index.sync(
                indexed_tool(name, target.spec, _server(target))
                for name, target in catalog.targets.items()
                if name not in (FIND_TOOLS, USE_TOOLS)
            )
            self._indexed = catalog
        wanted = set(self.pinned) | set(self.working_set(messages))
        return tuple(
            s
            for s in catalog.specs
            if s.name in (FIND_TOOLS, USE_TOOLS, FINAL_RESULT_TOOL) or s.name in wanted
        )

    def working_set(self, messages: Sequence[Message]) -> list[str]:
        """The names the conversation's `use_tools` calls asked for, most recent last, bounded."""
        asked: dict[str, None] = {}
        for message in messages:
            for call in message.tool_calls:
                if call.name != USE_TOOLS:
                    continue
                arguments = call.arguments
                names = _names(arguments.get("names")) if isinstance(arguments, Mapping) else None
                for name in names or ():
                    if name in self.index:
                        asked.pop(name, None)
                        asked[name] = None
        return list(asked)[-self.max_working_set :]

    # ------------------------------------------------------------------- the meta tools' calls

    def find(self, arguments: Mapping[str, object]) -> ToolResult:
        query = arguments.get("query")
        limit = arguments.get("limit", min(5, self.max_results))
        if isinstance(limit, int) and not isinstance(limit, bool):
            limit = max(1, min(limit, self.max_results))
        try:
            matches = self.index.search(query, limit)  # type: ignore[arg-type]
        except ToolbridgeError as exc:
            raise ToolError(exc.message, code=exc.code) from None
        return ToolResult.of_text(json.dumps({"tools": [m.to_dict() for m in matches]}, ensure_ascii=False))

    def use(self, arguments: Mapping[str, object]) -> ToolResult:
        names = _names(arguments.get("names"))
        if names is None:
            raise ToolError(
                f"names must be a list of 1 to {MAX_NAMES} tool names", code="ERR_DISCOVERY_QUERY"
            )
        added = [n for n in dict.fromkeys(names) if n in self.index]
        unknown = [n for n in dict.fromkeys(names) if n not in self.index]
        return ToolResult.of_text(json.dumps({"added": added, "unknown": unknown}, ensure_ascii=False))


def _names(value: object) -> list[str] | None:
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and 0 < len(value) <= MAX_NAMES
        and all(isinstance(n, str) and 0 < len(n) <= 256 for n in value)
    ):
        return list(value)
    return None


def _server(target: ToolTarget) -> str:
    """The name of the provider (or declared tool) a target leads to, when it has one."""
    source = target.binding.provider if isinstance(target.binding, ToolBinding) else target.source
    name = getattr(source, "name", None)  # an optional attribute of any provider
    return name if isinstance(name, str) else ""


class _MetaTools:
    """The provider of `find_tools` and `use_tools` (the agent binds it like any provider)."""

    name = "tool_search"

    def __init__(self, search: ToolSearch) -> None:
        self._search = search

    async def list_tools(self) -> list[ToolSpec]:
        return [_FIND, _USE]

    async def call_tool(self, name: str, arguments: Mapping[str, object]) -> ToolResult:
        if name == FIND_TOOLS:
            return self._search.find(arguments)
        if name == USE_TOOLS:
            return self._search.use(arguments)
        raise ToolError(f"no such tool {name!r}", code="ERR_AGENT_UNKNOWN_TOOL")


def tool_search_of(value: ToolSearch | int | bool | None) -> ToolSearch | None:
    """`Agent(tool_search=...)`: a `ToolSearch`, a threshold, True (the defaults), or None/False.

    Raises:
        ConfigError: `ERR_CONFIG` for any other value.
    """
    if value is None or value is False:
        return None
    if value is True:
        return ToolSearch()
    if isinstance(value, int):
        return ToolSearch(threshold=value)
    if isinstance(value, ToolSearch):
        return value
    raise ConfigError("Agent: tool_search must be a ToolSearch, a threshold, True or None", code="ERR_CONFIG")
