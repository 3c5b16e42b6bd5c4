"""The permission allow list, and the effects of tools a runtime governs.

Permissions are an explicit list of exact strings fixed when the runtime is created. Nothing is
allowed by default, not even the model. There are no wildcards and no deny list: `tool:*` is just
a grant named `tool:*`, which matches no tool. Grants are case-sensitive.

One pattern form, for large catalogs: a **prefix grant** `tool:<prefix>*` (a non-empty prefix
without `*`, e.g. `tool:github_*`) grants every tool whose id starts with `<prefix>`, so a
gateway binding's prefix can be granted at once instead of one `tool:` grant per tool. The
trade-off: a prefix grant also grants tools the server adds later under that prefix. Pinning
(a gateway's `lock`) is what keeps that bounded: a new tool is withheld until the lock approves
it. `toolbridge check` lists what each prefix grant matches in the lock; the journal always
names the concrete tool called. Effects and capabilities are still granted exactly.

Grant kinds:

- `model:<model.id>`: call that model (`model:scripted`, `model:function`, `model:openai:gpt-4o`);
- `tool:<id>`: call that tool. For a declared tool the id is its `id`; for a discovered tool
  (an `McpToolProvider` binding) it is the **model-facing name** (prefix applied, made legal);
- `effect:read`, `effect:write`, `effect:host`: call tools with those effects;
- any capability name a tool declares, for example `payments:refund`.

A tool call needs `tool:<id>`, every declared capability, and `effect:<effects>` unless the
effects are `none`.

Discovered tools get their effects from the agent's binding (`effects=`, default `write`), and
server annotations may only tighten them: `destructiveHint: true`, or `readOnlyHint: false` said
explicitly, raise `none`/`read` to `write`; `readOnlyHint: true` never lowers anything.
Annotations come from the server and are untrusted, so they can make the runtime stricter but
never more permissive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError

__all__ = [
    "EFFECTS",
    "MAX_GRANTS",
    "MAX_GRANT_CHARS",
    "Permissions",
    "ToolGrantNeeds",
    "effective_effects",
    "tool_prefix",
]

EFFECTS: Final[tuple[str, ...]] = ("none", "read", "write", "host")
"""The effect levels, from harmless to most powerful."""

MAX_GRANTS: Final = 4096
MAX_GRANT_CHARS: Final = 256

_DECIDED_MAX: Final = 4096
_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(EFFECTS)}


@dataclass(frozen=True)
class ToolGrantNeeds:
    """What one tool call needs: its permission id, effects and capabilities."""

    tool_id: str
    effects: str
    capabilities: tuple[str, ...]

    def required(self) -> list[str]:
        """The grants this call needs, in checking order."""
        needs = [f"tool:{self.tool_id}", *self.capabilities]
        if self.effects != "none":
            needs.append(f"effect:{self.effects}")
        return needs


class Permissions:
    """An immutable allow list of exact grant strings.

    Args:
        allow: the grants.

    Raises:
        ConfigError: (`ERR_CONFIG`) when the list is not a list of non-empty strings, has more
            than 4096 grants, or a grant longer than 256 characters.
    """

    __slots__ = ("_allow", "_decided", "_prefixes")

    def __init__(self, allow: Iterable[str] = ()) -> None:
        if isinstance(allow, str | bytes):
            raise ConfigError("permissions.allow must be a list of strings, not one string")
        grants: list[str] = []
        for i, grant in enumerate(allow):
            if not isinstance(grant, str) or not grant:
                raise ConfigError(f"permissions.allow[{i}] must be a non-empty string")
            if len(grant) > MAX_GRANT_CHARS:
                raise ConfigError(f"permissions.allow[{i}] is longer than {MAX_GRANT_CHARS} characters")
            grants.append(grant)
        if len(grants) > MAX_GRANTS:
            raise ConfigError(f"permissions.allow has {len(grants)} grants; at most {MAX_GRANTS} are allowed")
        self._allow: frozenset[str] = frozenset(grants)
        self._prefixes: tuple[str, ...] = tuple(sorted({p for g in grants if (p := tool_prefix(g))}))
        """The prefixes of the prefix grants (`tool:<prefix>*`)."""
        self._decided: dict[tuple[str, str, tuple[str, ...]], str | None] = {}
        """`first_missing` per (tool id, effects, capabilities): the list never changes."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Sequence[str] | Permissions | None) -> Permissions:
        """Build from `{"allow": [...]}`, a plain list, another `Permissions`, or `None` (nothing).

        Raises:
            ConfigError: (`ERR_CONFIG`) on any other shape or an unknown key.
        """
        if config is None:
            return cls(())
        if isinstance(config, Permissions):
            return config
        if isinstance(config, Mapping):
            unknown = sorted(set(config) - {"allow"})
            if unknown:
                raise ConfigError(f"permissions: unknown key {unknown[0]!r} (only 'allow' is supported)")
            allow = config.get("allow", ())
            if allow is None:
                allow = ()
            if not isinstance(allow, Iterable):
                raise ConfigError("permissions.allow must be a list of strings")
            return cls(allow)
        if isinstance(config, Sequence) and not isinstance(config, str | bytes):
            return cls(config)
        raise ConfigError("permissions must be {'allow': [...]} or a list of strings")

    @property
    def grants(self) -> frozenset[str]:
        """The granted strings."""
        return self._allow

    def has(self, grant: str) -> bool:
        """True when `grant` is in the list (exact, case-sensitive match)."""
        return grant in self._allow

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The tool-id prefixes of the prefix grants (`tool:<prefix>*`), sorted."""
        return self._prefixes

    def missing(self, needs: Iterable[str]) -> list[str]:
        """The grants in `needs` that are not in the list (nor, for a `tool:` grant, matched by a
        prefix grant), in order."""
        return [g for g in needs if g not in self._allow and not self._by_prefix(g)]

    def granted_by(self, grant: str) -> str | None:
        """The grant of the list that grants `grant`: itself, a prefix grant, or None."""
        if grant in self._allow:
            return grant
        if self._by_prefix(grant):
            tool_id = grant[len(_TOOL) :]
            return next(f"{_TOOL}{p}*" for p in self._prefixes if tool_id.startswith(p))
        return None

    def _by_prefix(self, grant: str) -> bool:
        return (
            bool(self._prefixes)
            and grant.startswith(_TOOL)
            and grant[len(_TOOL) :].startswith(self._prefixes)
        )

    def first_missing(self, needs: ToolGrantNeeds) -> str | None:
        """The first grant `needs.required()` lacks (None when all are granted), remembered.

        The same as `missing(needs.required())[0]`; the answer for a tool is computed once
        (the list is immutable), so a call checks its grants with one dict lookup.
        """
        key = (needs.tool_id, needs.effects, needs.capabilities)
        try:
            return self._decided[key]
        except KeyError:
            pass
        missing = self.missing(needs.required())
        first = missing[0] if missing else None
        if len(self._decided) >= _DECIDED_MAX:  # bounded: discovered tools may be many
            self._decided.clear()
        self._decided[key] = first
        return first

    def __contains__(self, grant: object) -> bool:
        return grant in self._allow

    def __len__(self) -> int:
        return len(self._allow)

    def __repr__(self) -> str:
        return f"Permissions({sorted(self._allow)!r})"


_TOOL: Final = "tool:"


def tool_prefix(grant: str) -> str | None:
    """The prefix of a prefix grant `tool:<prefix>*` (non-empty, no other `*`), else None."""
    if grant.startswith(_TOOL) and grant.endswith("*"):
        prefix = grant[len(_TOOL) : -1]
        if prefix and "*" not in prefix:
            return prefix
    return None


def effective_effects(declared: str | None, annotations: Mapping[str, Any] | None) -> str:
    """The effects a discovered tool is governed with.

    Args:
        declared: the effects the binding declared, or `None` (then `write`).
        annotations: the server's tool annotations (untrusted hints).

    Returns:
        `declared`, raised to `write` when the server says the tool is destructive
        (`destructiveHint: true`) or explicitly not read-only (`readOnlyHint: false`).
        `readOnlyHint: true` is ignored: a hint may tighten, never loosen.

    Raises:
        ConfigError: (`ERR_CONFIG`) when `declared` is not an effect level.
    """
    effects = "write" if declared is None else declared
    if effects not in _RANK:
        raise ConfigError(f"binding effects must be one of {', '.join(EFFECTS)}; got {effects!r}")
    if annotations and (
        annotations.get("destructiveHint") is True or annotations.get("readOnlyHint") is False
    ):
        effects = max(effects, "write", key=lambda e: _RANK[e])
    return effects
