"""`Operation`: one MCP operation that is not a tool call, journaled as a run of one call row.

A gateway passes more than tool calls through: `resources/read`, `prompts/get`,
`completion/complete`. Each is evidence of what an identity asked for, so each is journaled the
way a tool call is, in the runtime's vocabulary:

```python
async with runtime.operation("prompts/get", "ev_greeting", {"style": "short"},
                             principal="alice", label="gateway Desk") as op:
    if not allowed:
        raise op.refuse("PERMISSION_DENIED", "prompts:ev_")   # blocked; nothing was sent
    await op.sent()                                             # durably, before the request
    result = await upstream.get_prompt(...)
# succeeded; or failed (TOOL_FAILED / TIMEOUT) when the block raised, cancelled when cancelled
```

One run (`agent` = `label`, `principal` = who asked) holds one call row whose `kind` is the
operation (`resources/read`, ...), `tool_id` what was asked (a URI, a prompt's name: bounded to
`MAX_TARGET` characters), `effects` as given (`none` by default), and, as for a tool call, the
SHA-256 and size of the canonical JSON of the arguments, never the arguments themselves. Its
times say when it was planned, sent and ended. Four journal writes: the run's start, the call's
plan, `sent()`, and the end of both in one transaction.

The outcome: `succeeded` when the block ends normally; `refuse(code)` ends it with that code's
outcome (`blocked` for `PERMISSION_DENIED`); `fail(code)` marks a failure the caller turns into
its own answer; an exception leaving the block is `failed` (`TIMEOUT` for a `TimeoutError`,
the code of a `PolicyError` from `CODES`, else `TOOL_FAILED`), a cancellation `cancelled`. A
journal that cannot record the start refuses the operation (`JOURNAL_UNAVAILABLE`, raised on
entering): nothing is sent that was not recorded.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

import anyio

from .._canonical import canonical_json
from ..errors import ConfigError, PolicyError, bounded
from ._journal import CallEnd, CallPlan, JournalWriteError
from ._outcomes import CODES, policy_error
from ._state import new_run_id

if TYPE_CHECKING:
    from ._host import RuntimeHost

__all__ = ["MAX_TARGET", "Operation"]

MAX_TARGET = 512
"""`tool_id` of an operation's row: what was asked, cut to this many characters."""

_CALL_ID = "op_0"


class Operation:
    """One journaled non-tool operation (see the module docs). Build it with `runtime.operation()`.

    Attributes:
        run_id: the run that holds it.
        outcome: the outcome once the block has ended (None before).
        error_code: its code when it did not succeed.
    """

    def __init__(
        self,
        runtime: RuntimeHost,
        kind: str,
        target: str,
        arguments: Any,
        *,
        principal: str | None,
        label: str | None,
        effects: str,
    ) -> None:
        if not isinstance(kind, str) or not 0 < len(kind) <= 64:
            raise ConfigError("an operation's kind must be a non-empty string of at most 64 characters")
        if effects not in ("none", "read", "write", "host"):
            raise ConfigError("effects must be none, read, write or host")
        self._rt = runtime
        self._journal = runtime.journal_port
        self.kind = kind
        self.target = bounded(str(target), MAX_TARGET)
        try:
            data = canonical_json(arguments if arguments is not None else {})
        except (TypeError, ValueError):
            data = canonical_json(repr(arguments))
        self._sha = hashlib.sha256(data).hexdigest()
        self._bytes = len(data)
        self.principal = principal
        self.label = label or (f"{kind} ({principal})" if principal else kind)
        self.effects = effects
        self.run_id = new_run_id()
        self._row: int | None = None
        self._sent = False
        self._code: str | None = None
        self.outcome: str | None = None
        self.error_code: str | None = None
        self.started = time.monotonic()

    def __repr__(self) -> str:
        return f"Operation({self.kind!r}, {self.target!r}, principal={self.principal!r})"

    @property
    def duration_ms(self) -> float:
        """Milliseconds since the operation began."""
        return (time.monotonic() - self.started) * 1000

    async def __aenter__(self) -> Operation:
        journal = self._journal
        try:
            await journal.start_fresh_run(
                self.run_id, agent=self.label, profile=self._rt.profile, principal=self.principal
            )
            self._row = await journal.plan(self._plan())
        except JournalWriteError:
            self.outcome, self.error_code = "failed", "JOURNAL_UNAVAILABLE"
            raise
        return self

    def _plan(self) -> CallPlan:
        return CallPlan(
            run_id=self.run_id, call_id=_CALL_ID, step=0, tool_id=self.target, tool_version=None,
            kind=self.kind, effects=self.effects, args_sha256=self._sha, args_bytes=self._bytes,
        )  # fmt: skip

    async def sent(self) -> None:
        """Record that the request leaves now (durably, before it does).

        Raises:
            JournalWriteError: the journal could not record it: do not send.
        """
        assert self._row is not None, "use the operation as `async with runtime.operation(...)`"
        await self._journal.request_sent(self._row)
        self._sent = True

    def refuse(self, code: str, detail: str | None = None) -> PolicyError:
        """End the operation with `code` (one of `CODES`) before anything is sent; raise what it returns."""
        self._code = code
        return policy_error(code, detail)

    def fail(self, code: str) -> None:
        """Mark the operation as ended with `code` (one of `CODES`) though the block ends normally
        (the caller answers the failure itself)."""
        self._code = code

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        code = self._code
        if exc is not None and code is None:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                code = "CANCELLED"
            elif isinstance(exc, TimeoutError):
                code = "TIMEOUT"
            elif isinstance(exc, PolicyError) and exc.code in CODES:
                code = exc.code
            else:
                code = "TOOL_FAILED"
        outcome = CODES[code] if code is not None else "succeeded"
        if code is not None and outcome == "failed" and self._sent and self.effects not in ("none", "read"):
            outcome, code = "outcome_unknown", "OUTCOME_UNKNOWN"
        self.outcome, self.error_code = outcome, code
        if self._row is None:
            return
        call = "not_started" if code is not None and not self._sent else outcome  # as a refused tool call
        end: dict[str, Any] = {
            "outcome": outcome,
            "error_code": code,
            "cost_micros": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "model_calls": 0,
            "calls": (CallEnd(self._row, call, code, 0),),
        }
        with anyio.CancelScope(shield=True):
            try:
                await self._journal.end_run(self.run_id, end)
            except JournalWriteError:
                self._journal.keep_run_end(self.run_id, end)
