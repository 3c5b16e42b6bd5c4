"""`GovernedSession`: the runtime's rules for any caller, one tool call (or batch) at a time.

```python
async with runtime.session(tool_providers=[{"provider": files, "effects": "read"}],
                           principal="alice") as session:
    specs = await session.list_tools()                  # ToolSpecs, model-facing names
    result = await session.call_tool("read_text_file", {"path": "notes.txt"})
    results = await session.call_tools([("a", {}), ("b", {"x": 1})])   # the turn rule
outcome = session.result()                              # a RuntimeResult, like runtime.run's
```

A session is a run without an agent: it is journaled as one run (with `principal`), its events
are the run's events (`run.started`, `tool.*`, `model.*`, `guard.*`, `run.completed`), and every
call goes through exactly the rules of an agent run (`_calls`, `_run_rules`): grants, limits,
budget, timeouts, `tool_result` guards, result rules, honest outcomes, no leakage. A session is
the face of one `GovernedRun` (`_run`); the `Agent`'s governor (`_governor`) is built on the
same object, so there is one implementation of the rules.

- `call_tool(name, args)` returns the `ToolResult` (after guards) or raises `PolicyError` with
  the runtime's code and generic message; `call_tools([(name, args), ...])` checks the whole
  batch before any call runs, then runs the calls concurrently (at most `max_parallel_tools` at
  once) and returns their results in order, or raises the first failure in order.
- Fail closed: the first refusal or failure (`blocked`, `failed`, `outcome_unknown`) ends the
  session; every later call (and model call) is refused with that code.
- `before_model_call(model_id, ...)` / `after_model_call(...)` govern a model call the caller
  makes itself (a framework adapter): the `model:<id>` grant, `max_model_calls`, the context
  size and the budget; `on_model_call_error(error)` replaces `after_model_call` when the model
  call raised (its reserved ceiling stays charged).
- `max_duration_ms` is the session's deadline from its start: a call running past it is
  cancelled (`TIMEOUT`), and later calls are refused.
- Leaving the `async with` ends the session: its outcome is journaled and `result()` gives it.
  A session cancelled from outside (its task cancelled) ends `cancelled`; one left by any other
  exception ends `failed` (`MODEL_FAILED` when a model call failed, else `ABORTED`; a refusal
  it raised keeps its code); either is `outcome_unknown` when a call with effects was in
  flight. A journal that cannot record the session's start leaves it closed from the start
  (`failed` / `JOURNAL_UNAVAILABLE`: every call is refused).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..calls import PlannedToolCall, ToolBinding
from ..catalog import Catalog, ToolCatalog, check_declared
from ..errors import AgentError, ConfigError, PolicyError, ToolbridgeError
from ..tools import ToolResult, ToolSpec
from ._calls import invoker
from ._declared import DeclaredTool
from ._outcomes import CODES, RuntimeResult
from ._run import GovernedRun
from ._run_rules import code_for
from ._state import MAX_NAME, checked_name, new_run_id

if TYPE_CHECKING:
    from ._host import RuntimeHost

__all__ = ["GovernedSession"]

_MAX_UNPLANNED_ROWS = 1000
"""A batch refused before it was planned gets rows for at most this many of its calls."""

log = logging.getLogger("toolbridge.runtime")


class GovernedSession:
    """Governed tool calls for any caller (see the module docs). Build it with `runtime.session()`.

    The caller-facing face of one `GovernedRun` (`_run`): it adds the catalog, the turn counter
    and the checks of a caller's input, and hands every decision to the run's rule objects.

    Attributes:
        run_id: the session's run id (journal, events, `runtime.inspect`).
        principal: who the session acts for, as given (journaled with the run).
    """

    def __init__(
        self,
        runtime: RuntimeHost,
        *,
        tools: Sequence[Any] = (),
        tool_providers: Sequence[Any] = (),
        principal: str | None = None,
        run_id: str | None = None,
        max_parallel_tools: int = 8,
        label: str | None = None,
        catalog: ToolCatalog | None = None,
    ) -> None:
        checked_name("principal", principal)
        checked_name("run_id", run_id)
        if (
            isinstance(max_parallel_tools, bool)
            or not isinstance(max_parallel_tools, int)
            or max_parallel_tools < 1
        ):
            raise ConfigError("max_parallel_tools must be an integer >= 1")
        if catalog is None:
            if isinstance(tool_providers, Mapping) or not isinstance(tool_providers, Sequence):
                tool_providers = [tool_providers]
            bindings = tuple(ToolBinding.coerce(b) for b in tool_providers)
            catalog = ToolCatalog(bindings, check_declared(tools, "session"))
        self.run_id = run_id or new_run_id()
        self.principal = principal
        self._run = run = GovernedRun(
            runtime,
            run_id=self.run_id,
            principal=principal,
            label=label or (f"session ({principal})" if principal else "session"),
        )
        self._core = run.core
        self.rt = runtime
        self.journal = run.core.journal
        self.state = run.core.state
        self.max_parallel_tools = max_parallel_tools
        self._catalog = catalog
        self._turns = 0

    def __repr__(self) -> str:
        return f"GovernedSession({self.run_id!r}, principal={self.principal!r})"

    @property
    def catalog(self) -> ToolCatalog:
        """The session's tools (what `list_tools` resolves; a quota reads a call's declared cost)."""
        return self._catalog

    # -- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> GovernedSession:
        await self._run.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        run = self._run
        if run.result is not None:  # never opened (journal) or already closed
            return
        cancelled = exc is not None and isinstance(exc, anyio.get_cancelled_exc_class())
        if exc is not None and not cancelled:
            self._core.fail(run.exit_code(exc))
        run.completed(await run.settle(cancelled=cancelled))

    def result(self) -> RuntimeResult:
        """The session's outcome, error code, usage, cost and run id (like `runtime.run`'s).

        Before the session is closed: the outcome so far (`succeeded` until something ends it).
        """
        return self._run.so_far()

    # -- model calls the caller makes itself -----------------------------------------------------

    async def before_model_call(
        self,
        model_id: str,
        *,
        context_bytes: int = 0,
        max_output_tokens: int | None = None,
        prices: Any = None,
    ) -> None:
        """Check and reserve one model call before it is made.

        Args:
            model_id: the model's id; the call needs the grant `model:<model_id>`.
            context_bytes: the size of what the call sends (checked against
                `max_context_bytes`; also its input-token ceiling).
            max_output_tokens: the request's output cap (default 4096), for the cost ceiling.
            prices: the model's `ModelPrices` (`None`: the call costs nothing).

        Raises:
            PolicyError: `LIMIT_EXCEEDED`, `PERMISSION_DENIED` or `BUDGET_EXCEEDED` (the call must
                not be made; the run or session has ended), or the code that ended it before.
        """
        self._run.rules.model_started(
            model_id, context_bytes=context_bytes, max_output_tokens=max_output_tokens, prices=prices
        )

    async def after_model_call(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_micros: int | None = None,
        tool_calls: int = 0,
    ) -> None:
        """Settle the oldest model call still open at its reported usage.

        Args:
            input_tokens / output_tokens: the usage the provider reported.
            cost_micros: what the call cost (default: the usage at the prices given to
                `before_model_call`).
            tool_calls: how many tool calls the response asked for (for the event).

        Raises:
            PolicyError: `BUDGET_EXCEEDED` when the call cost more than the rest of the budget
                (it is recorded all the same; the run or session has ended).
        """
        self._run.rules.model_ended(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_micros=cost_micros,
            tool_calls=tool_calls,
        )

    def on_model_call_error(self, error: BaseException | None = None) -> None:
        """Settle the model calls still open after a model call raised instead of answering.

        Call it where `after_model_call` would have been called, when the model call raised
        (or was cancelled). Each open call keeps its full reserved ceiling charged (its real
        cost is not known) and gets a `model.completed` event with the code `MODEL_FAILED`
        (`CANCELLED` when `error` is a cancellation). It does not end the run or session: a
        framework may retry or fall back; if the error leaves the session, the session ends
        `failed` / `MODEL_FAILED`. Synchronous (it never waits), so it is safe in cleanup code
        and during cancellation. Nothing of `error` is recorded but its kind.

        Args:
            error: the exception the model call raised, if known.
        """
        self._run.rules.model_failed(error)

    # -- tools -----------------------------------------------------------------------------------

    async def _resolve(self) -> Catalog:
        try:
            return await self._catalog.resolve()
        except AgentError as exc:
            raise self._core.fail(code_for(exc, "tools")) from None
        except ToolbridgeError:
            raise self._core.fail("TOOLS_UNAVAILABLE") from None

    async def list_tools(self) -> list[ToolSpec]:
        """The tools a model may be shown, with their model-facing names.

        Raises:
            PolicyError: `TOOL_COLLISION` or `TOOLS_UNAVAILABLE` (the session has ended), or the
                code that ended it before.
        """
        self._core.check_open()
        return list((await self._resolve()).specs)

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        context: object = None,
    ) -> ToolResult:
        """Call one tool (by its model-facing name) under the runtime's rules.

        Args:
            name: the model-facing name (as `list_tools()` gives it).
            args: the arguments object (`None` for none).
            call_id: the caller's id for the call (a framework's tool-call id), journaled with
                the run id as the key to reconcile it; default `call_<n>_0`.
            context: the caller's context of the call, handed to a provider that takes one
                (`accepts_context`; the gateway's `CallContext`), else unused.

        Raises:
            PolicyError: the runtime's code and generic message; the session has ended.
        """
        planned, step = await self._planned([(name, args)], None if call_id is None else [call_id])
        call = planned[0]
        target = call.target
        assert target is not None  # `_plan` refused unknown names
        # A declared tool needs no `invoke` closure (the rules call its `send`).
        return await self._run.calls.run(
            call, step, None if isinstance(target.source, DeclaredTool) else invoker(target, call, context)
        )

    async def refuse(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        code: str = "PERMISSION_DENIED",
        detail: str | None = None,
        *,
        call_id: str | None = None,
    ) -> PolicyError:
        """Record a call the caller refused itself (an approval a person declined or could not
        be asked): the call gets its journal row, ended `not_started` with `code` and the tool's
        id, and the session ends with that code. Nothing is sent.

        Args:
            name: the model-facing name of the tool the call was for.
            args: its arguments (only their digest and size are journaled).
            code: a `blocked` or `failed` run code (default `PERMISSION_DENIED`).
            detail: a fixed detail of the caller's (never text from a tool or server).
            call_id: the caller's id for the call (default `call_<n>_0`).

        Returns:
            The error to raise (the runtime's code and generic message).

        Raises:
            ConfigError: `code` is not such a code.
            PolicyError: the code that ended the session before.
        """
        if CODES.get(code) not in ("blocked", "failed"):
            raise ConfigError(f"refuse: {code!r} is not a blocked or failed run code")
        self._core.check_open()
        catalog = self._catalog.current() or await self._resolve()
        step = self._turns
        self._turns += 1
        arguments = args if isinstance(args, Mapping) else {}
        call = PlannedToolCall(call_id or f"call_{step}_0", name, arguments, catalog.targets.get(name))
        error = self._core.fail(code, detail)
        await self._run.refusals.record([call], error, step)
        return error

    async def call_tools(
        self,
        calls: Sequence[tuple[str, Mapping[str, Any] | None]],
        *,
        call_ids: Sequence[str] | None = None,
    ) -> list[ToolResult]:
        """Check a whole batch (the turn rule), then run it concurrently; results in order.

        Args:
            calls: `(model-facing name, arguments)` pairs.
            call_ids: the caller's ids for the calls, one each (default `call_<n>_<i>`).

        Raises:
            PolicyError: the first refusal (nothing of the batch ran) or the first failure in
                order (the others ran to their end); the session has ended.
        """
        planned, step = await self._planned(calls, call_ids)
        if len(planned) == 1:
            call = planned[0]
            assert call.target is not None  # `_plan` refused unknown names
            return [await self._run.calls.run(call, step, invoker(call.target, call))]
        results: list[ToolResult | None] = [None] * len(planned)
        failures: dict[int, BaseException] = {}
        limiter = (
            anyio.CapacityLimiter(self.max_parallel_tools) if len(planned) > self.max_parallel_tools else None
        )

        async def one(index: int, call: PlannedToolCall) -> None:
            assert call.target is not None
            try:
                if limiter is not None:
                    async with limiter:
                        results[index] = await self._run.calls.run(call, step, invoker(call.target, call))
                else:
                    results[index] = await self._run.calls.run(call, step, invoker(call.target, call))
            except PolicyError as exc:
                failures[index] = exc

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(planned):
                tg.start_soon(one, index, call)
        if failures:
            raise failures[min(failures)]
        return [r for r in results if r is not None]

    async def _planned(
        self, calls: Sequence[tuple[str, Mapping[str, Any] | None]], call_ids: Sequence[str] | None
    ) -> tuple[list[PlannedToolCall], int]:
        """A batch checked and planned (the turn rule), with its step; raises on the first refusal.

        What `call_tool` and `call_tools` share: `call_tool` runs its one call right after it,
        with no batch around it. A batch refused before it is planned (the session already ended,
        malformed ids or calls) gets a row for each call that names a tool (`_unplanned`).
        """
        try:
            self._core.check_open()
        except PolicyError as exc:
            if self._run.result is None:  # still open, ended by an earlier refusal or failure
                await self._unplanned(calls, None, exc)
            raise
        if call_ids is not None and (
            isinstance(call_ids, str)
            or not isinstance(call_ids, Sequence)
            or len(call_ids) != len(calls)
            or not all(isinstance(c, str) and 0 < len(c) <= MAX_NAME for c in call_ids)
            or len(set(call_ids)) != len(call_ids)
        ):
            error = self._core.fail(
                "INVALID_INPUT", "call_ids must be distinct non-empty strings, one per call"
            )
            await self._unplanned(calls, None, error)
            raise error
        if (  # a list (the common case) needs no ABC check
            type(calls) is not list and (isinstance(calls, str | bytes) or not isinstance(calls, Sequence))
        ) or not calls:
            raise self._core.fail("INVALID_INPUT", "calls must be a non-empty list of (name, arguments)")
        catalog = self._catalog.current()
        if catalog is None:
            catalog = await self._resolve()
        step = self._turns
        self._turns += 1
        planned: list[PlannedToolCall] = []
        for i, item in enumerate(calls):
            if not isinstance(item, tuple | list) or len(item) != 2 or not isinstance(item[0], str):
                error = self._core.fail(
                    "INVALID_INPUT", "calls must be a non-empty list of (name, arguments)"
                )
                await self._unplanned(calls, call_ids, error, step)
                raise error
            name, args = item
            if args is None:
                args = {}
            if type(args) is not dict and not isinstance(args, Mapping):
                error = self._core.fail("INVALID_INPUT", f"arguments of call #{i} must be an object")
                await self._unplanned(calls, call_ids, error, step)
                raise error
            call_id = call_ids[i] if call_ids is not None else f"call_{step}_{i}"
            planned.append(PlannedToolCall(call_id, name, args, catalog.targets.get(name)))
        await self._run.calls.plan(planned, step)
        return planned, step

    async def _unplanned(
        self, calls: object, call_ids: Sequence[str] | None, error: PolicyError, step: int | None = None
    ) -> None:
        """Rows for a batch refused before it was planned: one per `(name, arguments)` item that
        names a tool (at most `_MAX_UNPLANNED_ROWS`), against the last built catalog."""
        if not isinstance(calls, list | tuple):
            return
        if step is None:
            step = self._turns
            self._turns += 1
        last = self._catalog.last()
        targets = last.targets if last is not None else {}
        refused: list[PlannedToolCall] = []
        for i, item in enumerate(calls[:_MAX_UNPLANNED_ROWS]):
            if isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str):
                args = item[1] if isinstance(item[1], Mapping) else {}
                call_id = call_ids[i] if call_ids is not None else f"call_{step}_{i}"
                refused.append(PlannedToolCall(call_id, item[0], args, targets.get(item[0])))
        await self._run.refusals.record(refused, error, step)
