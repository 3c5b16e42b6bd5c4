"""Output helpers shared by the command modules.

Every command prints its results through `emit` (stdout) and its remarks through `warn`
(stderr):

- a reader that stops early (`toolbridge tools … | head`) ends the output quietly instead of
  raising `BrokenPipeError` at exit;
- a stdout that cannot be written (closed with `>&-`, or a full disk) raises `OutputError`, which
  the entry point turns into one line and exit code 74;
- `json_text` / `dumps` write JSON that is always valid: a `NaN` or `Infinity` from a server
  becomes `null`, as JavaScript's `JSON.stringify` writes it (JSON has no such numbers).

Text from an untrusted source (a server's tool names, error texts, results; a manifest's content)
goes through `toolbridge.sanitize.visible_text` before `emit` or `warn` when it is shown to a
person; `--json` output is exact JSON and needs no such step (JSON escapes control characters).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..content import json_text
from ..errors import ConfigError

__all__ = [
    "OutputError",
    "camel_case",
    "camel_keys",
    "dumps",
    "emit",
    "json_text",
    "parse_headers",
    "stdout_kept_for_json",
    "warn",
]


def camel_case(key: str) -> str:
    """`run_id` -> `runId`, `args_sha256` -> `argsSha256` (the command line's one JSON key style)."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(value: Any) -> Any:
    """`value` with every mapping key in camelCase, at every depth.

    For toolbridge's own records only (journal rows, summaries): data a server or a model wrote
    (tool arguments, results) keeps its keys and must not pass through here.
    """
    if isinstance(value, dict):
        return {camel_case(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel_keys(v) for v in value]
    return value


@contextlib.contextmanager
def stdout_kept_for_json(active: bool = True) -> Iterator[None]:
    """While the block runs, whatever writes to file descriptor 1 goes to stderr instead: a
    library's own prints and C++ logs (Ray's "node marked dead"), and the processes started
    meanwhile, which inherit it. Afterwards stdout is itself again, so `--json` output printed
    after the block is the only thing on it.

    Does nothing when `active` is false or when `sys.stdout` is not file descriptor 1 (a test's
    captured stream, an embedding program's own stdout).
    """
    try:
        real = active and sys.stdout is not None and sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.StringIO and the like: no descriptor
        real = False
    if not real:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class OutputError(Exception):
    """Standard output cannot be written (not a broken pipe: that one ends quietly)."""


def emit(text: str) -> None:
    """Print a line to stdout; a reader that went away (`| head`) is not an error.

    Args:
        text: the text to print (a newline is added).

    Raises:
        OutputError: stdout is closed or cannot be written (e.g. `ENOSPC`).
    """
    stream = sys.stdout
    if stream is None:
        raise OutputError("standard output is closed")
    try:
        try:
            stream.write(text + "\n")
        except UnicodeEncodeError:  # a lone surrogate from a server: written as its escape
            encoding = getattr(stream, "encoding", None) or "utf-8"
            stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding))
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError) as exc:
        _silence_stdout()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is closed"
        raise OutputError(f"standard output: {reason}") from None


def _silence_stdout() -> None:
    # Keep interpreter shutdown quiet: its final flush of the old stdout would fail again.
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    except OSError:
        sys.stdout = None


def warn(text: str) -> None:
    """Print a line to stderr; a closed or broken stderr is not an error."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def dumps(value: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None) -> str:
    """`value` as valid JSON text (`json_text`), keeping non-ASCII text; `default` converts objects."""
    try:
        return json_text(value, indent=indent, ensure_ascii=False, default=default)
    except ValueError:  # a NaN inside an object `default` converts: go through plain data first
        plain = json.loads(json.dumps(value, ensure_ascii=False, default=default))
        return json_text(plain, indent=indent, ensure_ascii=False)


def parse_headers(items: list[str]) -> dict[str, str]:
    """Turn repeated `--header NAME:VALUE` options into a dict.

    Raises:
        ConfigError: `ERR_INVALID_INPUT` for an item without a colon or with an empty name.
    """
    headers: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(
                "--header must look like NAME:VALUE (the value is not shown)", code="ERR_INVALID_INPUT"
            )
        headers[name.strip()] = value.strip()
    return headers
