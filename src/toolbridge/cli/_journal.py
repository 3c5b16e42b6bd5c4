"""`toolbridge journal migrate URL`: apply a PostgreSQL journal's missing schema versions.

Writers migrate on first use and readers never do; this command does it ahead of time (before a
rollout, or for a database whose writers may not create tables). It prints the version reached,
with host, port and database only (never the password). Without psycopg installed it stops with
one line naming the extra (`ERR_MISSING_EXTRA`, `toolbridge[postgres]`), before anything else.
"""

from __future__ import annotations

import argparse

from .._extras import require
from ..errors import ConfigError
from ._output import emit
from ._parsing import Subcommands, add_action_help

__all__ = ["register"]

_USAGE = "toolbridge journal migrate postgresql://USER:PASSWORD@HOST:PORT/DB"


def register(subparsers: Subcommands) -> None:
    """Add the `journal` command (with its `migrate` action)."""
    journal = subparsers.add_parser(
        "journal",
        help="manage a PostgreSQL journal's schema",
        description="`journal migrate URL` applies a PostgreSQL journal's missing schema versions.",
    )
    journal.add_argument("action", choices=["migrate"], help="migrate: apply the missing schema versions")
    journal.add_argument("url", metavar="URL", help="postgresql://...")
    journal.set_defaults(handler=_handle_journal)
    migrate = add_action_help(
        journal,
        "migrate",
        usage=_USAGE,
        description=(
            "Apply the PostgreSQL journal's missing schema versions (writers also do it on first use; "
            "readers never do) and print the version reached, with host, port and database only. "
            "Needs toolbridge[postgres]."
        ),
    )
    migrate.add_argument("url", metavar="URL", help="the journal's database: postgresql://...")


def _handle_journal(args: argparse.Namespace) -> int:
    from ..runtime.journal import is_postgres_url, migrate, redact_url

    if not is_postgres_url(args.url):
        raise ConfigError("journal migrate takes a postgresql:// URL (SQLite journals need no migration)")
    for module in ("psycopg", "psycopg_pool"):  # before anything else: one line naming the extra
        require("postgres", module, "journal migrate")
    version = migrate(args.url)
    emit(f"journal {redact_url(args.url)} at schema version {version}")
    return 0
