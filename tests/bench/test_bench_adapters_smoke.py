"""A quick run of `bench/adapter_worker.py` with tiny counts, so the adapter benchmark cannot rot.

Not a benchmark: toolbridge's paths (governed; LangChain's ungoverned) of each framework, and the
Agents SDK's own `MCPServerStdio`, are driven through the worker protocol against a real
server-everything. The other native paths need the benchmark's own virtualenvs (fastmcp;
langchain-mcp-adapters with `mcp<2`); `python bench/bench_adapters.py` covers them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).resolve().parent.parent.parent / "bench" / "adapter_worker.py"


@pytest.mark.parametrize(
    ("framework", "mode"),
    [
        ("pydantic-ai", "toolbridge"),
        ("openai-agents", "toolbridge"),
        ("openai-agents", "native"),
        ("langchain", "toolbridge-ungoverned"),
    ],
)
def test_the_adapter_worker_answers(framework: str, mode: str, everything_cmd: list[str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(WORKER),
            "--framework",
            framework,
            "--mode",
            mode,
            "--server",
            json.dumps(everything_cmd),
        ],
        input="run 4\nmem\nquit\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert answers[0] == {"ready": True}
    assert len(answers[1]["lat_us"]) == 4 and all(x > 0 for x in answers[1]["lat_us"])
    assert answers[1]["cpu_us"] > 0 and answers[2]["maxrss_kb"] > 0
