"""The tool catalog: what a model sees, and where each model-facing name leads.

One implementation for the `Agent` and the governed session (`Runtime.session`). Sources:

- bindings (`ToolBinding`): a provider's tools, listed lazily on first use and again only when
  the provider's `generation` changed; the model-facing name is `prefix + bare name` made
  model-legal;
- declared tools (`DeclaredToolLike`): the id made model-legal;
- the final-answer tool (`final_result`) when the agent has an `output_type`.

What the model is shown of each tool is cleaned here, once, for every provider and framework
adapter (they all read `Catalog.specs`): `sanitize.model_spec` (description, and every
`description`/`title` and `enum`/`const`/`default`/`examples` string of the schemas at any
depth, without terminal escapes, control characters or invisible Unicode; names are model-legal
ASCII). The raw spec stays in `Catalog.targets[name].spec` (and its `mcp`) for the caller. A
listed tool whose schema cannot be walked (nesting deeper than `MAX_SCHEMA_DEPTH`) is left out
with a warning, like a collision.

Names that collide inside **one** binding's listing (`echo ` and `echo\u200b` both become
`echo_`; `fs.echo` and `fs_echo`; a name listed twice), or that would take a declared tool's
name or `final_result`, are all left out and the rest is kept, with one warning per group on the
`toolbridge.agent` logger: a server cannot stop runs, or replace a declared tool, by what it
lists. Two configured sources offering one name (two bindings, two declared tools, a declared
`final_result`) raise `ERR_AGENT_TOOL_COLLISION` naming both: that is the caller's configuration
to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import anyio
from pydantic import BaseModel

from ._naming import model_legal
from .calls import DeclaredToolLike, ToolBinding, ToolTarget
from .errors import AgentError, ConfigError, bounded
from .sanitize import model_spec
from .tools import ToolSpec, provider_generation

__all__ = ["FINAL_RESULT_TOOL", "Catalog", "ToolCatalog", "check_declared"]

log = logging.getLogger("toolbridge.agent")

FINAL_RESULT_TOOL = "final_result"
"""Model-facing name of the final-answer tool offered when `output_type` is set."""


_WHY_DROPPED = {
    "declared": "a declared tool or the final answer has that name",
    "collide": "they collide",
    "deep": "its schema nests too deep to be shown to a model",
}


@dataclass(frozen=True)
class Catalog:
    """One resolved catalog: model-facing name -> target, and the specs in the model's order."""

    targets: Mapping[str, ToolTarget]
    """Each model-facing name's target; its `spec` is the raw one, as its source listed it."""
    specs: tuple[ToolSpec, ...]
    """What the model is shown: cleaned (`sanitize.model_spec`) and under model-facing names."""


@runtime_checkable
class _Named(Protocol):
    name: object


@runtime_checkable
class _Identified(Protocol):
    id: object


def _label(source: object, index: int | None) -> str:
    name = source.name if isinstance(source, _Named) else None
    if not isinstance(name, str):
        name = source.id if isinstance(source, _Identified) else None
    where = f"binding #{index} " if index is not None else "declared tool "
    if isinstance(name, str):
        return f"{where}({type(source).__name__} {name!r})"
    return f"{where}({bounded(repr(source), 120)})"


def check_declared(tools: Sequence[object], where: str) -> tuple[DeclaredToolLike, ...]:
    """The declared tools, each checked to have an id, a `ToolSpec` and `call`.

    Raises:
        ConfigError: `ERR_CONFIG` naming the bad tool.
    """
    checked: list[DeclaredToolLike] = []
    for tool in tools:
        tool_id = tool.id if isinstance(tool, _Identified) else None
        if not isinstance(tool_id, str) or not callable(getattr(tool, "call", None)):
            raise ConfigError(
                f"{where}: {tool!r} is not a declared tool (needs id, spec, call)", code="ERR_CONFIG"
            )
        if not isinstance(tool, DeclaredToolLike) or not isinstance(tool.spec, ToolSpec):
            raise ConfigError(f"{where}: declared tool {tool_id!r} has no ToolSpec", code="ERR_CONFIG")
        checked.append(tool)
    return tuple(checked)


class ToolCatalog:
    """The tools of one agent or session (see the module docs).

    Args:
        bindings: the provider bindings.
        tools: declared tools (checked with `check_declared` by the caller).
        final_answer: the agent's `output_type` (adds `final_result`), or `None`.
    """

    def __init__(
        self,
        bindings: Sequence[ToolBinding],
        tools: Sequence[DeclaredToolLike],
        *,
        final_answer: type[BaseModel] | None = None,
    ) -> None:
        self.bindings = tuple(bindings)
        self.tools = tuple(tools)
        self.final_answer = final_answer
        self._listed: dict[int, tuple[int, list[ToolSpec]]] = {}
        self._catalog_cache: Catalog | None = None
        self._catalog_lock = anyio.Lock()
        self._dropped: set[tuple[int, str, tuple[str, ...]]] = set()
        self._index = {id(b): i for i, b in enumerate(self.bindings)}
        self._built: dict[int, int] = {}
        """The generation of each binding's listing the built catalog was made of."""

    @classmethod
    def of(cls, catalog: Catalog) -> ToolCatalog:
        """A catalog that is always `catalog` (nothing to list): one routed call runs against it."""
        fixed = cls((), ())
        fixed._catalog_cache = catalog
        return fixed

    def last(self) -> Catalog | None:
        """The last built catalog, current or not (None before the first)."""
        return self._catalog_cache

    def settled(self, name: str) -> Catalog | None:
        """The last built catalog when it has `name` and that tool's own source has not changed
        since (a declared tool, or a binding whose provider's generation is the one it was built
        of), else None: routing one name need not wait for the other bindings' listings."""
        cached = self._catalog_cache
        target = cached.targets.get(name) if cached is not None else None
        if target is None:
            return None
        if target.declared:
            return cached
        index = self._index.get(id(target.binding))
        if index is None or self._built.get(index) != provider_generation(self.bindings[index].provider):
            return None
        return cached

    async def _list_binding(
        self,
        index: int,
        binding: ToolBinding,
        out: dict[int, tuple[int, list[ToolSpec]]],
        failures: dict[int, Exception],
    ) -> None:
        generation = provider_generation(binding.provider)
        try:
            specs = list(await binding.provider.list_tools())
        except Exception as exc:  # re-raised as-is after the group, not as an ExceptionGroup
            failures[index] = exc
            return
        out[index] = (generation, specs)

    def _stale(self) -> list[int]:
        """The bindings whose tools were never listed or whose provider's tools changed since."""
        return [
            i
            for i, b in enumerate(self.bindings)
            if i not in self._listed or self._listed[i][0] != provider_generation(b.provider)
        ]

    def current(self) -> Catalog | None:
        """The built catalog when it is still current (no provider changed since), else None.

        What `resolve` returns without awaiting anything: a caller on the path of every call
        tries this first and awaits `resolve` only when it gives None. With no provider
        bindings (declared tools only) a built catalog is always current.
        """
        cached = self._catalog_cache
        if cached is None or (self.bindings and self._stale()):
            return None
        return cached

    async def resolve(self) -> Catalog:
        """The current catalog, listing only the providers never listed or changed since.

        Raises:
            AgentError: `ERR_AGENT_TOOL_COLLISION` when two configured sources share a name.
            ToolbridgeError: whatever a provider's `list_tools()` raises.
        """
        # Fast path, every step of a run: a built catalog that is still current is returned
        # without taking the lock (taking it costs an event-loop iteration). The lock only
        # serializes refreshes, and a refresh in progress shows as stale here.
        cached = self._catalog_cache
        if cached is not None and (not self.bindings or not self._stale()):
            return cached
        if not self.bindings:
            # Declared tools only: nothing to list, so nothing to serialize; built at once
            # (no await in between), without the lock and an empty task group.
            self._catalog_cache = self._build()
            return self._catalog_cache
        async with self._catalog_lock:
            stale = self._stale()
            if self._catalog_cache is not None and not stale:
                return self._catalog_cache
            fresh: dict[int, tuple[int, list[ToolSpec]]] = {}
            failures: dict[int, Exception] = {}
            async with anyio.create_task_group() as tg:
                for i in stale:
                    tg.start_soon(self._list_binding, i, self.bindings[i], fresh, failures)
            self._listed.update(fresh)
            if failures:
                raise failures[min(failures)]
            self._catalog_cache = self._build()
            self._built = {i: listed[0] for i, listed in self._listed.items()}
            return self._catalog_cache

    def _build(self) -> Catalog:
        targets: dict[str, ToolTarget] = {}
        origin: dict[str, str] = {}
        specs: list[ToolSpec] = []

        def add(target: ToolTarget, label: str, shown: ToolSpec | None = None) -> None:
            existing = origin.get(target.model_name)
            if existing is not None:
                raise AgentError(
                    f'tool name "{target.model_name}" is offered twice: by {existing} and by {label}',
                    code="ERR_AGENT_TOOL_COLLISION",
                    details={"name": target.model_name},
                )
            origin[target.model_name] = label
            targets[target.model_name] = target
            specs.append(shown if shown is not None else model_spec(target.spec, target.model_name))

        # Names a server's listing may not take: the declared tools' and the final answer's.
        reserved = {model_legal(tool.id) for tool in self.tools}
        if self.final_answer is not None:
            reserved.add(FINAL_RESULT_TOOL)
        for index, binding in enumerate(self.bindings):
            label = _label(binding.provider, index)  # once per binding, not per tool
            by_name: dict[str, list[ToolSpec]] = {}
            for spec in self._listed[index][1]:
                if binding.allows(spec.name):
                    by_name.setdefault(model_legal(binding.prefix + spec.name), []).append(spec)
            for name, same in by_name.items():
                if len(same) > 1 or name in reserved:
                    self._drop(index, name, same, why="declared" if name in reserved else "collide")
                    continue
                try:
                    shown = model_spec(same[0], name)
                except ConfigError:  # a schema too deep to walk: the server's tool, not the run
                    self._drop(index, name, same, why="deep")
                    continue
                add(
                    ToolTarget(model_name=name, spec=same[0], source=binding.provider, binding=binding),
                    f'{label} tool "{same[0].name}"',
                    shown,
                )
        for tool in self.tools:
            name = model_legal(tool.id)
            add(
                ToolTarget(model_name=name, spec=tool.spec, source=tool, declared=True),
                f'{_label(tool, None)} "{tool.id}"',
            )
        if self.final_answer is not None:
            if FINAL_RESULT_TOOL in origin:
                raise AgentError(
                    f'tool name "{FINAL_RESULT_TOOL}" is reserved for the final answer (output_type) '
                    f"but is also offered by {origin[FINAL_RESULT_TOOL]}",
                    code="ERR_AGENT_TOOL_COLLISION",
                )
            specs.append(
                ToolSpec(
                    name=FINAL_RESULT_TOOL,
                    description=(
                        "Give the final answer. Call this once, when you are done, "
                        "with the answer as arguments."
                    ),
                    parameters=self.final_answer.model_json_schema(),
                )
            )
        return Catalog(targets=targets, specs=tuple(specs))

    def _drop(self, index: int, name: str, specs: Sequence[ToolSpec], *, why: str) -> None:
        """Leave out tools of one listing whose model-facing names collide (logged once each)."""
        key = (index, name, tuple(spec.name for spec in specs))
        if key in self._dropped:
            return
        self._dropped.add(key)
        listed = ", ".join(repr(spec.name) for spec in specs)  # repr: no control character goes out
        log.warning(
            "binding #%d: left out tool(s) %s offered as %r: %s",
            index,
            bounded(listed, 500),
            name,
            _WHY_DROPPED[why],
        )
