"""How SQLite and PostgreSQL spell the journal's tables, types and parameters (`Dialect`).

Below every module that writes SQL templates (`_journal_sql`, `_budgets`, `_leases`), so that
each of them fills its own templates in without importing the others. `_journal_sql`
re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["POSTGRES", "SQLITE", "Dialect"]


@dataclass(frozen=True)
class Dialect:
    """How one database spells the journal's tables, types and parameters."""

    name: str
    placeholder: str
    prefix: str
    types: Mapping[str, str]

    def sql(self, template: str) -> str:
        """`template` with this dialect's names, types and placeholders filled in."""
        names = {
            t: self.prefix + t
            for t in ("runs", "calls", "budgets", "batch_items", "batches", "quotas", "leases")
        }
        text = template.format_map({**names, **self.types})
        return text.replace("?", self.placeholder) if self.placeholder != "?" else text


SQLITE = Dialect(
    "sqlite",
    "?",
    "",
    {
        "REAL": "REAL",
        "BIGINT": "INTEGER",
        "BOOL": "INTEGER",
        "ID": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "TRUE": "1",
        "FALSE": "0",
        "RETURNING_ID": "",  # the row id is the cursor's lastrowid
    },
)
POSTGRES = Dialect(
    "postgres",
    "%s",
    "toolbridge_",
    {
        "REAL": "DOUBLE PRECISION",
        "BIGINT": "BIGINT",
        "BOOL": "BOOLEAN",
        "ID": "BIGSERIAL PRIMARY KEY",
        "TRUE": "TRUE",
        "FALSE": "FALSE",
        "RETURNING_ID": " RETURNING id",
    },
)
