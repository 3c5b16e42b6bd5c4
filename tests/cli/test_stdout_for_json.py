"""`--json` output is the only thing on stdout: while a batch runs, whatever writes to file
descriptor 1 (a library's print, a C++ log line, a process started meanwhile) goes to stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolbridge.cli._output import stdout_kept_for_json

SCRIPT = """
import os, subprocess, sys
from toolbridge.cli._output import stdout_kept_for_json
print("before", flush=True)
with stdout_kept_for_json():
    os.write(1, b"a C++ log line\\n")
    print("a library's print", flush=True)
    subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)
print('{"json": true}', flush=True)
"""


def test_writes_to_descriptor_1_go_to_stderr_inside_the_block() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == 'before\n{"json": true}\n'
    assert done.stderr == "a C++ log line\na library's print\na child process\n"


def test_inactive_or_without_a_descriptor_it_changes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    with stdout_kept_for_json(active=False):
        os.write(1, b"plain\n")
    assert capfd.readouterr().out == "plain\n"


def test_a_captured_stream_is_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    with stdout_kept_for_json():  # sys.stdout is pytest's in-memory stream: no descriptor to move
        print("kept")
    assert capsys.readouterr().out == "kept\n"
