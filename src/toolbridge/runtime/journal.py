"""The journal's interface for the packages that keep their own tables beside it.

`toolbridge.batch` stores its batches and items in the journal's own database (the same SQLite
file or PostgreSQL database, through the same dialects and statements) and reads runs back the
way the runtime does; `toolbridge.cli` migrates a PostgreSQL journal and names it without its
password. They import what they need from here, never from the runtime's private journal
modules (`_journal`, `_journal_sql`, `_journal_postgres`), which define everything below.

`JournalBackend`, `CallRecord` and `RunRecord` are also in `toolbridge.runtime`; the rest is for
toolbridge's own packages and may change with the journal's schema.
"""

from __future__ import annotations

from ._journal import CallRecord, JournalBackend, RunRecord, Writer, process_alive, read_back
from ._journal_postgres import is_postgres_url, migrate, redact_url
from ._journal_sql import (
    BATCH_ITEMS_TABLE,
    BATCHES_TABLE,
    BUDGETS_TABLE,
    POSTGRES,
    SQLITE,
    Dialect,
    Statements,
    budget_dict,
)
from ._leases import LeaseStatements, keep_lease, lease_seconds, writer_key

__all__ = [
    "BATCHES_TABLE",
    "BATCH_ITEMS_TABLE",
    "BUDGETS_TABLE",
    "POSTGRES",
    "SQLITE",
    "CallRecord",
    "Dialect",
    "JournalBackend",
    "LeaseStatements",
    "RunRecord",
    "Statements",
    "Writer",
    "budget_dict",
    "is_postgres_url",
    "keep_lease",
    "lease_seconds",
    "migrate",
    "process_alive",
    "read_back",
    "redact_url",
    "writer_key",
]
