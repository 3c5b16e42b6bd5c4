"""The agent examples and the code of docs/agent.md actually run."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agent_fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]


def test_offline_example_runs_and_leaves_the_repo_clean(filesystem_js: str) -> None:
    before = sorted(p.name for p in (ROOT / "examples" / "data").iterdir())
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_offline.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "step 1: fs_list_directory -> [FILE] meeting-notes.txt" in out
    assert "step 3: count_words -> 41" in out
    assert "answer: I read meeting-notes.txt and wrote summary.md next to it." in out
    assert "# Summary of meeting-notes.txt" in out
    assert sorted(p.name for p in (ROOT / "examples" / "data").iterdir()) == before


def test_offline_example_with_a_folder(filesystem_js: str, tmp_path: Path) -> None:
    for source in (ROOT / "examples" / "data").iterdir():
        (tmp_path / source.name).write_text(source.read_text())
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_offline.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "summary.md").read_text().startswith("# Summary of meeting-notes.txt")


async def test_openai_example_against_a_loopback_server(
    filesystem_js: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location(
        "agent_openai_example", ROOT / "examples" / "agent_openai.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "a.txt").write_text("hello")
    with FakeOpenAI() as server:
        server.replies.append(
            Reply(
                chunks=[
                    {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "delta": {
                                    "tool_calls": [
                                        {
                                            "index": 0,
                                            "id": "t",
                                            "type": "function",
                                            "function": {
                                                "name": "fs_list_directory",
                                                "arguments": f'{{"path": "{tmp_path}"}}',
                                            },
                                        }
                                    ]
                                },
                                "finish_reason": "tool_calls",
                            }
                        ],
                    },
                ]
            )
        )
        server.replies.append(
            Reply(
                chunks=[
                    {
                        "id": "y",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {"index": 0, "delta": {"content": "One file: a.txt."}, "finish_reason": "stop"}
                        ],
                    },
                ]
            )
        )
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        await module.main(tmp_path, "gpt-test")
        assert server.requests[0]["tools"][0]["function"]["strict"] is True
        assert "a.txt" in server.requests[1]["messages"][-1]["content"]
    out = capsys.readouterr().out
    assert "[calling fs_list_directory" in out and "One file: a.txt." in out


def test_docs_agent_python_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "agent.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/agent.md has no python example"
    for block in blocks:
        exec(compile(block, "docs/agent.md", "exec"), {"__name__": "docs_example"})
    assert "2 + 3 = 5 stop 2" in capsys.readouterr().out
