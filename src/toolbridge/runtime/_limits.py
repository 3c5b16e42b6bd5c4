"""Run limits with safe defaults, and the cost budget.

Limits are fixed when the runtime is created and apply to each run. Names may be given in
snake_case (`max_steps`) or camelCase (`maxSteps`, as manifests spell them); an unknown name is a
`ConfigError`, never silently ignored.

| limit | default | what it bounds |
|---|---|---|
| `max_steps` | 16 | model turns in a run (`LIMIT_EXCEEDED`) |
| `max_model_calls` | 16 | model calls in a run (`LIMIT_EXCEEDED`) |
| `max_tool_calls` | 64 | tool calls in a run (`LIMIT_EXCEEDED`; 0 allowed) |
| `max_duration_ms` | 60000 | the whole run's wall-clock time (`TIMEOUT`) |
| `max_input_bytes` | 1 MiB | the run input, and each tool call's arguments (`LIMIT_EXCEEDED`) |
| `max_output_bytes` | 1 MiB | the final output, and each tool result (`LIMIT_EXCEEDED`) |
| `max_context_bytes` | 2 MiB | the messages sent in one model call (`LIMIT_EXCEEDED`) |
| `max_cost_micros` | 0 | the run's spend in millionths of a USD (`BUDGET_EXCEEDED`) |
| `guard_timeout_ms` | 5000 | one guard call (`GUARD_UNAVAILABLE`) |
| `tool_timeout_ms` | 30000 | a discovered tool's call when its binding names no timeout (`TIMEOUT`) |

`max_cost_micros` defaults to 0: free calls (scripted models, tools declared without cost) run,
and anything with a price is refused until a budget is set.

**Budget.** Before each model or tool call the runtime *reserves* the most the call can cost;
if `spent + reserved + ceiling` would pass `max_cost_micros`, the call is refused before it is
made. After the call the reservation is *settled*: the actual cost is charged and the rest
released. A call whose actual cost cannot be known keeps its full ceiling charged.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Final, TypeVar

import pydantic

from .._canonical import canonical_json
from ..agent.models import Message, ModelPrices, ModelRequest, Usage
from ..content import AudioPart, ImagePart, TextPart
from ..errors import ConfigError
from ..tools import ToolSpec

__all__ = [
    "DEFAULT_LIMITS",
    "Budget",
    "ContextMeter",
    "Limits",
    "Reservation",
    "SizeCache",
    "context_bytes",
    "model_ceiling",
    "model_cost",
    "parts_bytes",
    "value_bytes",
]

_MIB: Final = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The limits of one run (see the module table for meanings and defaults)."""

    max_steps: int = 16
    max_model_calls: int = 16
    max_tool_calls: int = 64
    max_duration_ms: int = 60_000
    max_input_bytes: int = _MIB
    max_output_bytes: int = _MIB
    max_context_bytes: int = 2 * _MIB
    max_cost_micros: int = 0
    guard_timeout_ms: int = 5_000
    tool_timeout_ms: int = 30_000

    @classmethod
    def from_config(cls, config: Mapping[str, object] | Limits | None) -> Limits:
        """Build limits from a mapping of overrides (snake_case or camelCase keys).

        Raises:
            ConfigError: (`ERR_CONFIG`) for an unknown limit name, a value that is not a
                non-negative integer, or a zero duration/timeout.
        """
        if config is None:
            return cls()
        if isinstance(config, Limits):
            return config
        if not isinstance(config, Mapping):
            raise ConfigError("limits must be a mapping of limit names to integers")
        known = {f.name for f in fields(cls)}
        values: dict[str, int] = {}
        for key, value in config.items():
            if not isinstance(key, str):
                raise ConfigError(f"limits: limit names must be strings, got {key!r}")
            name = _snake(key)
            if name not in known:
                raise ConfigError(f"limits: unknown limit {key!r} (known: {', '.join(sorted(known))})")
            if name in values:
                raise ConfigError(f"limits: {key!r} is given twice (snake_case and camelCase)")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"limits.{key} must be a non-negative integer, got {value!r}")
            if name in ("max_duration_ms", "guard_timeout_ms", "tool_timeout_ms") and value == 0:
                raise ConfigError(f"limits.{key} must be at least 1")
            values[name] = value
        return cls(**values)

    def to_dict(self) -> dict[str, int]:
        """The limits as a plain mapping (snake_case keys)."""
        return asdict(self)


DEFAULT_LIMITS: Final = Limits()


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@dataclass
class Reservation:
    """A reserved amount, settled exactly once."""

    ceiling: int
    settled: bool = False


class Budget:
    """A run's cost budget in micro-units: reserve before a call, settle after.

    Args:
        max_micros: the most the run may spend.
    """

    def __init__(self, max_micros: int) -> None:
        self.max_micros = max_micros
        self.spent = 0
        self.reserved = 0

    def can_reserve(self, amount: int) -> bool:
        """True when `amount` more fits beside what is spent and reserved."""
        return self.spent + self.reserved + max(0, amount) <= self.max_micros

    def reserve(self, amount: int) -> Reservation | None:
        """Reserve `amount`; `None` (and nothing reserved) when it does not fit."""
        amount = max(0, amount)
        if self.spent + self.reserved + amount > self.max_micros:  # `can_reserve`, inline
            return None
        self.reserved += amount
        return Reservation(amount)

    def settle(self, reservation: Reservation, actual: int | None) -> int:
        """Charge `actual` (the full ceiling when `None`: unknown cost) and release the rest.

        Returns:
            The amount charged. It may exceed the ceiling (a model that used more than estimated);
            the charge is recorded all the same and `over` becomes true.
        """
        if reservation.settled:
            return 0
        reservation.settled = True
        self.reserved -= reservation.ceiling
        charge = reservation.ceiling if actual is None else max(0, actual)
        self.spent += charge
        return charge

    @property
    def over(self) -> bool:
        """True when the spend has passed the maximum."""
        return self.spent > self.max_micros


# -- sizes and model-call costs -----------------------------------------------------------------

DEFAULT_MAX_OUTPUT_TOKENS: Final = 4096
_CACHEABLE: Final = (Message, ToolSpec)
"""Frozen types whose context size `context_bytes` may remember for the rest of a run."""
_CACHEABLE_SET: Final = frozenset(_CACHEABLE)


def parts_bytes(parts: Iterable[object]) -> int:
    """Size of content parts: UTF-8 bytes of text, base64 length of images and audio."""
    total = 0
    for part in parts:
        if isinstance(part, TextPart):
            total += len(part.text.encode("utf-8"))
        elif isinstance(part, ImagePart | AudioPart):
            total += len(part.data)
    return total


def message_bytes(message: object) -> int:
    """Approximate size of one message: its text and media, its tool calls' arguments, and the
    provider's own blocks it carries (`Message.native`: thinking, tool search); 0 for anything
    but a `Message`."""
    if not isinstance(message, Message):
        return 0
    content = message.content
    total = len(content.encode("utf-8")) if isinstance(content, str) else parts_bytes(content)
    for tool_call in message.tool_calls or ():
        try:
            total += len(canonical_json(dict(tool_call.arguments))) + len(tool_call.name)
        except (TypeError, ValueError):
            continue  # arguments that are not JSON data are not counted (nor is that call's name)
    native = message.native
    for block in native.blocks if native is not None else ():  # a provider's own blocks (thinking, search)
        if block.get("type") not in ("text", "tool_use"):  # those two are the content and calls above
            try:
                total += len(canonical_json(dict(block)))
            except (TypeError, ValueError):
                continue
    return total


def spec_bytes(spec: ToolSpec) -> int:
    """Approximate size of one tool spec: its parameters schema and description."""
    try:
        return len(canonical_json(dict(spec.parameters))) + len(spec.description.encode("utf-8"))
    except (TypeError, ValueError):
        return 0


SizeCache = dict[int, tuple[object, int]]
"""Sizes already computed, by `id()` of the object, with the object kept so the id stays its own."""


_Item = TypeVar("_Item")


def _sized(item: _Item, measure: Callable[[_Item], int], cache: SizeCache | None) -> int:
    """`measure(item)`, remembered in `cache` for the frozen `Message`s and `ToolSpec`s."""
    if cache is None or type(item) not in _CACHEABLE:
        return measure(item)
    hit = cache.get(id(item))
    if hit is not None and hit[0] is item:
        return hit[1]
    size = measure(item)
    cache[id(item)] = (item, size)
    return size


def context_bytes(request: object, cache: SizeCache | None = None) -> int:
    """Approximate size of what one model call sends: message contents, tool calls and tool specs.

    Args:
        request: the model request (its `messages` and `tools` are read; 0 for anything but a
            `ModelRequest`).
        cache: sizes remembered between the model calls of one run. A run re-sends its whole
            conversation at every step; messages and specs are frozen, so each one is measured
            once (the argument and schema mappings they hold are not changed once sent).
    """
    if not isinstance(request, ModelRequest):
        return 0
    total = 0
    for message in request.messages or ():
        total += _sized(message, message_bytes, cache)
    for spec in request.tools or ():
        total += _sized(spec, spec_bytes, cache)
    return total


class ContextMeter:
    """`context_bytes` of the successive model calls of one run, in time proportional to what is new.

    A run re-sends its whole conversation at every step, with the messages of the last step as
    the same (frozen) objects. The meter remembers the last request's messages and their total:
    when the next request starts with exactly those objects, only the messages after them are
    measured (and remembered in `sizes`, as `context_bytes` does); otherwise everything is
    measured through `sizes`. The result is always what `context_bytes(request, sizes)` gives.
    """

    def __init__(self) -> None:
        self.sizes: SizeCache = {}
        self._messages: tuple[Message, ...] = ()
        self._messages_bytes = 0
        self._tools: tuple[ToolSpec, ...] | None = None
        self._tools_bytes = 0

    def measure(self, request: object) -> int:
        """The context size of `request` (see `context_bytes`)."""
        if not isinstance(request, ModelRequest):
            return 0
        messages = request.messages or ()
        seen = self._messages
        if (
            type(messages) is tuple
            and len(messages) >= len(seen)
            and all(map(operator.is_, messages, seen))  # one C loop: the same objects, in order
        ):
            new = messages[len(seen) :]
            total = self._messages_bytes
        else:
            new, total = messages, 0
        for message in new:
            total += _sized(message, message_bytes, self.sizes)
        # Only frozen messages may be remembered as a prefix (anything else is measured again).
        if type(messages) is tuple and _CACHEABLE_SET.issuperset(map(type, new)):
            self._messages, self._messages_bytes = messages, total
        else:
            self._messages, self._messages_bytes = (), 0
        tools = request.tools or ()
        if tools is not self._tools or type(tools) is not tuple:
            tools_bytes = 0
            for spec in tools:
                tools_bytes += _sized(spec, spec_bytes, self.sizes)
            if type(tools) is tuple and _CACHEABLE_SET.issuperset(map(type, tools)):
                self._tools, self._tools_bytes = tools, tools_bytes
            else:
                self._tools = None
            return total + tools_bytes
        return total + self._tools_bytes


def model_ceiling(prices: ModelPrices | None, context_bytes: int, max_output_tokens: object) -> int:
    """The most a model call may cost: every context byte a token, plus the output token cap.

    `prices` is a `ModelPrices` (or `None`: the model costs nothing); `max_output_tokens` the
    request's cap (anything but a positive integer means the default, 4096).
    """
    if prices is None or not hasattr(prices, "input_per_million_micros"):
        return 0
    max_out = max_output_tokens
    if isinstance(max_out, bool) or not isinstance(max_out, int) or max_out <= 0:
        max_out = DEFAULT_MAX_OUTPUT_TOKENS
    exact: int = context_bytes * prices.input_per_million_micros + max_out * prices.output_per_million_micros
    return -(-exact // 1_000_000)


def model_cost(prices: ModelPrices | None, usage: Usage | None) -> int:
    """What `usage` cost at `prices` (0 without prices or usage)."""
    if prices is None or usage is None or not hasattr(prices, "cost_micros"):
        return 0
    try:
        return int(prices.cost_micros(usage))
    except Exception:
        return 0


def value_bytes(value: object) -> int:
    if isinstance(value, pydantic.BaseModel):
        return len(value.model_dump_json().encode("utf-8"))
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    try:
        return len(canonical_json(value))
    except (TypeError, ValueError):
        total = 0
        if isinstance(value, Sequence):
            for item in value:
                content = item.content if isinstance(item, Message) else item
                total += value_bytes(content) if isinstance(content, str | Mapping) else len(repr(content))
        return total
