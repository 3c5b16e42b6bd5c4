"""`toolbridge console JOURNAL` as a process over the journal of a real gateway: it shows a
pending approval and the calls, needs the operator token, decides nothing, and never writes to
what it reads."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
from gw_helpers import TOOLBRIDGE, free_port, gateway_stdio, stop
from test_gateway_operator_approval import decide, manifest_of, pending_of

TOKEN = "console-reader-token-0123456789"


@contextmanager
def console(journal: str, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [TOOLBRIDGE, "console", journal, "--port", str(port), *extra],
        env={**os.environ, "TOOLBRIDGE_CONSOLE_TOKEN": TOKEN, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()  # "serving ... at URL" once the port is bound
        assert "read-only at http://127.0.0.1:" in line, line
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def digest(tmp_path: Path) -> dict[str, str]:
    """The journal's bytes (the database and its write-ahead log; SQLite may create an empty log
    and the shared-memory index for a reader: they hold no data)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tmp_path.glob("journal.db*"))
        if not p.name.endswith("-shm") and p.stat().st_size
    }


async def test_the_console_reads_a_gateways_journal_and_never_writes(tmp_path: Path) -> None:
    journal = str(tmp_path / "journal.db")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with gateway_stdio(manifest_of(tmp_path)) as client, anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "w_note", {"text": "<b>bold</b> move"})
        pending = await pending_of(tmp_path)
        with console(journal) as base:
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                assert (await http.get("/console/approvals")).status_code == 401
                page = await http.get("/console/approvals", headers=bearer)
                assert page.status_code == 200 and f"approval-{pending.id}" in page.text
                assert "&lt;b&gt;bold&lt;/b&gt; move" in page.text and "<b>bold</b>" not in page.text
                assert "Read-only console" in page.text and ">Approve<" not in page.text
                # signed in or not, this console decides nothing
                origin = {"Origin": base}
                signed = await http.post("/console/login", data={"token": TOKEN}, headers=origin)
                assert signed.status_code == 303
                csrf = re.search(r'name="csrf" value="([^"]+)"', (await http.get("/console/approvals")).text)
                assert csrf is not None
                refused = await http.post(
                    f"/console/approvals/{pending.id}",
                    data={"decision": "approve", "csrf": csrf.group(1)},
                    headers=origin,
                )
                assert refused.status_code == 403
        assert (await pending_of(tmp_path)).status == "pending"
        assert await decide(tmp_path, pending.id, True)
    before = digest(tmp_path)
    with console(journal) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30, headers=bearer) as http:
            page = (await http.get("/console/journal?outcome=succeeded")).text
            assert "w_note" in page and "outcome-succeeded" in page
            link = re.search(r'href="(/console/journal/run_[^"/]+/[^"]+)"', page)
            assert link is not None
            evidence = (await http.get(link.group(1))).text
            assert "arguments SHA-256" in evidence
            assert "w_note" in (await http.get("/console/calls")).text
            assert "approved" in (await http.get("/console/approvals")).text
    assert digest(tmp_path) == before, "the console wrote to the journal it reads"


def test_a_file_that_is_not_a_journal_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello", encoding="utf-8")
    done = subprocess.run(
        [TOOLBRIDGE, "console", str(bad), "--port", "0"],
        env={**os.environ, "TOOLBRIDGE_CONSOLE_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "not a toolbridge journal" in done.stderr and "Traceback" not in done.stderr
    assert TOKEN not in done.stderr
