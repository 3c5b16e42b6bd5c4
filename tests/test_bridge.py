"""McpToolProvider: MCP tools as ToolSpecs, MCP results as ToolResults, tool failures as ToolError.

Real servers: server-everything and server-filesystem (stdio), mcp-server-time (2026-07-28), the
example notes server, and SDK-built in-process servers (tests/fixtures/inproc_servers.py).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import wave
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from fixtures.inproc_servers import changing_server, output_schema_server
from toolbridge.bridge import SERVER_TEXT_LIMIT, McpToolProvider, tool_to_spec
from toolbridge.clients import InProcessClient, StdioClient
from toolbridge.content import AudioPart, ImagePart, TextPart, parts_from_mcp
from toolbridge.errors import ConfigError, ProtocolError, ToolError, TransportError
from toolbridge.tools import OPEN_OBJECT_SCHEMA, ToolProvider, provider_generation

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def everything(everything_cmd: list[str]) -> McpToolProvider:
    return McpToolProvider(
        StdioClient(everything_cmd[0], everything_cmd[1:], timeout=20, shutdown_grace_ms=300)
    )


async def test_tools_become_specs_with_their_schemas_unchanged(everything: McpToolProvider) -> None:
    assert isinstance(everything, ToolProvider)
    async with everything:
        raw = {t.name: t for t in await everything.client.list_tools()}
        specs = {s.name: s for s in await everything.list_tools()}
    assert set(specs) == set(raw)
    for name, spec in specs.items():
        assert spec.parameters == raw[name].input_schema
        assert spec.description == (raw[name].description or "")
    assert specs["get-structured-content"].output_schema == raw["get-structured-content"].output_schema
    assert specs["echo"].output_schema is None


async def test_image_result_becomes_an_image_part(everything: McpToolProvider) -> None:
    async with everything:
        result = await everything.call_tool("get-tiny-image", {})
    assert result.kind == "parts"
    kinds = [type(p) for p in result.parts]
    assert kinds == [TextPart, ImagePart, TextPart]
    image = result.parts[1]
    assert isinstance(image, ImagePart) and image.media_type == "image/png"
    assert "[image: image/png," in result.to_text()


async def test_structured_content_wins(everything: McpToolProvider) -> None:
    async with everything:
        result = await everything.call_tool("get-structured-content", {"location": "New York"})
    assert result.kind == "structured"
    assert set(result.structured) == {"temperature", "conditions", "humidity"}


async def test_wrong_typed_arguments_are_a_tool_error_with_the_server_text(
    everything: McpToolProvider,
) -> None:
    async with everything:
        with pytest.raises(ToolError) as info:
            await everything.call_tool("get-sum", {"a": "one", "b": "two"})
    error = info.value
    assert error.code == "ERR_MCP_TOOL_ERROR"
    assert "get-sum" in error.message
    assert error.server_text is not None
    assert "Input validation error" in error.server_text and "expected number" in error.server_text


async def test_resource_links_pass_through_untouched(everything: McpToolProvider) -> None:
    async with everything:
        direct = await everything.client.call_tool("get-resource-links", {"count": 3})
        result = await everything.call_tool("get-resource-links", {"count": 3})
    assert result.kind == "raw"
    assert list(result.raw) == direct["content"]
    assert [b["type"] for b in result.raw] == ["text"] + ["resource_link"] * 3
    assert result.content == direct["content"]


async def test_embedded_resource_passes_through(everything: McpToolProvider) -> None:
    async with everything:
        result = await everything.call_tool(
            "get-resource-reference", {"resourceType": "Text", "resourceId": 1}
        )
    assert result.kind == "raw"
    assert any(b["type"] == "resource" for b in result.raw)


def _write_wav(path: Path) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(1)
        w.setframerate(8000)
        w.writeframes(bytes([128, 140, 128, 116] * 200))


async def test_filesystem_audio_becomes_an_audio_part(node: str, filesystem_js: str, tmp_path: Path) -> None:
    _write_wav(tmp_path / "beep.wav")
    provider = McpToolProvider(StdioClient(node, [filesystem_js, str(tmp_path)], timeout=20))
    async with provider:
        names = {s.name for s in await provider.list_tools()}
        assert {"read_file", "read_media_file", "list_directory", "write_file"} <= names
        result = await provider.call_tool("read_media_file", {"path": str(tmp_path / "beep.wav")})
    # server-filesystem sends the audio both as a content block and as structured content: the
    # structured content stays what the model reads, and the block beside it is kept as media.
    assert result.kind == "structured"
    assert [b["type"] for b in result.structured["content"]] == ["audio"]
    assert len(result.media) == 1 and isinstance(result.media[0], AudioPart)
    assert result.media[0].media_type == "audio/wav"
    assert result.media[0].data == base64.b64encode((tmp_path / "beep.wav").read_bytes()).decode()


async def test_filesystem_audio_parts_from_the_content_array(
    node: str, filesystem_js: str, tmp_path: Path
) -> None:
    _write_wav(tmp_path / "beep.wav")
    async with StdioClient(node, [filesystem_js, str(tmp_path)], timeout=20) as client:
        raw = await client.call_tool("read_media_file", {"path": str(tmp_path / "beep.wav")})
    parts = parts_from_mcp(raw["content"])
    assert parts is not None
    assert [type(p) for p in parts] == [AudioPart]
    assert isinstance(parts[0], AudioPart) and parts[0].media_type == "audio/wav"


async def test_python_server_structured_result(time_server_cmd: list[str]) -> None:
    async with McpToolProvider(StdioClient(time_server_cmd[0], time_server_cmd[1:], timeout=20)) as provider:
        specs = {s.name: s for s in await provider.list_tools()}
        assert specs["get_current_time"].annotations == {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
        result = await provider.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
    assert result.kind == "structured"
    assert result.structured["timezone"] == "Asia/Tokyo"


async def test_output_schema_mismatch_is_a_protocol_error() -> None:
    async with McpToolProvider(InProcessClient(output_schema_server())) as provider:
        assert (await provider.call_tool("good", {})).structured == {"city": "Oslo", "temperature": 4.5}
        with pytest.raises(ProtocolError) as info:
            await provider.call_tool("bad", {})
        assert info.value.code == "ERR_MCP_PROTOCOL"
        with pytest.raises(ToolError, match="the disk is on fire") as failed:
            await provider.call_tool("failing", {})
        assert failed.value.server_text == "the disk is on fire"
        mixed = await provider.call_tool("mixed", {})
        assert mixed.kind == "raw" and mixed.raw[1]["type"] == "resource_link"


def _dirty_server() -> Server[Any]:
    tools = [
        types.Tool(
            name="colourful",
            description="Reads \x1b[31mred\x1b[0m files\u200b quietly\u202e.\U000e0041\U000e0042\x07",
            input_schema={"type": "object"},
        ),
        types.Tool(name="titled", title="Only a title", input_schema={"type": "object", "properties": {}}),
    ]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = "\x1b[2Jwiped " + "x" * (SERVER_TEXT_LIMIT * 2)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    return Server(
        "dirty",
        instructions="Be \u200bnice\x1b]0;pwned\x07.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def test_descriptions_and_server_text_are_cleaned_and_bounded() -> None:
    async with McpToolProvider(InProcessClient(_dirty_server())) as provider:
        specs = {s.name: s for s in await provider.list_tools()}
        assert specs["colourful"].description == "Reads red files quietly."
        assert specs["colourful"].parameters == {"type": "object"}
        assert specs["titled"].description == "Only a title"
        assert provider.instructions == "Be nice."
        with pytest.raises(ToolError) as info:
            await provider.call_tool("colourful", {})
    text = info.value.server_text
    assert text is not None and text.startswith("wiped ")
    assert "\x1b" not in text
    assert len(text) < SERVER_TEXT_LIMIT + 100
    assert len(info.value.message) < 500


async def test_generation_follows_the_client() -> None:
    provider = McpToolProvider(InProcessClient(changing_server(), mode="legacy"))
    async with provider:
        await provider.list_tools()
        before = provider_generation(provider)
        await provider.call_tool("add_tool", {"name": "extra"})
        for _ in range(100):
            if provider_generation(provider) > before:
                break
            await anyio.sleep(0.01)
        assert provider_generation(provider) == before + 1
        assert "extra" in {s.name for s in await provider.list_tools()}


async def test_close_passes_through_and_bad_input_is_refused() -> None:
    client = InProcessClient(output_schema_server())
    provider = McpToolProvider(client)
    with pytest.raises(ConfigError):
        await provider.call_tool("good", ["not", "a", "mapping"])  # type: ignore[arg-type]
    await provider.aclose()
    assert client.closed
    with pytest.raises(TransportError):
        await provider.list_tools()
    with pytest.raises(ConfigError):
        McpToolProvider(object())  # type: ignore[arg-type]


def test_tool_to_spec_accepts_wire_dicts() -> None:
    spec = tool_to_spec(
        {"name": "x", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
    )
    assert spec.parameters == {"type": "object"}
    assert spec.annotations == {"readOnlyHint": True}
    # The SDK rejects a listing without inputSchema; a bare or empty one still maps to an open object.
    assert tool_to_spec({"name": "bare"}).parameters == OPEN_OBJECT_SCHEMA
    assert tool_to_spec({"name": "empty", "inputSchema": {}}).parameters == OPEN_OBJECT_SCHEMA
    with pytest.raises(ConfigError):
        tool_to_spec({"description": "no name"})


def test_the_discover_example_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "discover.py")],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tool get_note: Read the note with this exact title." in out
    assert "parts -> Saved note 'groceries'" in out
    assert "structured -> {'title': 'groceries', 'text': 'eggs, milk, bread'}" in out
    assert "tool error ERR_MCP_TOOL_ERROR -> Error executing tool get_note: no note titled" in out
    assert "Traceback" not in done.stderr


def test_the_docs_show_the_example_verbatim() -> None:
    page = (ROOT / "docs" / "discover.md").read_text()
    example = (ROOT / "examples" / "discover.py").read_text()
    assert example.strip() in page
