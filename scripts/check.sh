#!/usr/bin/env bash
# The project's test command (see README): lint, format check, type check, then the whole
# test suite. Assumes the set-up done by .ci/run (or the README's second command).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin

echo "== ruff (lint)"
$PY/ruff check src tests examples bench
echo "== ruff (format)"
$PY/ruff format --check src tests examples bench
echo "== mypy (strict, on the package)"
$PY/mypy
echo "== pytest"
set +e
$PY/pytest -q "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$status"
