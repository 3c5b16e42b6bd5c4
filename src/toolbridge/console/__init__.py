"""The operator's console: approvals waiting for a person, the journal, live calls and pins, as web pages.

See docs/console.md. `ApprovalStore` holds the approvals that wait for an operator (beside the
journal); the pages are served by an HTTP gateway at `/console/` (its `console:` field) and,
read-only, by `toolbridge console JOURNAL`.
"""

from __future__ import annotations

from ._approvals import APPROVALS_TABLE, MAX_REASON, Approval, ApprovalStore

__all__ = ["APPROVALS_TABLE", "MAX_REASON", "Approval", "ApprovalStore"]
