"""Guards: small checks that allow, block or rewrite a value at a boundary of a run.

Three boundaries have guards:

- **input** guards see the run input before the first model call;
- **tool result** guards see each tool result before the model does (the runtime's
  `tool_result` guards for every tool, plus a declared tool's own `guards=`);
- **output** guards see the final answer before it is released to the caller.

A guard is a plain function, sync or async, taking `(value, context)` (or just `value`) and
returning a `Verdict`: `Verdict.allow()`, `Verdict.block(reason)` or `Verdict.rewrite(value)`.
Guards run in order; a rewrite feeds the next guard. A block ends the run `blocked` with
`GUARD_BLOCKED` (the reason is recorded for people, never given to the model).

Guards **fail closed**: a guard that raises, returns something other than a `Verdict`, or does
not answer within `guard_timeout_ms` ends the run `blocked` with `GUARD_UNAVAILABLE`. Sync guards
run in a worker thread so that a stuck one can be abandoned at its timeout.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import anyio
import anyio.to_thread

from ..errors import ConfigError, PolicyError
from ._outcomes import policy_error

__all__ = ["MAX_GUARDS", "Guard", "GuardContext", "Guards", "Verdict", "run_guards"]

MAX_GUARDS = 32
"""At most this many guards per boundary."""


@dataclass(frozen=True)
class Verdict:
    """A guard's answer.

    Attributes:
        kind: `allow`, `block` or `rewrite`.
        value: the replacement value (`rewrite` only).
        reason: why the value was blocked (`block` only; for people, kept out of model context).
    """

    kind: Literal["allow", "block", "rewrite"]
    value: Any = None
    reason: str | None = None

    @classmethod
    def allow(cls) -> Verdict:
        """Let the value through unchanged."""
        return cls("allow")

    @classmethod
    def block(cls, reason: str | None = None) -> Verdict:
        """Stop the run (`blocked` / `GUARD_BLOCKED`)."""
        return cls("block", reason=reason)

    @classmethod
    def rewrite(cls, value: Any) -> Verdict:
        """Replace the value with `value` (validated again where the boundary has a schema)."""
        return cls("rewrite", value=value)


@dataclass(frozen=True)
class GuardContext:
    """What a guard is told about where it runs.

    Attributes:
        run_id: the run.
        stage: `input`, `tool_result` or `output`.
        tool_id: the tool whose result is checked (`tool_result` only).
        call_id: the tool call (`tool_result` only).
    """

    run_id: str
    stage: str
    tool_id: str | None = None
    call_id: str | None = None


Guard: TypeAlias = Callable[..., "Verdict | Awaitable[Verdict]"]


def _wants_context(guard: Guard) -> bool:
    try:
        params = list(inspect.signature(guard).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in positional)


def check_guards(guards: Iterable[Guard] | Guard | None, where: str) -> tuple[Guard, ...]:
    """Validate a list of guards at configuration time.

    Raises:
        ConfigError: (`ERR_CONFIG`) when an item is not callable or there are more than 32.
    """
    if guards is None:
        return ()
    if callable(guards):
        guards = (guards,)
    items = tuple(guards)
    if len(items) > MAX_GUARDS:
        raise ConfigError(f"{where}: at most {MAX_GUARDS} guards are allowed, got {len(items)}")
    for i, guard in enumerate(items):
        if not callable(guard):
            raise ConfigError(f"{where}[{i}] is not callable")
    return items


@dataclass(frozen=True)
class Guards:
    """The runtime-wide guards, per boundary."""

    input: tuple[Guard, ...] = ()
    tool_result: tuple[Guard, ...] = ()
    output: tuple[Guard, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Guards | None) -> Guards:
        """Build from `{"input": [...], "tool_result": [...], "output": [...]}` (camelCase accepted).

        Raises:
            ConfigError: (`ERR_CONFIG`) for an unknown boundary or a non-callable guard.
        """
        if config is None:
            return cls()
        if isinstance(config, Guards):
            return config
        if not isinstance(config, Mapping):
            raise ConfigError("guards must be a mapping with keys input, tool_result, output")
        values: dict[str, tuple[Guard, ...]] = {}
        for key, value in config.items():
            name = {"toolResult": "tool_result"}.get(key, key)
            if name not in ("input", "tool_result", "output"):
                raise ConfigError(f"guards: unknown boundary {key!r} (known: input, tool_result, output)")
            values[name] = check_guards(value, f"guards.{key}")
        return cls(**values)


EmitFn: TypeAlias = Callable[[str, dict[str, Any]], object]


async def _call_guard(guard: Guard, value: object, ctx: GuardContext) -> object:
    args = (value, ctx) if _wants_context(guard) else (value,)
    if inspect.iscoroutinefunction(guard) or inspect.iscoroutinefunction(type(guard).__call__):
        running = guard(*args)
        assert inspect.isawaitable(running)  # an async guard's call is its coroutine
        return await running
    result = await anyio.to_thread.run_sync(functools.partial(guard, *args), abandon_on_cancel=True)
    if inspect.isawaitable(result):
        return await result
    return result


async def run_guards(
    guards: Sequence[Guard],
    value: Any,
    ctx: GuardContext,
    *,
    timeout_ms: int,
    emit: EmitFn | None = None,
    revalidate: Callable[[Any], Any] | None = None,
) -> Any:
    """Run `guards` in order over `value` and return the value that comes out.

    Args:
        guards: the guards.
        value: the value to check.
        ctx: where the guards run.
        timeout_ms: how long one guard may take.
        emit: receives `guard.started` / `guard.completed` events (metadata only).
        revalidate: applied to a rewritten value (raises `PolicyError` when it is invalid).

    Raises:
        PolicyError: `GUARD_BLOCKED` when a guard blocks; `GUARD_UNAVAILABLE` when a guard raises,
            times out or returns something that is not a `Verdict`.
    """
    for index, guard in enumerate(guards):
        name = getattr(guard, "__name__", type(guard).__name__)
        meta: dict[str, object] = {"stage": ctx.stage, "guard": name, "index": index}
        if ctx.tool_id is not None:
            meta["tool_id"] = ctx.tool_id
            meta["call_id"] = ctx.call_id
        if emit:
            emit("guard.started", dict(meta))
        started = time.monotonic()
        verdict: Any = None
        error: PolicyError | None = None
        try:
            with anyio.fail_after(timeout_ms / 1000):
                verdict = await _call_guard(guard, value, ctx)
        except TimeoutError:
            error = policy_error("GUARD_UNAVAILABLE", f"{ctx.stage} guard {name!r} timed out")
        except Exception:
            error = policy_error("GUARD_UNAVAILABLE", f"{ctx.stage} guard {name!r} raised")
        if error is None and not isinstance(verdict, Verdict):
            error = policy_error("GUARD_UNAVAILABLE", f"{ctx.stage} guard {name!r} did not return a Verdict")
        if error is None and verdict.kind == "block":
            error = policy_error("GUARD_BLOCKED", f"{ctx.stage} guard {name!r}")
            if verdict.reason:
                error.details["reason"] = verdict.reason
        duration_ms = round((time.monotonic() - started) * 1000, 3)
        if emit:
            done = dict(meta, duration_ms=duration_ms)
            done["verdict"] = verdict.kind if isinstance(verdict, Verdict) else None
            if error is not None:
                done["code"] = error.code
            emit("guard.completed", done)
        if error is not None:
            raise error
        assert isinstance(verdict, Verdict)
        if verdict.kind == "rewrite":
            value = revalidate(verdict.value) if revalidate is not None else verdict.value
    return value
