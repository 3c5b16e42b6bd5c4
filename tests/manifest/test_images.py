"""`Ai.Image` and `AiOpenai.OpenaiImageModel` against a loopback server speaking OpenAI's images
API (tests/manifest/images_server.py), through the real `openai` SDK: as a target, as a step
another target reads, as an `Ai.Tools` handler an agent calls; b64_json and url answers; hostile
answers (invalid or huge base64, a body that is not an image, a wrong content type)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from images_server import ImagesApi, images_api, tiny_png

from toolbridge.agent.models import OpenAIImageModel
from toolbridge.cli import main
from toolbridge.errors import ModelError, ToolbridgeError
from toolbridge.manifest import check_manifest

APP = """\
kind: Telo.Application
metadata: {{ name: poster-maker, version: 1.0.0 }}
imports:
  Ai: oci://ghcr.io/telorun/ai@0.15.0
  AiOpenai: oci://ghcr.io/telorun/ai-openai@0.15.0
secrets:
  openaiApiKey: {{ env: TB_TEST_IMAGES_KEY, type: string }}
targets:
  - name: draw
    invoke: !ref Draw
    inputs: {{ prompt: a lighthouse, options: {{ n: 1 }} }}
{more_targets}---
kind: AiOpenai.OpenaiImageModel
metadata: {{ name: Painter }}
model: gpt-image-1
apiKey: !cel "secrets.openaiApiKey"
baseUrl: {url}/v1
maxRetries: 0
options:
  size: 1024x1024
  quality: low
---
kind: Ai.Image
metadata: {{ name: Draw }}
model: !ref Painter
options: {{ quality: high, background: transparent }}
outputDir: out
"""

PNG = tiny_png(2, 3)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ImagesApi]:
    monkeypatch.setenv("TB_TEST_IMAGES_KEY", "sk-test-images")
    with images_api() as served:
        yield served


def write(tmp_path: Path, api: ImagesApi, more_targets: str = "") -> Path:
    path = tmp_path / "telo.yaml"
    path.write_text(APP.format(url=api.url, more_targets=more_targets), encoding="utf-8")
    return path


def test_a_target_generates_writes_the_file_and_merges_options(
    tmp_path: Path, api: ImagesApi, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, api)
    assert check_manifest(path).ok, check_manifest(path).diagnostics
    api.answer_b64(PNG, revised="a lighthouse at dusk")
    assert main(["run", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    [image] = result["images"]
    assert image == {
        "type": "image",
        "data": base64.b64encode(PNG).decode(),
        "mediaType": "image/png",
        "width": 1024,
        "height": 1024,
    }
    assert result["finishReason"] == "stop" and result["usage"] == {"unit": "images", "total": 1}
    assert result["revisedPrompts"] == ["a lighthouse at dusk"]
    [written] = result["files"]
    assert Path(written) == tmp_path / "out" / "Draw-1.png" and Path(written).read_bytes() == PNG
    [request] = api.requests
    assert request["path"] == "/v1/images/generations"
    # the model's options, under the document's, under the call's
    assert request == {
        "path": "/v1/images/generations",
        "model": "gpt-image-1",
        "prompt": "a lighthouse",
        "size": "1024x1024",
        "quality": "high",
        "background": "transparent",
        "n": 1,
    }
    api.answer_b64(PNG)
    assert main(["run", str(path), "--json"]) == 0  # a second run never overwrites the first
    assert json.loads(capsys.readouterr().out)["files"] == [str(tmp_path / "out" / "Draw-2.png")]


def test_a_step_reads_the_images_and_an_empty_answer_is_a_refusal(
    tmp_path: Path, api: ImagesApi, capsys: pytest.CaptureFixture[str]
) -> None:
    more = """\
  - name: again
    when: !cel "size(steps.draw.result.images) > 0"
    invoke: !ref Draw
    inputs: { prompt: !cel "'same as ' + steps.draw.result.images[0].mediaType" }
"""
    path = write(tmp_path, api, more)
    assert check_manifest(path).ok, check_manifest(path).diagnostics
    api.answer_b64(PNG)
    api.answer_json({"created": 1, "data": []})  # the model declined: a result, not an error
    assert main(["run", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["steps"]) == ["draw", "again"]
    assert api.requests[1]["prompt"] == "same as image/png"
    again = out["steps"]["again"]["result"]
    assert again["images"] == [] and again["finishReason"] == "content-filter" and "files" not in again


def test_an_agent_calls_an_image_tool_and_gets_image_parts(
    tmp_path: Path, api: ImagesApi, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, api)
    text = path.read_text().replace(
        "targets:\n  - name: draw\n    invoke: !ref Draw\n"
        "    inputs: { prompt: a lighthouse, options: { n: 1 } }\n",
        "targets: [ !ref Artist ]\n",
    )
    text += """\
---
kind: Ai.ScriptedModel
metadata: { name: Script }
turns:
  - toolCalls: [ { name: draw, arguments: { subject: a lighthouse } } ]
  - text: here it is
---
kind: Ai.Tools
metadata: { name: Studio }
tools:
  - name: draw
    description: Draw a picture
    parameters: { type: object, properties: { subject: { type: string } }, required: [subject] }
    tool: !ref Draw
    inputs: { prompt: !cel "'a poster of ' + arguments.subject" }
---
kind: Ai.Agent
metadata: { name: Artist }
model: !ref Script
toolProviders: [ { provider: !ref Studio } ]
"""
    text = text.replace("imports:\n", "imports:\n  AiMcp: oci://ghcr.io/telorun/ai-mcp@0.3.0\n")
    path.write_text(text)
    assert check_manifest(path).ok, check_manifest(path).diagnostics
    api.answer_b64(PNG)
    assert main(["run", str(path), "--input", "draw", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    [tool_result] = result["steps"][0]["toolResults"]
    assert tool_result["error"] is False
    assert tool_result["content"] == [
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    ]
    assert api.requests[0]["prompt"] == "a poster of a lighthouse"


def test_a_url_answer_is_fetched_and_checked(
    tmp_path: Path, api: ImagesApi, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, api)
    api.files["ok.png"] = ("image/png", PNG)
    api.files["page.png"] = ("text/html", b"<html>not an image</html>")
    api.answer_json({"created": 1, "data": [{"url": f"{api.url}/files/ok.png"}]})
    assert main(["run", str(path), "--json"]) == 0
    assert base64.b64decode(json.loads(capsys.readouterr().out)["images"][0]["data"]) == PNG
    api.answer_json({"created": 1, "data": [{"url": f"{api.url}/files/page.png"}]})
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "ERR_MODEL_BAD_RESPONSE" in err and "content type 'text/html'" in err
    assert "Traceback" not in err and "sk-test-images" not in err


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            (200, "application/json", b'{"created": 1, "data": [{"b64_json": "%%%not base64%%%"}]}'),
            "not valid base64",
        ),
        (
            (
                200,
                "application/json",
                json.dumps(
                    {"created": 1, "data": [{"b64_json": base64.b64encode(b"MZ not an image").decode()}]}
                ).encode(),
            ),
            "not a PNG, JPEG, WebP or GIF",
        ),
        ((200, "application/json", b'{"created": 1, "data": [{}]}'), "neither b64_json nor url"),
        (
            (200, "application/json", b'{"created": 1, "data": [{"url": "file:///etc/passwd"}]}'),
            "not http or https",
        ),
        ((200, "text/html", b"<html>gateway timeout</html>"), "not an images response"),
    ],
)
async def test_hostile_answers_fail_one_call_with_a_stable_code(
    api: ImagesApi, reply: tuple[int, str, bytes], expected: str
) -> None:
    model = OpenAIImageModel("gpt-image-1", api_key="sk-test-images", base_url=f"{api.url}/v1", max_retries=0)
    api.answer_raw(*reply)
    with pytest.raises(ModelError) as info:
        await model.generate("x")
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and expected in info.value.message
    api.answer_b64(PNG)  # the next call works: a bad answer fails one call, not the model
    assert len((await model.generate("y")).images) == 1
    await model.aclose()


async def test_a_huge_image_is_refused_before_it_is_decoded(api: ImagesApi) -> None:
    model = OpenAIImageModel(
        "gpt-image-1", api_key="sk-test-images", base_url=f"{api.url}/v1", max_retries=0, max_image_bytes=1024
    )
    api.answer_b64(PNG + b"\x00" * 4096)
    with pytest.raises(ModelError) as info:
        await model.generate("x")
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE" and "larger than 1024 bytes" in info.value.message
    api.files["big.png"] = ("image/png", PNG + b"\x00" * 4096)
    api.answer_json({"created": 1, "data": [{"url": f"{api.url}/files/big.png"}]})
    with pytest.raises(ModelError) as info:
        await model.generate("x")
    assert "larger than 1024 bytes" in info.value.message
    await model.aclose()


def test_image_inputs_are_checked(tmp_path: Path, api: ImagesApi, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, api)
    assert main(["run", str(path), "--target", "Draw", "--inputs", '{"prompt": ""}']) == 1
    assert "`prompt` must be a non-empty string" in capsys.readouterr().err
    assert main(["run", str(path), "--target", "Draw", "--inputs", '{"prompt": "x", "mask": 1}']) == 1
    assert "unknown input 'mask'" in capsys.readouterr().err
    assert api.requests == []


EDIT = """---
kind: Ai.Image
metadata: { name: Retouch }
model: !ref Painter
intent: edit
---
kind: Ai.Image
metadata: { name: Repaint }
model: !ref Painter
intent: inpaint
"""


async def test_edit_and_inpaint_send_the_images_and_the_mask(tmp_path: Path, api: ImagesApi) -> None:
    """As Telo's image-smoke TestEdit: a generated image reworked (intent edit), then
    repainted under a mask (intent inpaint), through OpenAI's images.edit (multipart)."""
    from toolbridge.manifest import load_manifest

    path = write(tmp_path, api)
    path.write_text(path.read_text(encoding="utf-8") + EDIT, encoding="utf-8")
    assert check_manifest(path).ok, check_manifest(path).diagnostics
    seed = {"data": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    edited_png = tiny_png(4, 4)
    api.answer_b64(edited_png)
    api.answer_b64(PNG)
    async with load_manifest(path).open() as live:
        edited = await (await live.runnable("Retouch")).invoke(
            {"prompt": "add a storm", "images": [seed, seed], "options": {"n": 1}}
        )
        repainted = await (await live.runnable("Repaint")).invoke(
            {"prompt": "repaint the sky", "images": [seed], "mask": seed}
        )
        assert edited["images"][0]["data"] == base64.b64encode(edited_png).decode()
        assert repainted["finishReason"] == "stop" and repainted["usage"]["total"] == 1
        edit, inpaint = api.requests
        assert edit["path"] == inpaint["path"] == "/v1/images/edits"
        assert (edit["prompt"], edit["model"], edit["n"]) == ("add a storm", "gpt-image-1", "1")
        assert edit["files"] == {"image[]": [PNG, PNG]} and edit["quality"] == "low"  # the model's options
        assert inpaint["prompt"] == "repaint the sky"
        assert inpaint["files"] == {"image": [PNG], "mask": [PNG]}
        # hostile inputs fail the call before anything is sent
        retouch, repaint = await live.runnable("Retouch"), await live.runnable("Repaint")
        for runnable, inputs, says in (
            (retouch, {"prompt": "x"}, "`images` must be a list of 1 to 16"),
            (retouch, {"prompt": "x", "images": [seed] * 17}, "`images` must be a list of 1 to 16"),
            (
                retouch,
                {"prompt": "x", "images": [{"data": "%%%", "mediaType": "image/png"}]},
                "not valid base64",
            ),
            (retouch, {"prompt": "x", "images": [{"data": base64.b64encode(b"text").decode()}]}, "not a PNG"),
            (retouch, {"prompt": "x", "images": [seed], "mask": seed}, "unknown input 'mask'"),
            (repaint, {"prompt": "x", "images": [seed]}, "intent inpaint needs a `mask`"),
            (repaint, {"prompt": "x", "images": [seed], "mask": "nope"}, "`mask` must be an image"),
            (await live.runnable("Draw"), {"prompt": "x", "images": [seed]}, "unknown input 'images'"),
        ):
            with pytest.raises(ToolbridgeError) as failed:
                await runnable.invoke(inputs)
            assert failed.value.code == "ERR_INVALID_INPUT" and says in failed.value.message
        assert len(api.requests) == 2
