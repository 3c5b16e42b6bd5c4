"""Media beside structured content, against server-filesystem's `read_media_file` (a real server).

The tool answers with an image block *and* `structuredContent` holding the same block. The rule:
the structured content stays what the model reads (with the base64 payload shown as the image's
placeholder), the image reaches the model as an image part, and `toolbridge call` prints the
placeholder line, never the base64.
"""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest

from toolbridge.agent import Agent, ScriptedModel
from toolbridge.agent._agent import result_to_model
from toolbridge.bridge import McpToolProvider
from toolbridge.cli import main
from toolbridge.clients import StdioClient
from toolbridge.content import AudioPart, ImagePart, TextPart
from toolbridge.tools import ToolResult


def _png(path: Path, size: int = 4) -> bytes:
    """A real `size`x`size` grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * size for _ in range(size))
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    path.write_bytes(data)
    return data


async def test_the_image_beside_structured_content_is_a_media_part(
    node: str, filesystem_js: str, tmp_path: Path
) -> None:
    png = _png(tmp_path / "dot.png")
    payload = base64.b64encode(png).decode()
    async with McpToolProvider(StdioClient(node, [filesystem_js, str(tmp_path)], timeout=20)) as provider:
        result = await provider.call_tool("read_media_file", {"path": str(tmp_path / "dot.png")})
    assert result.kind == "structured"
    # The structured value is kept as the server sent it ...
    assert result.structured == {"content": [{"type": "image", "data": payload, "mimeType": "image/png"}]}
    # ... and the image beside it is a media part.
    assert result.media == (ImagePart(payload, "image/png"),)
    placeholder = f"[image: image/png, {len(png)} bytes]"
    text = result.structured_text()
    assert payload not in text and placeholder in text  # the model reads no base64
    assert result.to_text() == f"{text}\n{placeholder}"

    shown = result_to_model(result, supports_images=True)
    assert shown == (TextPart(text), ImagePart(payload, "image/png"))
    assert result_to_model(result, supports_images=False) == (TextPart(text), TextPart(placeholder))


async def test_an_agent_gets_the_image_as_an_image(node: str, filesystem_js: str, tmp_path: Path) -> None:
    png = _png(tmp_path / "dot.png")
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "read_media_file", "arguments": {"path": str(tmp_path / "dot.png")}}]},
            {"text": "a grey square"},
        ],
        supports_images=True,
    )
    client = StdioClient(node, [filesystem_js, str(tmp_path)], timeout=20)
    async with McpToolProvider(client) as provider:
        result = await Agent(model, [{"provider": provider, "include": ["read_media_file"]}]).run("look")
    assert result.text == "a grey square"
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool" and not isinstance(tool_message.content, str)
    images = [p for p in tool_message.content if isinstance(p, ImagePart)]
    assert images == [ImagePart(base64.b64encode(png).decode(), "image/png")]
    texts = [p.text for p in tool_message.content if isinstance(p, TextPart)]
    assert len(texts) == 1 and base64.b64encode(png).decode() not in texts[0]


def test_call_shows_the_image_as_one_line(
    node: str, filesystem_js: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = _png(tmp_path / "dot.png", size=32)
    path = str(tmp_path / "dot.png")
    args = f'{{"path": "{path}"}}'
    code = main(["call", "read_media_file", args, "--", node, filesystem_js, str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    placeholder = f"[image: image/png, {len(png)} bytes]"
    assert out.splitlines()[-1] == placeholder
    assert f'"data": "{placeholder}"' in out  # inside the JSON, the payload is the placeholder too
    assert base64.b64encode(png).decode()[:40] not in out


def test_a_string_equal_to_no_payload_is_left_alone() -> None:
    audio = AudioPart(base64.b64encode(b"RIFF....WAVE").decode(), "audio/wav")
    result = ToolResult.of_structured({"note": "hello", "nested": [{"blob": audio.data}], "n": 3}, [audio])
    assert result.structured_shown() == {
        "note": "hello",
        "nested": [{"blob": "[audio: audio/wav, 12 bytes]"}],
        "n": 3,
    }
    assert result.structured["nested"][0]["blob"] == audio.data  # the value itself is untouched
    plain = ToolResult.of_structured({"a": 1})
    assert plain.to_text() == '{"a":1}' and plain.structured_shown() is plain.structured
