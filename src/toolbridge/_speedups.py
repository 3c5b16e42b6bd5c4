"""uvloop and httptools (the `fast` extra) for the serving commands, unless turned off.

`pip install toolbridge[fast]` installs uvloop (an event loop on libuv, in C) and httptools (an
HTTP/1.1 parser in C). When they are importable:

- `toolbridge gateway` runs its event loop on uvloop (`loop_factory()`, for both transports);
  a program that calls `serve_stdio` / `serve_http` itself keeps the loop it runs them on;
- uvicorn parses HTTP with httptools instead of its pure-Python h11 (uvicorn's own choice
  when httptools is importable: `toolbridge._serving.run_http` asks for h11 only when the
  speedups are turned off).

`TOOLBRIDGE_SPEEDUPS=off` (or `0`, `false`, `no`, `disabled`) turns both off: the stdlib's asyncio
loop and h11, as without the extra (to compare, or to rule them out). Without the extra nothing
changes and nothing is said: the speedups are optional.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable

__all__ = ["ENV", "enabled", "loop_factory", "loop_name"]

ENV = "TOOLBRIDGE_SPEEDUPS"
"""The environment variable that turns the speedups off (`off`, `0`, `false`, `no`, `disabled`)."""

_OFF = frozenset({"0", "false", "off", "no", "disabled"})


def enabled() -> bool:
    """Whether the speedups may be used (`TOOLBRIDGE_SPEEDUPS` is not `off`), installed or not."""
    return os.environ.get(ENV, "").strip().lower() not in _OFF


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's `new_event_loop` when it is installed and the speedups are on, else None (asyncio's
    own loop). Not on Windows, where uvloop does not exist."""
    if not enabled():
        return None
    try:
        uvloop = importlib.import_module("uvloop")  # optional: typed or not, installed or not
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """The running event loop's class, as `module.Class` (`uvloop.Loop`,
    `asyncio.unix_events._UnixSelectorEventLoop`): what a diagnostic line says."""
    loop = type(asyncio.get_running_loop())
    return f"{loop.__module__}.{loop.__qualname__}"
