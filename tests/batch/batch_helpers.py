"""Batch test helpers (imported by name: pytest puts this folder on sys.path): a manifest around
`batch_server.py`, input files, output readers, the journal checks."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER = HERE / "batch_server.py"


def manifest_text(tally: Path, *, turns: list[Any] | None = None, cost: int = 0, slow_s: float = 0.0) -> str:
    """A governed manifest: a scripted agent that calls `echo` twice and the declared `ops.tally` once
    (or `ops.slow` when `slow_s` > 0); each tally call costs `cost` micro-USD."""
    if turns is None:
        second = (
            {"name": "ops_slow", "arguments": {"seconds": slow_s, "path": str(tally)}}
            if slow_s
            else {"name": "ops_tally", "arguments": {"path": str(tally)}}
        )
        turns = [
            {
                "toolCalls": [
                    {"name": "t_echo", "arguments": {"text": "a"}},
                    {"name": "t_echo", "arguments": {"text": "b"}},
                ]
            },
            {"toolCalls": [second]},
            {"text": "done"},
        ]
    docs: list[dict[str, Any]] = [
        {
            "kind": "Runtime",
            "metadata": {"name": "Policy"},
            "permissions": {
                "allow": [
                    "model:scripted",
                    "tool:t_echo",
                    "effect:read",
                    "tool:ops.tally",
                    "tool:ops.slow",
                    "effect:write",
                ]
            },
            "limits": {"maxCostMicros": max(cost, 0), "maxDurationMs": 120000},
        },
        {"kind": "Ai.ScriptedModel", "metadata": {"name": "Scripted"}, "turns": turns},
        {
            "kind": "Mcp.StdioClient",
            "metadata": {"name": "Server"},
            "command": sys.executable,
            "args": [str(SERVER)],
        },
        {"kind": "AiMcp.ToolProvider", "metadata": {"name": "Tools"}, "client": "!ref Server"},
    ]
    for tool_id, remote, extra in (
        ("ops.tally", "tally", {}),
        ("ops.slow", "slow", {"seconds": {"type": "number"}}),
    ):
        docs.append(
            {
                "kind": "AiMcp.Tool",
                "metadata": {"name": remote.capitalize()},
                "id": tool_id,
                "version": "1",
                "description": f"{remote} on the test server",
                "remoteName": remote,
                "client": "!ref Server",
                "input": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, **extra},
                    "required": ["path", *extra],
                },
                "output": {
                    "type": "object",
                    "properties": {"content": {"type": "string"}},
                    "required": ["content"],
                },
                "effects": "write",
                "capabilities": [],
                "costMicros": cost,
                "timeoutMs": 60000,
            }
        )
    docs.append(
        {
            "kind": "Ai.Agent",
            "metadata": {"name": "Worker"},
            "model": "!ref Scripted",
            "toolProviders": [
                {"provider": "!ref Tools", "prefix": "t_", "include": ["echo"], "effects": "none"}
            ],
            "tools": ["!ref Tally", "!ref Slow"],
        }
    )
    text = "\n---\n".join(json.dumps(d) for d in docs)
    return re.sub(r'"!ref (\w+)"', r"!ref \1", text)


def write_manifest(folder: Path, **kw: Any) -> tuple[Path, Path]:
    tally = folder / "tally.txt"
    path = folder / "batch.yaml"
    path.write_text(manifest_text(tally, **kw))
    return path, tally


def write_inputs(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"item-{i}", "input": f"question {i}"}) + "\n" for i in range(n))
    )
    return path


def read_out(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def slow_sends(journal_spec: str) -> dict[str, int]:
    """Per item (its run ids without the attempt), how many `ops.slow` requests the journal says left."""
    from toolbridge.batch._driver import open_journal

    journal = open_journal(journal_spec, reader=True)
    counts: dict[str, int] = {}
    try:
        for run in journal.list_runs(100_000):
            record = journal.get_run(run.run_id)
            assert record is not None
            item = run.run_id.rsplit("-", 1)[0]
            sent = sum(1 for c in record.calls if c.tool_id == "ops.slow" and c.request_sent)
            counts[item] = counts.get(item, 0) + sent
    finally:
        journal.close()
    return counts


def check_no_effect_twice(lines: list[dict[str, Any]], journal_spec: str, tally: Path, n: int) -> None:
    """Every item has one output line; no item's effectful call left twice; the server acted only then."""
    assert sorted(x["id"] for x in lines) == sorted(f"item-{i}" for i in range(n))
    sends = slow_sends(journal_spec)
    assert max(sends.values()) == 1 and len(sends) == n  # one effectful request per item, at most
    assert tally_count(tally) <= sum(sends.values())  # the server never acted without a journaled send
    for x in lines:
        assert x["outcome"] in ("succeeded", "outcome_unknown") or (
            x["errorCode"] == "INTERRUPTED" and x.get("recovered")
        ), x


def tally_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def kill_when_started(child: Any, tally: Path, started: int, *, timeout: float = 120) -> None:
    """SIGKILL `child` (a `subprocess.Popen`) once `tally` shows `started` calls; reap it either way."""
    import signal
    import time

    try:
        deadline = time.monotonic() + timeout
        while tally_count(tally) < started:
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stderr:
            child.stderr.close()
