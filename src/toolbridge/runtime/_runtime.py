"""The governed runtime: runs agents, and opens sessions, under permissions, limits, budgets,
guards and a journal.

`create_runtime(...)` builds a `Runtime`; its configuration is fixed at creation. Everything a
run does goes through one `GovernedRun` (`_run`): `runtime.session(...)` hands any caller a
`GovernedSession` (`_session`), the face of one; `runtime.run(agent, input)` and
`runtime.stream(agent, input)` open one per run and give the agent a `Governor` (`_governor`)
that hands every decision to it. A run is composed of objects over one `RunCore` (`_state`), each
used through its public methods: `CallRules` (`_calls`: per tool call, the turn rule, journaling,
timeouts, result rules, guards), `RefusedCalls` (`_refusals`) and `RunRules` (`_run_rules`: per
run, model calls, limits, the budget, the outcome); journal backends in
`_journal` (the interface, sync and awaited; the runtime writes through one `JournalPort`,
`_journal_port`), `_journal_memory`, `_journal_sqlite` and
`_journal_postgres` (its writes awaited on the loop), their SQL in `_journal_sql`.

Around an agent run, the runtime adds what only a run has: the input size and `input` guards
before the first model call, the final output's size and `output` guards at the end, and the
run's deadline (`max_duration_ms`) and cancellation (`cancel(run_id)`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, Protocol, runtime_checkable

import anyio

from .._deadlines import deadline_watch
from .._owned_tasks import stop_task
from ..agent import AgentEvent, AgentHooks, Message, RunErrorEvent, RunFinishedEvent, RunResult
from ..errors import ConfigError, PolicyError
from ._events import Event
from ._governor import Governor
from ._guards import GuardContext, Guards, run_guards
from ._host import OpenRuns
from ._journal import JournalBackend, RunRecord
from ._journal_memory import MemoryJournal
from ._journal_port import JournalPort
from ._journal_postgres import PostgresJournal, is_postgres_url
from ._journal_sqlite import Journal
from ._limits import Limits, value_bytes
from ._operations import Operation
from ._outcomes import RuntimeResult
from ._permissions import Permissions
from ._run import GovernedRun
from ._session import GovernedSession
from ._state import checked_name, new_run_id

__all__ = ["PROFILES", "RunOutcomeEvent", "Runtime", "create_runtime"]

PROFILES: Final = ("ephemeral", "durable")


AgentInput = str | Sequence[Mapping[str, object] | Message]
"""What an agent runs on: a prompt, or messages (`Message`s or their dicts)."""


class GovernedAgent(Protocol):
    """What `Runtime.run` runs: an `Agent`, or anything with its `run(input, hooks=...)`."""

    async def run(self, prompt_or_messages: AgentInput, /, *, hooks: AgentHooks) -> RunResult: ...


@runtime_checkable
class StreamingAgent(GovernedAgent, Protocol):
    """An agent `Runtime.stream` can drive: it also has `stream(input, hooks=...)`."""

    def stream(
        self, prompt_or_messages: AgentInput, /, *, hooks: AgentHooks
    ) -> AsyncGenerator[AgentEvent, None]: ...


@runtime_checkable
class _Named(Protocol):
    name: object


@runtime_checkable
class _WithModel(Protocol):
    model: object


@runtime_checkable
class _Identified(Protocol):
    id: object


@dataclass(frozen=True)
class RunOutcomeEvent:
    """Terminal event of `Runtime.stream`: the run's `RuntimeResult` (what `run` returns)."""

    type: ClassVar[Literal["run-outcome"]] = "run-outcome"
    result: RuntimeResult


class Runtime:
    """Runs agents and opens sessions under fixed permissions, limits, guards and a journal.

    Build it with `create_runtime`; the configuration cannot change afterwards.
    """

    def __init__(
        self,
        *,
        profile: str,
        permissions: Permissions,
        limits: Limits,
        guards: Guards,
        journal: JournalBackend,
    ) -> None:
        self.profile = profile
        self.permissions = permissions
        self.limits = limits
        self.guards = guards
        self._journal = journal
        self.journal_port = JournalPort(journal)
        """Every write of the runtime's runs and sessions goes through it (see `_journal_port`)."""
        self.open_runs = OpenRuns()
        """The runs and sessions open now (their events; the sessions `cancel` finds)."""
        self._active: dict[str, anyio.CancelScope] = {}
        self._cancel_requested: set[str] = set()

    @property
    def journal(self) -> JournalBackend:
        """The journal backend this runtime's runs are written to (for a second runtime over the
        same journal, or a reader; writes go through `journal_port`)."""
        return self._journal

    @property
    def journal_path(self) -> str:
        """Where the journal lives (`:memory:` for the ephemeral profile)."""
        return self._journal.path

    def subscribe(self, callback: Callable[[Event], object]) -> Callable[[], None]:
        """Receive every event of every run (metadata only); returns an unsubscribe function."""
        return self.open_runs.bus.subscribe(callback)

    def inspect(self, run_id: str) -> RunRecord:
        """The run and the evidence of its tool calls.

        Raises:
            ConfigError: (`ERR_CONFIG`) when the journal has no such run.
        """
        record = self._journal.get_run(run_id, active=self.open_runs.is_open(run_id))
        if record is None:
            raise ConfigError(f"no run {run_id!r} in the journal {self._journal.path!r}")
        return record

    def runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs in the journal (newest first, without calls)."""
        return self._journal.list_runs(limit)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run or session in progress; it ends `cancelled` (or `outcome_unknown`).

        A session's later calls are refused with `CANCELLED`.

        Returns:
            True when the run was in progress.
        """
        cancel_session = self.open_runs.canceller(run_id)
        if cancel_session is not None and run_id not in self._active:
            cancel_session()
            return True
        scope = self._active.get(run_id)
        if scope is None:
            return False
        self._cancel_requested.add(run_id)
        scope.cancel()
        return True

    def close(self) -> None:
        """Close the journal (after one more try at run ends it could not write before).

        A PostgreSQL journal closes every connection it opened (one in use as soon as its write
        ends).
        """
        self.journal_port.flush_run_ends_now()
        self._journal.close()

    def session(
        self,
        *,
        tools: Sequence[object] = (),
        tool_providers: Sequence[object] = (),
        principal: str | None = None,
        run_id: str | None = None,
        max_parallel_tools: int = 8,
    ) -> GovernedSession:
        """A governed session over these tool sources (use it with `async with`).

        Args:
            tools: declared tools (`define_tool`, `define_mcp_tool`).
            tool_providers: bindings, as for an `Agent`: `ToolBinding`s, dicts with `provider`,
                `prefix`, `include`, `exclude`, `effects`, `capabilities`, `cost_micros`,
                `timeout_ms`, or bare providers (`McpToolProvider`, `FunctionTools`, task tool
                sets, `PinnedToolProvider`, ...).
            principal: who the session acts for; journaled with the run.
            run_id: an id for the session's run (default: a fresh one).
            max_parallel_tools: how many calls of one `call_tools` batch run at once.

        Raises:
            ConfigError: (`ERR_CONFIG`) for a bad source, principal or run id; on entering, when
                `run_id` is already in the journal.
        """
        return GovernedSession(
            self,
            tools=tools,
            tool_providers=tool_providers,
            principal=principal,
            run_id=run_id,
            max_parallel_tools=max_parallel_tools,
        )

    def operation(
        self,
        kind: str,
        target: str,
        arguments: object = None,
        *,
        principal: str | None = None,
        label: str | None = None,
        effects: str = "none",
    ) -> Operation:
        """One MCP operation that is not a tool call (`resources/read`, `prompts/get`,
        `completion/complete`), journaled as a run of one call row (use it with `async with`).

        Args:
            kind: the operation (the row's `kind`).
            target: what was asked (a URI, a prompt's name; the row's `tool_id`, bounded).
            arguments: its arguments (only their SHA-256 and size are journaled).
            principal: who asked.
            label: the run's `agent` (default: the kind and principal).
            effects: `none` (default), `read`, `write` or `host`.

        Raises:
            ConfigError: a bad kind or effects; `JournalWriteError` on entering when the journal
                cannot record the start (send nothing then).
        """
        return Operation(self, kind, target, arguments, principal=principal, label=label, effects=effects)

    async def run(
        self, agent: GovernedAgent, input: AgentInput, *, run_id: str | None = None
    ) -> RuntimeResult:
        """Run `agent` on `input` under this runtime's checks.

        Never raises for a failed run: the result's `outcome` and `error_code` say what happened.
        A run cancelled through `cancel(run_id)` returns `cancelled`; when the task calling `run`
        is cancelled from outside, the run is recorded as cancelled and the cancellation
        propagates. Either way, a call with effects that was in flight makes the outcome
        `outcome_unknown`. A journal that cannot record the run's start (locked past its busy
        timeout, disk full) gives `failed` / `JOURNAL_UNAVAILABLE` with nothing run.

        Args:
            agent: an `Agent` (anything with `run(input, hooks=...)`).
            input: the prompt or messages.
            run_id: an id for the run (default: a fresh one).

        Raises:
            ConfigError: (`ERR_CONFIG`) when `run_id` is already in the journal.
        """
        return await self._execute(agent, input, run_id, None)

    async def stream(
        self, agent: GovernedAgent, input: AgentInput, *, run_id: str | None = None
    ) -> AsyncGenerator[AgentEvent | RunOutcomeEvent, None]:
        """Run `agent` on `input` under this runtime's checks, yielding its events as they happen.

        The same run as `run` (same checks, runtime events, journal and outcome), driven through
        `agent.stream`: yields the agent's `TextDeltaEvent`, `ToolCallStartedEvent`,
        `ToolCallFinishedEvent` and `StepFinishedEvent`, then exactly one `RunOutcomeEvent`
        whose `result` is what `run` would have returned. Closing the stream early cancels the
        run (recorded `cancelled`, or `outcome_unknown` when a call with effects was in flight).

        Raises:
            ConfigError: (`ERR_CONFIG`) when `run_id` is already in the journal, or the agent
                cannot stream.
        """
        if not isinstance(agent, StreamingAgent):
            raise ConfigError(f"{type(agent).__name__} has no stream(); use runtime.run")
        send, receive = anyio.create_memory_object_stream[AgentEvent | RunOutcomeEvent](max_buffer_size=16)

        async def produce() -> None:
            async with send:
                result = await self._execute(agent, input, run_id, send.send)
                await send.send(RunOutcomeEvent(result))

        task = asyncio.get_running_loop().create_task(produce(), name="toolbridge-governed-stream")
        try:
            async with receive:
                async for event in receive:
                    yield event
            await task
        finally:
            await stop_task(task)

    async def _execute(
        self,
        agent: GovernedAgent,
        input: AgentInput,
        run_id: str | None,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None,
    ) -> RuntimeResult:
        label = _label(agent)
        run_id = checked_name("run_id", run_id) or new_run_id()
        run = GovernedRun(self, run_id=run_id, principal=None, label=label)
        # One cancel scope for `cancel(run_id)` and the run's `max_duration_ms` (its deadline kept
        # by the loop's `DeadlineWatch`): every cancellation check inside the run walks each scope
        # around it, so a second scope for the deadline would cost at every step. Which of the two
        # ended the run needs no scope of its own: a requested cancellation wins over a timeout
        # (`cancelled` is decided first), and nothing else cancels this scope.
        watch = deadline_watch()
        scope = watch.scope_class()  # anyio.CancelScope(), minus the backend lookup
        self._active[run_id] = scope  # cancellable while its start is written
        try:
            refused = await run.open(deadline=False)
        except BaseException:
            self._active.pop(run_id, None)
            self._cancel_requested.discard(run_id)
            raise
        if refused is not None:
            self._active.pop(run_id, None)
            self._cancel_requested.discard(run_id)
            return refused
        governor = Governor(run)
        self._active[run_id] = scope
        output: object = None
        text: str | None = None
        steps: list[object] = []
        error: BaseException | None = None
        timed_out = False
        outer_cancel = False
        try:
            with scope:
                watch.arm(scope, asyncio.get_running_loop().time() + self.limits.max_duration_ms / 1000)
                try:
                    # The agent is awaited here, not in a helper: a coroutine layer around it
                    # would be paid again at every suspension of every step.
                    checked = await self._agent_input(input, governor)
                    try:
                        if on_event is None or not isinstance(agent, StreamingAgent):
                            result: RunResult | None = await agent.run(checked, hooks=governor)
                        else:
                            result = await _streamed(agent, checked, governor, on_event)
                    except BaseException:
                        governor.model_failed()
                        raise
                    output, text, steps = await self._agent_output(result, governor)
                except Exception as exc:
                    error = exc
                finally:
                    watch.disarm(scope)
            timed_out = scope.cancelled_caught and run_id not in self._cancel_requested
        except BaseException:
            outer_cancel = True
            raise
        finally:
            self._active.pop(run_id, None)
            cancelled = run_id in self._cancel_requested or outer_cancel
            self._cancel_requested.discard(run_id)
            settled = await run.settle(
                output=output, text=text, steps=steps, error=error, timed_out=timed_out, cancelled=cancelled
            )
            governor.end_step(settled.error_code)
            run.completed(settled)
        return settled

    async def _agent_input(self, input: AgentInput, governor: Governor) -> AgentInput:
        """The run's input, checked (size) and through the input guards."""
        core, st, limits = governor.core, governor.state, self.limits
        if value_bytes(input) > limits.max_input_bytes:
            raise core.fail("LIMIT_EXCEEDED", "max_input_bytes")
        if self.guards.input:
            st.phase = "guards"
            input = await run_guards(
                self.guards.input,
                input,
                GuardContext(run_id=st.run_id, stage="input"),
                timeout_ms=limits.guard_timeout_ms,
                emit=core.emit,
            )
        st.phase = "agent"
        return input

    async def _agent_output(
        self, result: RunResult | None, governor: Governor
    ) -> tuple[object, str | None, list[object]]:
        """The agent's (output, text, steps), the output checked (size) and through the output guards."""
        core, st, limits = governor.core, governor.state, self.limits
        text: str | None = None
        output: object = None
        steps: list[object] = []
        if result is not None:
            text, output, steps = result.text, result.output, list(result.steps or [])
        if output is None:
            output = text
        if value_bytes(output if output is not None else "") > limits.max_output_bytes:
            raise core.fail("LIMIT_EXCEEDED", "max_output_bytes")
        if self.guards.output:
            st.phase = "guards"
            try:
                output = await run_guards(
                    self.guards.output,
                    output,
                    GuardContext(run_id=st.run_id, stage="output"),
                    timeout_ms=limits.guard_timeout_ms,
                    emit=core.emit,
                )
            except PolicyError as exc:
                core.note(exc)
                raise
            if isinstance(output, str):
                text = output
        return output, text, steps


def _label(agent: object) -> str:
    """`name (model id)` of an agent, for the journal's run label."""
    name = agent.name if isinstance(agent, _Named) else None
    model = agent.model if isinstance(agent, _WithModel) else None
    model_id = model.id if isinstance(model, _Identified) else "?"
    return f"{name or type(agent).__name__} ({model_id})"


async def _streamed(
    agent: StreamingAgent,
    input: AgentInput,
    governor: Governor,
    on_event: Callable[[AgentEvent], Awaitable[None]],
) -> RunResult | None:
    """`agent.stream`'s events handed to `on_event`; returns the run's result (or raises its error)."""
    result: RunResult | None = None
    async with aclosing(agent.stream(input, hooks=governor)) as events:
        async for event in events:
            if isinstance(event, RunFinishedEvent):
                result = event.result
            elif isinstance(event, RunErrorEvent):
                raise event.error
            else:
                await on_event(event)
    return result


def create_runtime(
    profile: str = "ephemeral",
    permissions: Mapping[str, object] | Sequence[str] | Permissions | None = None,
    limits: Mapping[str, object] | Limits | None = None,
    journal: str | os.PathLike[str] | JournalBackend | None = None,
    *,
    guards: Mapping[str, object] | Guards | None = None,
) -> Runtime:
    """Create a governed runtime.

    Args:
        profile: `ephemeral` (the journal lives in memory) or `durable` (the journal is an SQLite
            file, written as things happen, so a crash loses nothing).
        permissions: `{"allow": [...]}`: the exact grants (see `toolbridge.runtime` docs).
            Nothing is allowed by default, not even the model.
        limits: overrides of the default limits (snake_case or camelCase names).
        journal: the `durable` profile's journal (required there, refused otherwise): the path
            of an SQLite file, a PostgreSQL URL (`postgresql://...`, see `_journal_postgres`), or a
            `JournalBackend` (such as `Journal(path, durable=True,
            busy_timeout_ms=...)`).
        guards: `{"input": [...], "tool_result": [...], "output": [...]}`.

    Returns:
        The runtime.

    Raises:
        ConfigError: (`ERR_CONFIG`) for an unknown profile, a durable profile without a journal,
            a journal with the ephemeral profile, an unknown limit, bad permissions or guards.
    """
    if profile not in PROFILES:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    perms = Permissions.from_config(permissions)
    lim = Limits.from_config(limits)
    grd = Guards.from_config(guards)
    store: JournalBackend
    if profile == "durable":
        if isinstance(journal, JournalBackend):
            store = journal
        elif journal is None or str(journal) in ("", ":memory:"):
            raise ConfigError("the durable profile needs journal=<path of an SQLite file>")
        elif is_postgres_url(journal):
            store = PostgresJournal(str(journal))
        else:
            store = Journal(journal, durable=True)
    else:
        if journal is not None:
            raise ConfigError("journal= is for the durable profile; the ephemeral profile keeps it in memory")
        store = MemoryJournal()
    return Runtime(profile=profile, permissions=perms, limits=lim, guards=grd, journal=store)
