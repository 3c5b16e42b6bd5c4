"""Governed tools and the runtime: permissions, limits, budgets, timeouts, guards, outcomes, evidence.

- `define_tool` / `define_mcp_tool` declare a tool with its own schemas, effects, capabilities,
  cost and timeout (`DeclaredTool`).
- `create_runtime(...)` builds a `Runtime`; `await runtime.run(agent, input)` returns a
  `RuntimeResult` with one of five outcomes, never raising for a failed run.
- `runtime.inspect(run_id)` returns the evidence of every tool call (`RunRecord`, `CallRecord`).
- `Verdict` is what guards return; `Event` is what subscribers receive.

See `docs/declare.md`.
"""

from ._budgets import Quota
from ._declared import DeclaredTool, McpTool, PythonTool, ToolContext, define_mcp_tool, define_tool
from ._events import Event
from ._guards import GuardContext, Guards, Verdict
from ._journal import CallRecord, JournalBackend, RunRecord
from ._journal_memory import MemoryJournal
from ._journal_postgres import PostgresJournal, is_postgres_url
from ._journal_sqlite import Journal, SqliteJournal
from ._leases import keep_leases
from ._limits import Budget, Limits
from ._operations import Operation
from ._outcomes import CODES, OUTCOMES, RuntimeResult
from ._permissions import Permissions, ToolGrantNeeds, effective_effects, tool_prefix
from ._runtime import RunOutcomeEvent, Runtime, create_runtime
from ._session import GovernedSession

__all__ = [
    "CODES",
    "OUTCOMES",
    "Budget",
    "CallRecord",
    "DeclaredTool",
    "Event",
    "GovernedSession",
    "GuardContext",
    "Guards",
    "Journal",
    "JournalBackend",
    "Limits",
    "McpTool",
    "MemoryJournal",
    "Operation",
    "Permissions",
    "PostgresJournal",
    "PythonTool",
    "Quota",
    "RunOutcomeEvent",
    "RunRecord",
    "Runtime",
    "RuntimeResult",
    "SqliteJournal",
    "ToolContext",
    "ToolGrantNeeds",
    "Verdict",
    "create_runtime",
    "define_mcp_tool",
    "define_tool",
    "effective_effects",
    "is_postgres_url",
    "keep_leases",
    "tool_prefix",
]
