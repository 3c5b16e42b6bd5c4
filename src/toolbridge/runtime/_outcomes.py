"""Run outcomes, their codes, and the generic messages that go with them.

A governed run ends in exactly one of five outcomes. Each non-success outcome carries one code
from a small, closed, documented set, and a **generic** message chosen here, never text taken
from a tool, a server, a transport or a model provider: whatever such a party said may be
attacker-controlled or secret, so it stops at the runtime boundary (the "no leakage" rule).

| outcome | codes |
|---|---|
| `succeeded` | (none) |
| `failed` | `INVALID_INPUT`, `INVALID_OUTPUT`, `MODEL_FAILED`, `TOOL_FAILED`, `TOOL_ERROR`, |
| | `TOOL_REFUSED`, `INPUT_REQUIRED`, `LIMIT_EXCEEDED`, `TIMEOUT`, `NOT_FOUND`, `INTERRUPTED`, |
| | `JOURNAL_UNAVAILABLE`, `TOOL_COLLISION`, `TOOLS_UNAVAILABLE`, `UPSTREAM_UNAVAILABLE`, `ABORTED` |
| `blocked` | `PERMISSION_DENIED`, `BUDGET_EXCEEDED`, `GUARD_BLOCKED`, `GUARD_UNAVAILABLE`, |
| | `APPROVAL_TIMEOUT` |
| `cancelled` | `CANCELLED` |
| `outcome_unknown` | `OUTCOME_UNKNOWN` |

`TOOL_ERROR`, `TOOL_REFUSED` and `INPUT_REQUIRED` are failures the server answered with (an
`isError` result; a JSON-RPC error that refuses the request before acting; a 2026-07-28 request
for input before it finishes): known, so never `outcome_unknown` (`_answers` has the table).
`UPSTREAM_UNAVAILABLE` is the gateway's refusal while a failing server's calls are paused.
`INTERRUPTED` is read back from a durable journal for a run whose process died while no call
with effects was in flight (so nothing is unknown about the outside world). `ABORTED` ends a
session (`runtime.session`) left by an exception raised by the caller's code (or a framework
around it) that was neither the session's own refusal nor a model call's failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import PolicyError

__all__ = [
    "CODES",
    "GENERIC_MESSAGES",
    "OUTCOMES",
    "Outcome",
    "RuntimeResult",
    "policy_error",
    "worse",
]

Outcome = Literal["succeeded", "failed", "blocked", "cancelled", "outcome_unknown"]

OUTCOMES: Final[tuple[str, ...]] = ("succeeded", "failed", "blocked", "cancelled", "outcome_unknown")

CODES: Final[dict[str, str]] = {
    "INVALID_INPUT": "failed",
    "INVALID_OUTPUT": "failed",
    "MODEL_FAILED": "failed",
    "TOOL_FAILED": "failed",
    "TOOL_ERROR": "failed",
    "TOOL_REFUSED": "failed",
    "INPUT_REQUIRED": "failed",
    "UPSTREAM_UNAVAILABLE": "failed",
    "LIMIT_EXCEEDED": "failed",
    "TIMEOUT": "failed",
    "NOT_FOUND": "failed",
    "INTERRUPTED": "failed",
    "JOURNAL_UNAVAILABLE": "failed",
    "TOOL_COLLISION": "failed",
    "TOOLS_UNAVAILABLE": "failed",
    "ABORTED": "failed",
    "PERMISSION_DENIED": "blocked",
    "BUDGET_EXCEEDED": "blocked",
    "GUARD_BLOCKED": "blocked",
    "GUARD_UNAVAILABLE": "blocked",
    "APPROVAL_TIMEOUT": "blocked",
    "CANCELLED": "cancelled",
    "OUTCOME_UNKNOWN": "outcome_unknown",
}
"""Every run error code and the outcome it belongs to."""

GENERIC_MESSAGES: Final[dict[str, str]] = {
    "INVALID_INPUT": "the input did not match the declared schema",
    "INVALID_OUTPUT": "the output did not match the declared schema",
    "MODEL_FAILED": "the model call failed",
    "TOOL_FAILED": "the tool call failed",
    "TOOL_ERROR": "the tool answered that the call failed",
    "TOOL_REFUSED": "the server refused the call before running it",
    "INPUT_REQUIRED": "the server asked for input before it would finish the call",
    "UPSTREAM_UNAVAILABLE": "the server of this tool keeps failing, so calls to it are paused",
    "LIMIT_EXCEEDED": "a run limit was reached",
    "TIMEOUT": "the call or run took longer than allowed",
    "NOT_FOUND": "the model asked for a tool this agent does not have",
    "INTERRUPTED": "the process running this run stopped before it finished",
    "JOURNAL_UNAVAILABLE": "the evidence journal could not be written, so nothing more was sent",
    "TOOL_COLLISION": "two configured tool sources offer the same model-facing tool name",
    "TOOLS_UNAVAILABLE": "the agent's tools could not be listed, so no tool was called",
    "ABORTED": "the code using the session raised an error, so the session ended",
    "PERMISSION_DENIED": "a required permission was not granted",
    "BUDGET_EXCEEDED": "the cost budget does not allow this call",
    "GUARD_BLOCKED": "a guard blocked the value",
    "GUARD_UNAVAILABLE": "a guard failed or timed out, so the value was blocked",
    "APPROVAL_TIMEOUT": "the call needed approval and no operator decided in time",
    "CANCELLED": "the run was cancelled",
    "OUTCOME_UNKNOWN": (
        "a call with effects failed after its request was sent; the remote side may have acted"
    ),
}
"""The only messages a failed run carries (plus a fixed, non-foreign detail such as a grant name)."""

_SEVERITY: Final[dict[str, int]] = {
    "succeeded": 0,
    "failed": 1,
    "blocked": 2,
    "cancelled": 3,
    "outcome_unknown": 4,
}


def worse(a: str, b: str) -> str:
    """The more serious of two outcomes (`outcome_unknown` is the most serious)."""
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def policy_error(code: str, detail: str | None = None) -> PolicyError:
    """A `PolicyError` for `code` with its generic message and the outcome it leads to.

    Args:
        code: one of `CODES`.
        detail: an optional fixed detail chosen by toolbridge (a grant name, a limit name),
            never text from a tool, server or provider.
    """
    message = GENERIC_MESSAGES[code]
    if detail:
        message = f"{message}: {detail}"
    return PolicyError(message, code=code, outcome=CODES[code])


@dataclass
class RuntimeResult:
    """What `Runtime.run` returns: it never raises for a failed run.

    Attributes:
        outcome: `succeeded`, `failed`, `blocked`, `cancelled` or `outcome_unknown`.
        output: the final output (the agent's validated structured output, or its text),
            after output guards; `None` unless the run succeeded.
        error_code: the code of a non-success outcome (see the module table), else `None`.
        error_message: the generic message of that code, else `None`.
        usage: token usage summed over the model calls (`input_tokens`, `output_tokens`).
        cost_micros: what the run spent, in millionths of a USD.
        run_id: the run's id, for `Runtime.inspect`.
        text: the agent's final text (`None` unless the run succeeded).
        steps: the agent's steps, when the run reached the end.
    """

    outcome: str
    output: Any = None
    error_code: str | None = None
    error_message: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_micros: int = 0
    run_id: str = ""
    text: str | None = None
    steps: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the run succeeded."""
        return self.outcome == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe summary (without the output and the steps)."""
        return {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "usage": dict(self.usage),
            "cost_micros": self.cost_micros,
        }
