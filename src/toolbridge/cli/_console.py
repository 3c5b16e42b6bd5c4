"""`toolbridge console JOURNAL`: the console's reading pages over any journal, read-only.

```
toolbridge console JOURNAL [--host 127.0.0.1] [--port 8765] [--operator NAME] [--token-file FILE]
```

JOURNAL is an SQLite journal file or a PostgreSQL URL (`postgresql://...`). The pages are the
gateway console's (docs/console.md): Approvals (pending and decided, without buttons: decisions
are made at a gateway's `/console/`), Journal (filters, one run's and one call's evidence) and
Calls (the journal's latest calls). Nothing is ever written to what it reads: SQLite is opened
through a `mode=ro` URI, PostgreSQL sessions are read-only transactions, nothing is migrated or
created.

Signing in needs the operator token: the first line of `--token-file`, else
`$TOOLBRIDGE_CONSOLE_TOKEN`, else a random one made now and written once on stderr with the
address. It listens on the loopback address unless `--host` says otherwise (then `Origin` must
name the `Host` it was sent to; put it behind TLS).
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path
from typing import Any

import anyio

from ..errors import ConfigError
from ._output import warn

__all__ = ["register"]

TOKEN_ENV = "TOOLBRIDGE_CONSOLE_TOKEN"
MIN_TOKEN = 16


def register(subparsers: Any) -> None:
    """Add the `console` subcommand."""
    console = subparsers.add_parser(
        "console",
        help="serve the operator's console over a journal, read-only (approvals, journal, calls)",
        description="Serve the console's pages over JOURNAL (an SQLite file or a PostgreSQL URL), read-only.",
    )
    console.add_argument("journal", metavar="JOURNAL", help="the SQLite journal file, or a PostgreSQL URL")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    console.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any)")
    console.add_argument("--operator", default="operator", help="the operator's name (default operator)")
    console.add_argument(
        "--token-file",
        help=f"a file whose first line is the operator token (else ${TOKEN_ENV}, else a new one)",
    )
    console.set_defaults(handler=_handle)


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def _token(args: argparse.Namespace) -> tuple[str, bool]:
    """The operator token, and whether it was made here (then it is shown once)."""
    if args.token_file:
        try:
            lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"--token-file {args.token_file!r} cannot be read ({exc.strerror})") from None
        token = lines[0].strip() if lines else ""
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        return secrets.token_urlsafe(24), True
    if len(token) < MIN_TOKEN:
        raise ConfigError(f"the operator token must be at least {MIN_TOKEN} characters")
    return token, False


def _handle(args: argparse.Namespace) -> int:
    from .._serving import run_http
    from ..console import ApprovalStore, ConsoleSettings, console_app
    from ..runtime import Journal, JournalBackend, PostgresJournal, is_postgres_url

    if not 0 <= args.port < 65536:
        raise ConfigError(f"--port {args.port} is not a TCP port", code="ERR_CONFIG")
    location = str(args.journal)
    pg = is_postgres_url(location)
    reader: JournalBackend = (
        PostgresJournal.open_existing(location) if pg else Journal.open_existing(location)
    )
    shown = reader.path  # a URL without its password
    reader.close()  # it opens: a journal, readable (ERR_CONFIG naming it otherwise)
    token, made = _token(args)
    store = ApprovalStore(location, readonly=True)
    settings = ConsoleSettings(
        operators={token: args.operator},
        approvals=store,
        journal=location,
        readonly=True,
        loopback_only=_loopback(args.host),
        where=f"journal {shown} (read-only)",
    )
    app = console_app(settings)

    def listening(host: str, port: int) -> None:
        name = f"[{host}]" if ":" in host else host
        warn(f"toolbridge console: serving {shown} read-only at http://{name}:{port}/console/")
        if made:
            warn(f"toolbridge console: sign in with the operator token {token} (made now; set ${TOKEN_ENV})")

    if not _loopback(args.host):
        warn("toolbridge console: warning: listening beyond this machine; put it behind TLS")
    try:
        anyio.run(lambda: run_http(app, host=args.host, port=args.port, on_listening=listening))
    finally:
        store.close()
    return 0
