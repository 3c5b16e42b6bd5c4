"""docs/manifests.md's Telo example, as a new user runs it: `--target add` calls a tool and needs no
model key; a target that runs the model asks for the key, naming each variable once; without the
CEL library the run stops with the line naming the `cel` extra."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.cli import main
from toolbridge.manifest._secrets import SecretSources

ROOT = Path(__file__).resolve().parents[2]
RELATIVE = "../tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def weather(tmp_path: Path, everything_js: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    text = (ROOT / "docs" / "manifests.md").read_text()
    block = re.search(r"```yaml\n(kind: Telo\.Application\n.*?)```", text, re.S)
    assert block is not None and RELATIVE in block.group(1)
    path = tmp_path / "weather.yaml"
    path.write_text(block.group(1).replace(RELATIVE, everything_js))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("openaiApiKey", raising=False)
    return path


def test_a_target_that_runs_no_model_needs_no_key(weather: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(weather), "--target", "add"]) == 0
    out, err = capsys.readouterr()
    assert out == "The sum of 2 and 40 is 42.\n"
    assert "OPENAI_API_KEY" not in err and "openaiApiKey" not in err


def test_a_target_that_runs_the_model_asks_for_the_key_once(
    weather: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--target", "Summarizer", "--input", "hi"], []):
        assert main(["run", str(weather), *argv]) == 1
        err = capsys.readouterr().err
        assert "ERR_MANIFEST_SECRET_UNRESOLVED" in err and "nothing was started" in err
        assert err.count("$OPENAI_API_KEY") == 1, err


def test_each_place_a_secret_is_looked_for_is_named_once() -> None:
    hint = SecretSources(mapping={"openaiApiKey": "OPENAI_API_KEY"}, env={}).where_to_look("openaiApiKey")
    assert hint == "--secret openaiApiKey=…, $OPENAI_API_KEY (declared), $openaiApiKey"
    hint = SecretSources(mapping={"OPENAI_API_KEY": "OPENAI_API_KEY"}, env={}).where_to_look("OPENAI_API_KEY")
    assert hint == "--secret OPENAI_API_KEY=…, $OPENAI_API_KEY (declared)"
    assert SecretSources(env={}).where_to_look("apiKey") == "--secret apiKey=…, $apiKey, $API_KEY"


def test_without_the_cel_library_the_line_names_the_extra(weather: Path) -> None:
    code = (
        "import sys\nsys.modules['cel'] = None\nfrom toolbridge.cli import main\n"
        f"raise SystemExit(main(['run', {str(weather)!r}, '--target', 'add']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 1, out.stderr
    assert "pip install 'toolbridge[cel]'" in out.stderr and "Traceback" not in out.stderr
    assert "OPENAI_API_KEY" not in out.stderr
