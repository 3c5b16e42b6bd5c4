"""The command line's log lines: one record, one line, nothing a terminal would act on.

Log records carry what servers say (their `notifications/message` text, their stderr, their
errors). `VisibleFormatter` shows every control and invisible character of a record as an escape
(`toolbridge.sanitize.visible_text`): an upstream cannot clear the screen, set the window title,
write the clipboard (OSC 52), ring the bell or start a forged line of its own (`\\n` is shown, not
obeyed), in `call`, `run`, `run --json`, `gateway` or any other command, with or without `-v`.
A traceback (`-vv`) keeps its line breaks; its other control characters are shown the same way.

Without `-v`, only toolbridge's own records (loggers `toolbridge.*`) reach stderr: what other
libraries log (the MCP SDK's "Tool … not listed by server", its parse errors with their
tracebacks, httpx, uvicorn, asyncio) is chatter about something toolbridge already reports in its
own one line, and shows with `-v` (`OwnRecords`).
"""

from __future__ import annotations

import logging
import sys

from ..sanitize import visible_text

__all__ = ["FORMAT", "OwnRecords", "VisibleFormatter", "setup_logging"]

FORMAT = "%(levelname)s %(name)s: %(message)s"
"""The command line's log line."""


class VisibleFormatter(logging.Formatter):
    """A formatter whose lines hold no raw control or invisible character (see the module)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return visible_text(super().formatMessage(record))

    def formatException(self, ei: object) -> str:
        return visible_text(super().formatException(ei), multiline=True)  # type: ignore[arg-type]

    def formatStack(self, stack_info: str) -> str:
        return visible_text(super().formatStack(stack_info), multiline=True)

    def format(self, record: logging.LogRecord) -> str:
        cached = record.exc_text  # set by the redactor, which formats the traceback itself
        if cached:
            record.exc_text = visible_text(cached, multiline=True)
        try:
            return super().format(record)
        finally:
            record.exc_text = cached


class OwnRecords(logging.Filter):
    """Lets through toolbridge's own records only (loggers `toolbridge` and `toolbridge.*`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == "toolbridge" or record.name.startswith("toolbridge.")


def setup_logging(level: int) -> None:
    """Log to stderr at `level` through `VisibleFormatter` (once; like `logging.basicConfig`).

    Above INFO (no `-v`), other libraries' records are left out (`OwnRecords`).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleFormatter(FORMAT))
    if level > logging.INFO:
        handler.addFilter(OwnRecords())
    logging.basicConfig(level=level, handlers=[handler])
