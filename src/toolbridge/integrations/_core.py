"""What every framework adapter shares: the tool source, failure kinds, schemas, results.

An adapter takes a `source`:

- a `GovernedSession` (`runtime.session(...)`): **governed**. Every call goes through
  `session.call_tool`, under the runtime's rules, journaled; a refusal or failure raises
  `PolicyError` (the runtime's code and generic message) and ends the session, so the adapter
  lets it end the framework's run too: the model never sees it, and never a server's text;
- any `ToolProvider` (`McpToolProvider`, `FunctionTools`, a pinned provider, ...) or a list of
  declared tools: **not governed**. Tools keep their model-facing names (the same naming rules
  as an `Agent`'s), and a failed call becomes what the framework shows the model so it may
  retry (`Error: ...`, the text an ungoverned `Agent` shows).

Tools whose name or parameters schema a framework cannot take (a schema that is not a JSON
Schema object, one too deep to walk) are left out, one warning each on the
`toolbridge.integrations` logger; the other tools are kept.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeAlias, TypeVar

from .._bounded import MAX_ARGUMENT_DEPTH
from .._json import JsonObject
from ..agent import error_feedback, result_to_model
from ..calls import DeclaredToolLike, ToolBinding
from ..catalog import ToolCatalog, check_declared
from ..content import Part
from ..errors import AgentError, ConfigError, PolicyError, ToolbridgeError, ToolError, bounded
from ..runtime import GovernedSession
from ..tools import ToolProvider, ToolResult, ToolSpec

__all__ = [
    "MAX_SCHEMA_BYTES",
    "Converter",
    "Failure",
    "SourceLike",
    "ToolSource",
    "as_source",
    "classify",
    "copy_schema",
    "model_parts",
    "refuse_deep",
    "usable",
]

log = logging.getLogger("toolbridge.integrations")

MAX_SCHEMA_BYTES = 1 << 20
"""A tool whose parameters schema is larger than this (as JSON) is left out."""

_MAX_DEPTH = 64
T = TypeVar("T")


class ToolSource:
    """One source of tools for an adapter: a governed session, or an ungoverned catalog.

    Attributes:
        governed: whether calls go through a `GovernedSession`.
        session: that session (`None` when not governed).
    """

    def __init__(self, *, session: GovernedSession | None = None, catalog: ToolCatalog | None = None):
        self.session = session
        self.governed = session is not None
        self._catalog = catalog
        self._ids = itertools.count()

    async def list_tools(self) -> list[ToolSpec]:
        """The tools with their model-facing names."""
        if self.session is not None:
            return await self.session.list_tools()
        assert self._catalog is not None
        return list((await self._catalog.resolve()).specs)

    def call_tool(self, name: str, args: Mapping[str, object]) -> Awaitable[ToolResult]:
        """Call one tool by its model-facing name (what to await).

        Governed, this is the session's `call_tool` coroutine itself: no layer of this class
        around it (a layer is paid again at every suspension of the call).

        Raises:
            PolicyError: governed: the runtime refused or stopped the call (the session ended);
                ungoverned: a declared tool with effects, a pin mismatch.
            ToolbridgeError: ungoverned: the tool failed (shown to the model to retry).
        """
        if self.session is not None:
            return self.session.call_tool(name, args)
        return self._call_ungoverned(name, args)

    async def _call_ungoverned(self, name: str, args: Mapping[str, object]) -> ToolResult:
        assert self._catalog is not None
        target = (await self._catalog.resolve()).targets.get(name)
        if target is None:
            raise AgentError(f'no such tool "{bounded(name, 100)}"', code="ERR_AGENT_UNKNOWN_TOOL")
        if target.declared:
            result = await target.source.call(args, None, f"call_{next(self._ids)}")
        else:
            result = await target.source.call_tool(target.spec.name, args)
        if not isinstance(result, ToolResult):
            raise ToolError(
                f'tool "{name}" returned {type(result).__name__}, not a ToolResult',
                code="ERR_TOOL_BAD_RESULT",
            )
        return result


SourceLike: TypeAlias = (
    "ToolSource | GovernedSession | ToolProvider | Sequence[DeclaredToolLike] | Mapping[str, object]"
)
"""What an adapter takes as `source`: a session (governed), a provider, declared tools or a binding."""


def as_source(source: SourceLike, where: str) -> ToolSource:
    """The `ToolSource` for what a caller passed as `source`.

    Raises:
        ConfigError: `ERR_CONFIG` when `source` is none of a session, a provider, a list of
            declared tools.
    """
    if isinstance(source, ToolSource):
        return source
    if isinstance(source, GovernedSession):
        return ToolSource(session=source)
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        tools = check_declared(list(source), where)
        return ToolSource(catalog=ToolCatalog((), tools))
    if isinstance(source, Mapping):  # a binding: {"provider": ..., "prefix": ..., "include": ...}
        return ToolSource(catalog=ToolCatalog((ToolBinding.coerce(source),), ()))
    if isinstance(source, ToolProvider):  # ToolBinding checks that both methods are callable
        return ToolSource(catalog=ToolCatalog((ToolBinding.coerce(source),), ()))
    raise ConfigError(
        f"{where}: source must be a GovernedSession, a ToolProvider or a list of declared tools, "
        f"not {type(source).__name__}",
        code="ERR_CONFIG",
    )


@dataclass(frozen=True)
class Failure:
    """What a failed call means to a framework.

    Attributes:
        kind: `"stop"`: end the framework's run with `error` (a `PolicyError`: code and generic
            message only); `"retry"`: show the model `text` so it may correct its call.
        error: the exception to raise for `"stop"`.
        text: the text for `"retry"`.
    """

    kind: Literal["stop", "retry"]
    error: BaseException
    text: str = ""


def classify(exc: Exception) -> Failure:
    """How an adapter hands `exc` (raised by `ToolSource.call_tool`) to its framework."""
    if isinstance(exc, PolicyError):
        return Failure("stop", exc)
    return Failure("retry", exc, error_feedback(exc))


async def refuse_deep(session: GovernedSession, name: str, call_id: object) -> PolicyError:
    """The session's refusal of a call whose arguments nest deeper than `MAX_ARGUMENT_DEPTH`:
    its row is recorded (`not_started`, `INVALID_INPUT`, the tool's name), the session ends.
    The error to raise (the session's earlier one when it had already ended)."""
    try:
        return await session.refuse(
            name,
            None,
            "INVALID_INPUT",
            f"the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels",
            call_id=call_id if isinstance(call_id, str) and call_id else None,
        )
    except PolicyError as ended:
        return ended


def copy_schema(schema: Mapping[str, object]) -> JsonObject:
    """A deep copy of a JSON Schema (through JSON), so a framework may change it freely."""
    copied = json.loads(json.dumps(schema))
    if not isinstance(copied, dict):
        raise ConfigError("parameters must be a JSON object", code="ERR_CONFIG")
    return copied


def _depth(value: object, depth: int = 0) -> int:
    if depth > _MAX_DEPTH:
        return depth
    if isinstance(value, Mapping):
        return max((_depth(v, depth + 1) for v in value.values()), default=depth)
    if isinstance(value, list):
        return max((_depth(v, depth + 1) for v in value), default=depth)
    return depth


def _check_parameters(schema: object) -> JsonObject:
    """A checked copy of a tool's parameters schema, or `ConfigError` saying what is wrong."""
    if not isinstance(schema, Mapping):
        raise ConfigError("parameters are not an object", code="ERR_CONFIG")
    if _depth(schema) > _MAX_DEPTH:
        raise ConfigError(f"parameters nest deeper than {_MAX_DEPTH} levels", code="ERR_CONFIG")
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError):
        raise ConfigError("parameters are not JSON", code="ERR_CONFIG") from None
    if len(text) > MAX_SCHEMA_BYTES:
        raise ConfigError(f"parameters are larger than {MAX_SCHEMA_BYTES} bytes", code="ERR_CONFIG")
    copied: JsonObject = json.loads(text)
    kind = copied.get("type", "object")
    if kind != "object":
        raise ConfigError(
            f"parameters must describe an object, not {bounded(repr(kind), 60)}", code="ERR_CONFIG"
        )
    properties = copied.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(p, dict | bool) for p in properties.values()):
        raise ConfigError("parameters' properties must be an object of schemas", code="ERR_CONFIG")
    required = copied.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ConfigError("parameters' required must be a list of names", code="ERR_CONFIG")
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    try:
        validator_for(copied).check_schema(copied)
    except RecursionError:
        raise ConfigError("parameters are too deeply nested", code="ERR_CONFIG") from None
    except Exception as exc:  # jsonschema's SchemaError: only its first line, bounded
        said = exc.message if isinstance(exc, SchemaError) else exc
        first = str(said).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"parameters are not a valid JSON Schema: {bounded(first, 200)}", code="ERR_CONFIG"
        ) from None
    copied.setdefault("type", "object")
    copied.setdefault("properties", {})
    return copied


class Converter(Generic[T]):
    """Converts specs for one framework, leaving out (and logging once) the ones it cannot take.

    A framework that lists tools at every step (pydantic-ai) converts each spec once: the result
    is kept while the catalog hands out the same `ToolSpec` object (it does until the provider's
    tools change), so a step costs a dictionary lookup per tool, not a schema check.
    """

    _MAX_CACHED = 4096

    def __init__(self, where: str, convert: Callable[[ToolSpec, JsonObject], T | None]):
        self.where = where
        self.convert = convert
        self._logged: set[tuple[str, str]] = set()
        self._cache: dict[tuple[int, Hashable], tuple[ToolSpec, T | None]] = {}

    def __call__(self, specs: Sequence[ToolSpec], key: Hashable = None) -> list[T]:
        """Each spec converted (`None` results left out); `key` is part of the cache key."""
        out: list[T] = []
        for spec in specs:
            cached = self._cache.get((id(spec), key))
            if cached is not None and cached[0] is spec:
                converted = cached[1]
            else:
                converted = self._one(spec)
                if len(self._cache) >= self._MAX_CACHED:
                    self._cache.clear()
                self._cache[(id(spec), key)] = (spec, converted)
            if converted is not None:
                out.append(converted)
        return out

    def _one(self, spec: ToolSpec) -> T | None:
        try:
            return self.convert(spec, _check_parameters(spec.parameters))
        except Exception as exc:
            why = exc.message if isinstance(exc, ToolbridgeError) else f"{type(exc).__name__}: {exc}"
            why = bounded(why.splitlines()[0] if why else type(exc).__name__, 300)
            if (spec.name, why) not in self._logged:
                self._logged.add((spec.name, why))
                log.warning("%s: left out tool %s: %s", self.where, bounded(repr(spec.name), 120), why)
            return None


def usable(
    specs: Sequence[ToolSpec], where: str, convert: Callable[[ToolSpec, JsonObject], T | None]
) -> list[T]:
    """Each spec converted by `convert(spec, checked parameters copy)`; bad ones left out, logged.

    A spec whose parameters fail the checks above, or that `convert` refuses (raises), is left out
    with one warning naming it (by `repr`, bounded: no control character goes out) and why.
    """
    return Converter(where, convert)(specs)


def model_parts(result: ToolResult) -> tuple[Part, ...]:
    """The parts a model is shown for `result` (text, images, audio; structured as JSON text)."""
    return result_to_model(result, True, True)
