"""A 2026-07-28 client's call to a handshake-era upstream that asks during the call.

The client has no channel for a standalone `elicitation/create` (or sampling, roots); the
upstream sends one mid-call and waits for the answer. So such a call runs in a task of its own
(owned by `Suspensions`): when the upstream asks, the downstream request is answered with an
`input_required` round carrying the question (key `toolbridge/upstream/<n>`) under the gateway's
sealed state, while the upstream's request waits; the client's retry delivers its answer to the
waiting upstream request, and waits again for the result or the next question.

Bounds: a question waits at most `wait_s` (the gateway's `approvalTimeoutMs`) for the retry, then
the upstream gets an error answer; a finished call's result is kept `ROUND_TTL_S` for a retry that
comes late; at most `MAX_SUSPENDED` calls at once (past that, a call runs as before and such a
question is refused). A downstream request cancelled while the upstream works (no question
pending) cancels the upstream call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

import anyio
import mcp_types as types

from ._rounds import ROUND_TTL_S

__all__ = ["MAX_SUSPENDED", "SUSPEND_KEY", "CallOutcome", "InputAnswer", "Question", "Suspend", "Suspensions"]

log = logging.getLogger("toolbridge.gateway")

SUSPEND_KEY = "toolbridge/upstream/"
"""The prefix of the keys of an upstream's questions in a suspended call's rounds."""

MAX_SUSPENDED = 256
"""Calls suspended at once, at most."""

InputAnswer: TypeAlias = (
    types.CreateMessageResult
    | types.CreateMessageResultWithTools
    | types.ElicitResult
    | types.ListRootsResult
    | types.ErrorData
)
"""What a client answers to an upstream's question (`types.InputRequest`), or the error instead."""

CallOutcome: TypeAlias = types.CallToolResult | types.InputRequiredResult
"""What a suspended call ends with (its task's result)."""

Suspend: TypeAlias = Callable[[types.InputRequest], Awaitable[InputAnswer]]
"""Hands an upstream's question to the client as a round and waits for the answer."""


@dataclass(frozen=True)
class Question:
    """A suspended call's pending question, to hand to the client."""

    call: str
    key: str
    request: types.InputRequest


@dataclass(eq=False)
class _Call:
    id: str
    wake: asyncio.Future[None] | None = None
    """Resolved when the call finishes or asks (what a waiting downstream request awaits)."""
    task: asyncio.Task[CallOutcome] | None = None
    pending: tuple[str, types.InputRequest, asyncio.Future[InputAnswer]] | None = None
    asked: int = 0

    def woken(self, _: object = None) -> None:
        wake = self.wake
        if wake is not None and not wake.done():
            wake.set_result(None)


def _question(call: _Call) -> tuple[str, types.InputRequest, asyncio.Future[InputAnswer]] | None:
    """The call's question still waiting for an answer (None: none)."""
    pending = call.pending
    return pending if pending is not None and not pending[2].done() else None


_RESULT_TYPES: dict[type[types.InputRequest], tuple[type[InputAnswer], ...]] = {
    types.ElicitRequest: (types.ElicitResult,),
    types.CreateMessageRequest: (types.CreateMessageResult, types.CreateMessageResultWithTools),
    types.ListRootsRequest: (types.ListRootsResult,),
}


@dataclass
class Suspensions:
    """The gateway's suspended calls (see the module docstring)."""

    wait_s: float = 120.0
    _calls: dict[str, _Call] = field(default_factory=dict)

    def full(self) -> bool:
        return len(self._calls) >= MAX_SUSPENDED

    async def start(self, run: Callable[[Suspend], Awaitable[CallOutcome]]) -> CallOutcome | Question:
        """Run `run(suspend)` in a task of its own; its result, or its first question."""
        call = _Call(secrets.token_urlsafe(12))

        async def suspend(request: types.InputRequest) -> InputAnswer:
            return await self._ask(call, request)

        loop = asyncio.get_running_loop()
        call.task = loop.create_task(run(suspend))  # type: ignore[arg-type]
        call.task.add_done_callback(lambda _: self._finished(call))
        self._calls[call.id] = call
        return await self._wait(call)

    async def resume(self, call_id: str, responses: Mapping[str, object]) -> CallOutcome | Question:
        """Answer `call_id`'s pending question from `responses`; its result, or its next question.

        Raises:
            LookupError: no such call (expired, or already finished and collected).
        """
        call = self._calls.get(call_id)
        if call is None:
            raise LookupError("the suspended call is gone")
        pending = call.pending
        if pending is not None and not pending[2].done():
            key, request, answer = pending
            given = responses.get(key)
            if isinstance(given, _RESULT_TYPES[type(request)]):
                answer.set_result(given)
            else:
                refused = types.ErrorData(code=types.INVALID_REQUEST, message="the client did not answer")
                answer.set_result(refused)
        return await self._wait(call)

    def _finished(self, call: _Call) -> None:
        """The call's task ended: wake its waiter, or keep the result `ROUND_TTL_S` for a retry."""
        if call.wake is not None and not call.wake.done():
            call.woken()
        else:
            asyncio.get_running_loop().call_later(ROUND_TTL_S, self._calls.pop, call.id, None)

    async def _wait(self, call: _Call) -> CallOutcome | Question:
        task = call.task
        assert task is not None
        if not task.done() and _question(call) is None:
            call.wake = asyncio.get_running_loop().create_future()
            try:
                await call.wake
            except BaseException:
                if _question(call) is None:  # the client gave up while the upstream works
                    task.cancel()
                raise
            finally:
                call.wake = None
        if task.done():
            self._calls.pop(call.id, None)
            return task.result()
        pending = _question(call)
        assert pending is not None
        return Question(call.id, pending[0], pending[1])

    async def _ask(self, call: _Call, request: types.InputRequest) -> InputAnswer:
        """The upstream's question (in the call's task): wait for the client's next retry."""
        call.asked += 1
        answer: asyncio.Future[InputAnswer] = asyncio.get_running_loop().create_future()
        call.pending = (f"{SUSPEND_KEY}{call.asked}", request, answer)
        call.woken()
        try:
            with anyio.fail_after(self.wait_s):
                return await answer
        except TimeoutError:
            log.info("a suspended call's question was not answered in time")
            return types.ErrorData(code=types.INVALID_REQUEST, message="the client did not answer in time")
        finally:
            call.pending = None
