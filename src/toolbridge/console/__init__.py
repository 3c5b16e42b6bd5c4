"""The operator's console: approvals waiting for a person, the journal, live calls, as web pages.

See docs/console.md. `ApprovalStore` holds the approvals that wait for an operator (beside the
journal); `console_app` serves the pages (`ConsoleSettings`: who may sign in, what it reads);
an HTTP gateway with a `console:` mounts them at `/console/` (`console_for`), and
`toolbridge console JOURNAL` serves them read-only.
"""

from __future__ import annotations

from ._app import ConsoleSettings, console_app
from ._approvals import APPROVALS_TABLE, MAX_REASON, Approval, ApprovalStore
from ._live import LiveCalls
from ._mount import console_for

__all__ = [
    "APPROVALS_TABLE",
    "MAX_REASON",
    "Approval",
    "ApprovalStore",
    "ConsoleSettings",
    "LiveCalls",
    "console_app",
    "console_for",
]
