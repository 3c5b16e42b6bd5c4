"""`toolbridge serve-tasks` as a real MCP server, called with the official `mcp` client (not toolbridge's).

Over stdio with a browser (the add_user form of the issue, both protocol eras), over Streamable
HTTP without one, and the command's load-time failures.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from subprocess_helpers import free_port
from toolbridge.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VENV_BIN = Path(sys.executable).parent


def write_tools(tmp_path: Path, tools: list[dict[str, Any]]) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": tools}), encoding="utf-8")
    return path


def serve_command(*args: str) -> list[str]:
    """The `toolbridge` console script of this virtualenv (or the same entry point through -c)."""
    script = VENV_BIN / "toolbridge"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "import sys; from toolbridge.cli import main; sys.exit(main())", *args]


def instr(action: str, **params: Any) -> dict[str, Any]:
    return {"action": action, "params": params}


FORM_TOOLS = [
    {
        "name": "add_user",
        "description": "Add a user with the Users form.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "page": {"type": "string"},
                "name": {"type": "string"},
                "email": {"type": "string"},
                "date": {"type": "string"},
            },
            "required": ["page", "name", "email", "date"],
        },
        "task": {
            "instructions": [
                instr("goto", url="{{page}}"),
                instr("input", selector="#name", value="{{name}}"),
                instr("input", selector="#email", value="{{email}}"),
                instr("input", selector="#joined", value="{{date}}"),
                instr("click", selector="#save"),
                instr("getText", selector="#count"),
            ]
        },
    },
    {
        "name": "list_users",
        "description": "Read the users table.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "task": {"instructions": [instr("getText", selector="#users tbody")]},
    },
    {
        "name": "snap",
        "description": "Screenshot of the form.",
        "inputSchema": {"type": "object", "properties": {}},
        "task": {"instructions": [instr("screenshot", selector="#user-form")]},
    },
    {
        "name": "broken",
        "description": "Clicks a button that is not there.",
        "inputSchema": {"type": "object", "properties": {}},
        "task": {"instructions": [instr("click", selector="#no-such-button", timeout=300)]},
    },
]


def stdio_params(tools_path: Path, chromium: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=serve_command()[0],
        args=[
            *serve_command()[1:],
            "serve-tasks",
            str(tools_path),
            "--chromium",
            chromium,
            "--allow-origin",
            "127.0.0.1",
        ],
    )


@pytest.mark.browser
async def test_add_user_over_stdio_with_the_official_client(tmp_path: Path, site: str, chromium: str) -> None:
    path = write_tools(tmp_path, FORM_TOOLS)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    with anyio.fail_after(60):
        async with Client(stdio_params(path, chromium)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == {"add_user", "list_users", "snap", "broken"}
            assert listed["add_user"].input_schema["required"] == ["page", "name", "email", "date"]
            assert listed["add_user"].output_schema is not None
            assert listed["add_user"].output_schema["properties"]["status"]["enum"] == [
                "success",
                "error",
                "partial completed",
            ]

            result = await client.call_tool(
                "add_user",
                {
                    "page": f"{site}/page.html",
                    "name": "Ada Lovelace",
                    "email": "ada@example.org",
                    "date": "1843-07-10",
                },
                progress_callback=on_progress,
            )
            assert result.is_error is False
            assert result.structured_content == {
                "status": "success",
                "index": 5,
                "instruction": {"action": "getText", "params": {"selector": "#count"}},
                "result": {"text": "1 users"},
            }
            assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]

            users = await client.call_tool("list_users", {})
            assert users.structured_content is not None
            row = users.structured_content["result"]["text"]
            assert row == "Ada Lovelace\tada@example.org\t1843-07-10\tmember"

    assert [p[2] for p in progress] == [
        "step 1 of 6: goto",
        "step 2 of 6: input",
        "step 3 of 6: input",
        "step 4 of 6: input",
        "step 5 of 6: click",
        "step 6 of 6: getText",
        "done",
    ]
    assert [p[0] for p in progress] == [0, 1, 2, 3, 4, 5, 6] and {p[1] for p in progress} == {6}


@pytest.mark.browser
async def test_errors_and_screenshots_over_stdio_in_the_handshake_era(
    tmp_path: Path, site: str, chromium: str
) -> None:
    path = write_tools(tmp_path, FORM_TOOLS)
    with anyio.fail_after(60):
        async with Client(stdio_params(path, chromium), mode="legacy") as client:
            assert client.protocol_version != "2026-07-28"
            missing = await client.call_tool("add_user", {"page": f"{site}/page.html", "name": "x"})
            assert missing.is_error is True
            assert missing.structured_content is not None
            assert missing.structured_content["index"] == -1
            assert "'email' is a required property" in missing.structured_content["error"]["message"]

            args = {"page": f"{site}/page.html", "name": "B", "email": "b@example.org", "date": "2024-01-02"}
            assert (await client.call_tool("add_user", args)).is_error is False
            shot = await client.call_tool("snap", {})
            assert shot.is_error is False
            assert [block.type for block in shot.content] == ["text", "image"]
            image = shot.content[1]
            assert image.mime_type == "image/png"  # type: ignore[union-attr]
            assert base64.b64decode(image.data).startswith(PNG_MAGIC)  # type: ignore[union-attr]
            assert shot.structured_content is not None
            assert shot.structured_content["result"]["mimeType"] == "image/png"

            broken = await client.call_tool("broken", {})
            assert broken.is_error is True
            assert broken.structured_content is not None
            message = broken.structured_content["error"]["message"]
            assert "'#no-such-button'" in message and "Traceback" not in message

            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {})
            assert unknown.value.code == -32602  # invalid params, as the specification says
            assert "unknown tool 'no_such_tool'" in unknown.value.message
            assert "add_user" in unknown.value.message  # the tools there are


async def test_serve_over_streamable_http_both_eras(tmp_path: Path) -> None:
    tools = [
        {
            "name": "greet",
            "description": "Say hello.",
            "inputSchema": {"type": "object", "properties": {"who": {"type": "string", "default": "world"}}},
            "task": {"instructions": [instr("result", value={"greeting": "hello {{who}}"})]},
        },
        {
            "name": "slow",
            "description": "Takes long.",
            "inputSchema": {"type": "object", "properties": {}},
            "task": {"instructions": [instr("wait", ms=30000)]},
        },
    ]
    path = write_tools(tmp_path, tools)
    port = free_port()
    proc = await anyio.open_process(
        [*serve_command(), "serve-tasks", str(path), "--transport", "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                    await stream.aclose()
                    break
                except OSError:
                    assert proc.returncode is None, "the HTTP task server exited"
                    await anyio.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        for mode in ("auto", "legacy"):
            with anyio.fail_after(20):
                async with Client(url, mode=mode) as client:
                    result = await client.call_tool("greet", {"who": "Ada"})
                    assert result.structured_content is not None
                    assert result.structured_content["result"] == {"greeting": "hello Ada"}
                    default = await client.call_tool("greet", {})
                    assert default.structured_content is not None
                    assert default.structured_content["result"] == {"greeting": "hello world"}
                    # a call the client gives up on is cancelled on the server: the next one runs at once
                    with anyio.move_on_after(0.5):
                        await client.call_tool("slow", {})
                    with anyio.fail_after(5):
                        again = await client.call_tool("greet", {"who": "again"})
                    assert again.structured_content is not None
                    assert again.structured_content["result"] == {"greeting": "hello again"}
    finally:
        proc.terminate()
        with anyio.move_on_after(10) as scope:
            await proc.wait()
        if scope.cancelled_caught:
            proc.kill()
            await proc.wait()
        await proc.aclose()


def test_serve_tasks_refuses_a_bad_tool_file_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**FORM_TOOLS[3], "task": {"instructions": [instr("clik", selector="#a")]}}
    assert main(["serve-tasks", str(write_tools(tmp_path, [bad]))]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "ERR_TASK_UNKNOWN_ACTION" in lines[0] and "tools[0].task.instructions[0].action" in lines[0]
    assert main(["serve-tasks", str(tmp_path / "absent.json")]) == 1
    assert "ERR_TASK_FILE" in capsys.readouterr().err


def test_serve_tasks_check_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-tasks", str(write_tools(tmp_path, FORM_TOOLS)), "--check"]) == 0
    assert "4 task tools ok: add_user, list_users, snap, broken" in capsys.readouterr().out
