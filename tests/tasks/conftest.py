"""Fixtures of the task tool tests: a loopback web site, Chromium, tool files.

The site serves `examples/tasks/page.html` (the Users form of the example) and the pages in
`tests/tasks/site/` from a `ThreadingHTTPServer` on a free loopback port, in a daemon thread that
the fixture shuts down. Browser tests need Debian's Chromium: when it is missing they fail with
a message saying how to install it, they are not skipped.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = ROOT / "examples" / "tasks"
SITE_DIR = Path(__file__).resolve().parent / "site"


def _site_file(path: str) -> Path | None:
    name = path.split("?", 1)[0].lstrip("/")
    for base in (SITE_DIR, EXAMPLE_DIR):
        candidate = (base / name).resolve()
        if candidate.parent == base.resolve() and candidate.is_file():
            return candidate
    return None


REQUESTS: list[tuple[str, str]] = []
"""`(Host header, path)` of every request the test site received, in order."""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        REQUESTS.append((self.headers.get("Host", ""), self.path))
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", urllib.parse.unquote(self.path.split("=", 1)[1]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/api/echo"):
            self._send(200, "application/json", json.dumps({"path": self.path}).encode())
            return
        if self.path.startswith("/api/fail"):
            self._send(503, "application/json", b'{"error": "unavailable"}')
            return
        found = _site_file(self.path)
        if found is None:
            self._send(404, "text/plain", b"not found")
            return
        kind = "text/html; charset=utf-8" if found.suffix == ".html" else "application/octet-stream"
        self._send(200, kind, found.read_bytes())

    def do_POST(self) -> None:
        REQUESTS.append((self.headers.get("Host", ""), self.path))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        self._send(200, "application/json", json.dumps({"received": json.loads(body or "null")}).encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """Base URL (`http://127.0.0.1:PORT`) of the test site."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, name="task-test-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable; fails (never skips) when it is not installed."""
    path = os.environ.get("TOOLBRIDGE_CHROMIUM") or "/usr/bin/chromium"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        path = shutil.which("chromium") or ""
    if not path:
        pytest.fail(
            "Chromium is not installed, and the browser tests need it: run `apt-get install chromium` "
            "(as .ci/run does) or set TOOLBRIDGE_CHROMIUM to a Chromium executable"
        )
    return path


@pytest.fixture
def site_requests() -> list[tuple[str, str]]:
    """The `(Host header, path)` log of the test site (cleared by the test as it needs)."""
    return REQUESTS
