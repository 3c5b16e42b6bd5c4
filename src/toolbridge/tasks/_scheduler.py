"""The task scheduler: runs tasks one at a time, instructions in order, with pause/skip/stop.

Design:

- **One task at a time.** A `TaskScheduler` owns one browser context (through `TaskServices`);
  `run()` waits on a FIFO lock, so tasks run in the order they were submitted and the
  instructions of two tasks never interleave on a page. A task that is cancelled while queued
  simply leaves the queue; one cancelled while running releases the lock on the way out.
- **Instructions in order.** Each instruction's params are substituted just before it runs
  (arguments were checked before the task started; `{{id.path}}` references read the results of
  earlier instructions), validated against its action's model, and the action is awaited under a
  time limit (`instruction_timeout_s`). Every result is kept (`Task.results`, and by id).
- **Fallbacks.** A failing instruction runs its `catchInstruction` (which may have its own); the
  fallback's result stands in for the instruction's. When the fallbacks fail too, the task ends
  with `error`, the index of the instruction and a message naming what failed (never a traceback).
- **Controls.** `Task.pause()` takes effect between instructions (a running action is not
  interrupted); `resume()` continues; `skip()` (while paused) drops the next instruction and
  continues; `stop()` cancels the running action and ends the task with `partial completed` and
  the index of the first instruction not completed. A pause lasts at most `max_pause_s`, then
  the task stops.
- **Progress.** Before each instruction the `progress` callback gets `(i, n, message)`; while
  paused it gets a notification every `pause_keepalive_s` (with a slowly growing fraction, so the
  values keep increasing as MCP requires) so that clients that reset their timeout on progress
  keep waiting; at the end `(n, n, "done")`.
- **Pacing.** TinyAgent waited a fixed second after every step; here `step_delay_ms` (default 0)
  sets an optional pause between instructions.

The task result (`TaskOutcome.envelope`) follows `task_output_schema()`:
`{status, index, instruction?, result?, error?: {message}}`. The task's `result` is the value of
the last `result` action when there was one, otherwise the last instruction's result (left out
when it is null); on success it is checked against the tool file's `outputSchema`, and a result
that does not fit turns the outcome into an `error` (an MCP client would otherwise reject the
structured content). Content parts returned by actions (screenshots) are kept, in order, in
`TaskOutcome.parts`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .. import telemetry
from ..content import Part, part_to_mcp, to_json_text
from ..errors import ConfigError, ToolbridgeError, bounded
from ._substitute import MissingValue, PathError
from .actions._context import ActionContext, TaskServices
from .actions._registry import ActionRegistry, ActionResult

if TYPE_CHECKING:
    from ._format import InstructionModel
    from ._parser import TaskTool

__all__ = [
    "ElicitFn",
    "ProgressFn",
    "Task",
    "TaskOutcome",
    "TaskRequest",
    "TaskScheduler",
    "TaskStatus",
]

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
"""`await progress(progress, total, message)`."""

ElicitFn = Callable[[str, dict[str, object]], Awaitable[dict[str, object]]]
"""`await elicit(message, requested_schema)`: ask the person at the MCP client (elicitation);
gives `{"action": "accept" | "decline" | "cancel", "content": {...}}`."""

TaskStatus = Literal["success", "error", "partial completed"]
_STATUSES: dict[str, TaskStatus] = {
    "success": "success",
    "error": "error",
    "partial completed": "partial completed",
}


@dataclass(frozen=True)
class TaskRequest:
    """A task to run: the tool, its checked arguments (defaults filled in) and a fresh id.

    `elicit`, when the MCP client offers elicitation, asks its user (the `userGuide` action).
    """

    id: str
    tool: TaskTool
    arguments: Mapping[str, object]
    elicit: ElicitFn | None = None


@dataclass(frozen=True)
class TaskOutcome:
    """The end of a task.

    Attributes:
        envelope: `{status, index, instruction?, result?, error?}` (see `task_output_schema`).
        parts: content parts produced by actions (screenshots), in order.
        results: the result of every top-level instruction that ran, in order.
    """

    envelope: dict[str, object]
    parts: tuple[Part, ...] = ()
    results: tuple[Any, ...] = ()

    @property
    def status(self) -> TaskStatus:
        """`success`, `error` or `partial completed`."""
        return _STATUSES[str(self.envelope["status"])]

    @property
    def ok(self) -> bool:
        """Whether the status is `success`."""
        return self.status == "success"

    @classmethod
    def not_started(cls, message: str) -> TaskOutcome:
        """The outcome of a task that failed before its first instruction (index -1)."""
        return cls({"status": "error", "index": -1, "error": {"message": message}})

    def text(self) -> str:
        """The envelope as compact JSON text."""
        return to_json_text(self.envelope)

    def to_call_result(self) -> dict[str, object]:
        """The MCP `CallToolResult` as JSON: the envelope as text and structured content, images after."""
        content = [{"type": "text", "text": self.text()}, *(part_to_mcp(p) for p in self.parts)]
        return {"content": content, "structuredContent": self.envelope, "isError": not self.ok}


class _InstructionFailed(Exception):
    code = "instruction_failed"  # `error.type` of the instruction's span

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Task:
    """One run of a task tool, with its controls.

    Attributes:
        id: this run's id.
        tool: the tool's name.
        index: the top-level instruction reached.
        state: `queued`, `running`, `paused` or `finished`.
        results: the results of the top-level instructions that ran.
        results_by_id: the same, for instructions that have an `id`.
    """

    def __init__(self, request: TaskRequest) -> None:
        self.request = request
        self.id = request.id
        self.tool = request.tool.name
        self.index = 0
        self.state: Literal["queued", "running", "paused", "finished"] = "queued"
        self.results: list[object] = []
        self.results_by_id: dict[str, object] = {}
        self.parts: list[Part] = []
        self.shared: dict[str, object] = {}
        self.cleanups: list[Callable[[], Awaitable[None]]] = []
        self._stop_requested = False
        self._skip_requested = False
        self._paused = False
        self._resumed = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._started = anyio.Event()
        self._finished = anyio.Event()

    @property
    def paused(self) -> bool:
        """Whether a pause was asked for (and not yet resumed)."""
        return self._paused

    def pause(self) -> None:
        """Pause before the next instruction (the running one finishes first)."""
        if self.state != "finished" and not self._paused:
            self._paused = True
            self._resumed = anyio.Event()

    def resume(self) -> None:
        """Continue after a pause."""
        if self._paused:
            self._paused = False
            self._resumed.set()

    def skip(self) -> None:
        """While paused: drop the next instruction and continue. Does nothing when not paused."""
        if self._paused:
            self._skip_requested = True
            self.resume()

    def stop(self) -> None:
        """End the task now with `partial completed`; the running action is cancelled."""
        if self.state == "finished":
            return
        self._stop_requested = True
        if self._scope is not None:
            self._scope.cancel()
        self.resume()

    async def wait_started(self) -> None:
        """Wait until the task's first instruction is about to run (or it finished)."""
        await self._started.wait()

    async def wait_finished(self) -> None:
        """Wait until the task has finished."""
        await self._finished.wait()


@dataclass
class TaskScheduler:
    """Runs tasks one at a time on one set of services (one browser context).

    Attributes:
        registry: the actions.
        services: browser, allow list, MCP servers.
        step_delay_ms: pause between instructions (default 0).
        instruction_timeout_s: the longest one instruction (with its fallbacks) may run.
        max_pause_s: the longest a task may stay paused before it is stopped.
        pause_keepalive_s: how often progress is sent while paused.
    """

    registry: ActionRegistry
    services: TaskServices
    step_delay_ms: int = 0
    instruction_timeout_s: float = 120.0
    max_pause_s: float = 3600.0
    pause_keepalive_s: float = 15.0
    on_created: Callable[[Task], None] | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False, repr=False)
    _queued: list[Task] = field(default_factory=list, init=False, repr=False)
    _current: Task | None = field(default=None, init=False, repr=False)

    @property
    def current(self) -> Task | None:
        """The running task, if any."""
        return self._current

    @property
    def queued(self) -> list[Task]:
        """Tasks waiting for their turn, oldest first."""
        return list(self._queued)

    async def run(self, request: TaskRequest, progress: ProgressFn | None = None) -> TaskOutcome:
        """Queue the task, wait for its turn, run it and return its outcome.

        Never raises for a failing task (the outcome says `error`); cancellation propagates
        after the task has been taken off the queue or finished.
        """
        task = Task(request)
        if self.on_created is not None:
            self.on_created(task)
        self._queued.append(task)
        try:
            async with self._lock:
                self._queued.remove(task)
                self._current = task
                try:
                    return await self._execute(task, progress)
                finally:
                    self._current = None
                    await _run_cleanups(task)
        finally:
            if task in self._queued:  # cancelled while waiting for its turn
                self._queued.remove(task)
            task.state = "finished"
            task._started.set()
            task._finished.set()

    async def _notify(self, progress: ProgressFn | None, value: float, total: float, message: str) -> None:
        if progress is None:
            return
        try:
            with anyio.fail_after(5):
                await progress(value, total, message)
        except Exception as exc:  # the client went away; the task goes on
            log.debug("progress notification failed: %s", exc)

    async def _execute(self, task: Task, progress: ProgressFn | None) -> TaskOutcome:
        tool = task.request.tool
        instructions = tool.instructions
        total = len(instructions)
        task.state = "running"
        task_result: Any = None
        result_set = False
        index = 0
        while index < total:
            task.index = index
            if task._paused and not task._stop_requested:
                await self._wait_paused(task, progress, index, total)
            if task._stop_requested:
                return self._finish(task, "partial completed", index, task_result)
            if task._skip_requested:
                task._skip_requested = False
                index += 1
                continue
            instruction = instructions[index]
            task._started.set()
            await self._notify(progress, index, total, f"{_step(index, total)}: {instruction.action}")
            with anyio.CancelScope() as scope:
                task._scope = scope
                try:
                    value = await self._run_instruction(
                        task, instruction, index, f"task.instructions[{index}]"
                    )
                except _InstructionFailed as failed:
                    return self._finish(task, "error", index, task_result, error=failed.message)
                finally:
                    task._scope = None
            if scope.cancelled_caught:  # stopped while the instruction ran
                return self._finish(task, "partial completed", index, task_result)
            if isinstance(value, ActionResult):
                task.parts.extend(value.parts)
                if value.sets_task_result:
                    task_result, result_set = value.value, True
                value = value.value
            task.results.append(value)
            if instruction.id is not None:
                task.results_by_id[instruction.id] = value
            if not result_set:
                task_result = value
            index += 1
            if self.step_delay_ms and index < total:
                await anyio.sleep(self.step_delay_ms / 1000)
        await self._notify(progress, total, total, "done")
        return self._finish(task, "success", total - 1, task_result)

    async def _wait_paused(self, task: Task, progress: ProgressFn | None, index: int, total: int) -> None:
        task.state = "paused"
        waited = 0.0
        ticks = 0
        while task._paused and not task._stop_requested:
            ticks += 1
            fraction = 0.9 * (1 - 0.5**ticks)
            await self._notify(progress, index + fraction, total, f"paused before {_step(index, total)}")
            step = min(self.pause_keepalive_s, max(self.max_pause_s - waited, 0.0))
            if step <= 0:
                task._stop_requested = True
                break
            with anyio.move_on_after(step):
                await task._resumed.wait()
            waited += step
        task.state = "running"

    async def _run_instruction(self, task: Task, instruction: InstructionModel, index: int, path: str) -> Any:
        try:
            with (
                telemetry.instruction_span(instruction.action, index, path),
                anyio.fail_after(self.instruction_timeout_s),
            ):
                return await self._run_one(task, instruction, index, path)
        except _InstructionFailed as failed:
            message = failed.message
        except TimeoutError:
            message = f"{path} ({instruction.action}) did not finish within {self.instruction_timeout_s:g} s"
        fallback = instruction.catch_instruction
        if fallback is None:
            raise _InstructionFailed(message)
        try:
            return await self._run_instruction(task, fallback, index, f"{path}.catchInstruction")
        except _InstructionFailed as again:
            raise _InstructionFailed(
                f"{message}; then its catchInstruction failed: {again.message}"
            ) from None

    async def _run_one(self, task: Task, instruction: InstructionModel, index: int, path: str) -> Any:
        tool = task.request.tool
        try:
            params = tool.render_params(instruction, path, task.request.arguments, task.results_by_id)
            model = tool.params_model(instruction.action, params, path)
            spec = tool.action_spec(instruction.action)
        except (MissingValue, PathError, ConfigError) as exc:
            text = exc.message if isinstance(exc, ConfigError) else str(exc)
            if isinstance(exc, MissingValue):
                text = f"{exc.path}: argument {exc.name!r} is missing"
            raise _InstructionFailed(f"{path} ({instruction.action}): {text}") from None
        ctx = ActionContext(
            tool=tool.name,
            task_id=task.id,
            index=index,
            path=path,
            results=dict(task.results_by_id),
            previous=tuple(task.results),
            services=self.services,
            elicit=task.request.elicit,
            task_state=task.shared,
            cleanups=task.cleanups,
        )
        try:
            return await spec.fn(model, ctx)
        except ToolbridgeError as exc:
            raise _InstructionFailed(f"{path} ({instruction.action}): {exc.message}") from None
        except TimeoutError:
            raise _InstructionFailed(f"{path} ({instruction.action}): timed out") from None
        except Exception as exc:
            detail = bounded(str(exc).strip().splitlines()[0] if str(exc).strip() else "", 500)
            raise _InstructionFailed(
                f"{path} ({instruction.action}) failed: {type(exc).__name__}"
                + (f": {detail}" if detail else "")
            ) from None

    def _finish(
        self, task: Task, status: TaskStatus, index: int, result: object, *, error: str | None = None
    ) -> TaskOutcome:
        tool = task.request.tool
        instructions = tool.instructions
        if status == "success" and result is not None:
            mismatch = tool.check_result(result)
            if mismatch is not None:
                status = "error"
                error = f"the task's result does not match the tool's outputSchema: {mismatch}"
        envelope: dict[str, object] = {"status": status, "index": index}
        if 0 <= index < len(instructions):
            envelope["instruction"] = instructions[index].to_json()
        if result is not None:
            envelope["result"] = result
        if error is not None:
            envelope["error"] = {"message": error}
        elif status == "partial completed":
            envelope["error"] = {
                "message": f"the task was stopped before {_step(index, len(instructions))} finished"
            }
        task.state = "finished"
        return TaskOutcome(envelope, tuple(task.parts), tuple(task.results))


async def _run_cleanups(task: Task) -> None:
    """Run what actions left to undo when their task ends (listeners, ...), newest first."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(10):
        while task.cleanups:
            cleanup = task.cleanups.pop()
            try:
                await cleanup()
            except Exception as exc:  # the page or browser is already gone
                log.debug("task cleanup failed: %s", exc)


def _step(index: int, total: int) -> str:
    return f"step {index + 1} of {total}"
