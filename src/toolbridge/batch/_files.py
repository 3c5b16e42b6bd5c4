"""A batch's files: the input stream it reads and the output file it writes, checked before use.

- `--inputs` is a regular file (opened without blocking, so a FIFO never hangs the open) or `-`,
  standard input when it is a pipe, a socket or a redirected regular file. A FIFO, a device
  (`/dev/zero`, `/dev/urandom`, a terminal) or a directory is refused with one line, before a byte
  is read.
- `--out` is a regular file or a new path in an existing folder. A symbolic link (also one to
  `/dev/stdout`), a directory, a device, a FIFO or a socket is refused with one line, before the
  journal is opened, so a refused batch leaves nothing behind. The file is written to a temporary
  file beside it (a unique name) and renamed over it; the batch then appends to that same open
  file, never opening the path again. A replaced file keeps its permission bits.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ..errors import ConfigError

__all__ = ["OutFile", "check_out_path", "open_inputs", "same_file"]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _out_error(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"--out {os.fspath(path)} {why}: give the path of a regular file or of a new one",
        code="ERR_BATCH_OUTPUT",
    )


def check_out_path(path: Path) -> os.stat_result | None:
    """The output path's status when it is a regular file, `None` when it is new.

    Raises:
        ConfigError: (`ERR_BATCH_OUTPUT`) a link, directory, device, FIFO or socket; a folder
            that does not exist.
    """
    if os.fspath(path).endswith(os.sep):
        raise _out_error(path, "names a directory")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        parent = path.parent
        if not parent.is_dir():
            raise _out_error(path, "is in a folder that does not exist") from None
        return None
    except OSError as exc:
        raise _out_error(path, f"cannot be checked ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        raise _out_error(path, f"is {_kind(info.st_mode)}")
    return info


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two existing paths are one file (a missing one is never the same)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class OutFile:
    """The output file: written whole to a temporary file beside it, renamed over it, then appended."""

    def __init__(self, path: Path, lines: Iterable[str]) -> None:
        existing = check_out_path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            else:
                mask = os.umask(0o022)
                os.umask(mask)
                os.fchmod(fd, 0o666 & ~mask)
            f = os.fdopen(fd, "w", encoding="utf-8")
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        try:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            check_out_path(path)  # still a regular file or nothing: rename never replaces anything else
            os.replace(tmp, path)
        except BaseException as exc:
            f.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise _out_error(path, f"cannot be written ({exc.strerror or type(exc).__name__})") from None
            raise
        self._f: TextIO = f

    def write(self, line: str) -> None:
        self._f.write(line + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def _in_error(shown: str, why: str) -> ConfigError:
    return ConfigError(f"--inputs {shown} {why}", code="ERR_INVALID_INPUT")


def open_inputs(spec: str | os.PathLike[str], *, stdin: Callable[[], Any] | None = None) -> BinaryIO:
    """The input stream: a regular file, or `-` for standard input (a pipe, socket or regular file).

    Raises:
        ConfigError: (`ERR_INVALID_INPUT`) missing, unreadable, or not one of those.
    """
    shown = os.fspath(spec)
    if shown == "-":
        stream = (stdin or (lambda: sys.stdin))()
        try:
            fd = os.dup(stream.fileno())
        except (AttributeError, ValueError, OSError):
            raise _in_error(shown, "(standard input) cannot be read") from None
        info = os.fstat(fd)
        mode = info.st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            why = "a terminal" if os.isatty(fd) else _kind(mode)
            os.close(fd)
            raise _in_error(shown, f"(standard input) is {why}: pipe or redirect a JSON Lines file")
        return os.fdopen(fd, "rb")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(spec, flags)
    except FileNotFoundError:
        raise _in_error(shown, "does not exist") from None
    except OSError as exc:
        raise _in_error(shown, f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        hint = " (give - to read standard input)" if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) else ""
        raise _in_error(shown, f"is {_kind(mode)}, not a regular file{hint}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
