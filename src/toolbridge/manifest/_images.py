"""`Ai.Image` as a runnable: a prompt in, images out (and, with `outputDir`, written to files).

Inputs: `prompt` (a non-empty string) and `options` (an object over the document's, which are
over the model's: the call wins on a clash, as in Telo); with the document's `intent: edit`,
`images` (1 to 16 `{data, mediaType}`, `data` base64: the images to rework, as Telo's call
carries them), and with `intent: inpaint` also `mask` (`{data, mediaType}`: where its pixels are
transparent the image is repainted). Each input image is checked before anything is sent: valid
base64, at most 32 MiB, a PNG, JPEG, WebP or GIF by its bytes (else `ERR_INVALID_INPUT`).
The result is Telo's shape,
`{images: [{type: "image", data, mediaType, width?, height?}], finishReason, usage: {unit:
"images", total}}`, with `data` base64 in JSON (Telo hands the bytes on; a `!cel` reads them as
that text), `revisedPrompts` when the API says it changed the prompt, and `files` (the paths
written) when the document has `outputDir`. As an `Ai.Tools` entry's handler, the images are the
tool result's image parts.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .._json import JsonObject, JsonValue
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..agent import AgentHooks
    from ..agent.models import OpenAIImageModel
    from ..content import ImagePart

__all__ = ["ImageRunnable"]

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_MAX_FILES = 10_000
_MAX_INPUT_IMAGES = 16
_MAX_INPUT_BYTES = 32 * 1024 * 1024
_INPUTS = {
    "generate": ("prompt", "options"),
    "edit": ("prompt", "images", "options"),
    "inpaint": ("prompt", "images", "mask", "options"),
}


class ImageRunnable:
    """`Ai.Image` (see the module docstring).

    Args:
        model: an `OpenAIImageModel`.
        what: `Ai.Image NAME`, for messages.
        name: the document's name (the files' stem).
        options: the document's options.
        output_dir: where images are written, or `None`.
    """

    def __init__(
        self,
        model: OpenAIImageModel,
        what: str,
        name: str,
        options: Mapping[str, JsonValue] | None,
        output_dir: Path | None,
        intent: str = "generate",
    ) -> None:
        self.model = model
        self.intent = intent
        self.what = what
        self.name = name
        self.options = dict(options or {})
        self.output_dir = output_dir

    async def invoke(self, inputs: Mapping[str, object], hooks: AgentHooks | None = None) -> JsonObject:
        allowed = _INPUTS[self.intent]
        unknown = sorted(set(inputs) - set(allowed))
        if unknown:
            raise ConfigError(
                f"{self.what}: unknown input {unknown[0][:60]!r} (inputs with intent {self.intent}: "
                f"{', '.join(allowed)})",
                code="ERR_INVALID_INPUT",
            )
        prompt = inputs.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"{self.what}: `prompt` must be a non-empty string", code="ERR_INVALID_INPUT")
        options = inputs.get("options")
        if options is not None and not isinstance(options, dict):
            raise ConfigError(f"{self.what}: `options` must be an object", code="ERR_INVALID_INPUT")
        merged = {**self.options, **(options or {})}
        if self.intent == "generate":
            made = await self.model.generate(prompt, merged)
        else:
            given = inputs.get("images")
            if not isinstance(given, list) or not 1 <= len(given) <= _MAX_INPUT_IMAGES:
                raise ConfigError(
                    f"{self.what}: `images` must be a list of 1 to {_MAX_INPUT_IMAGES} images "
                    f"{{data, mediaType}} (intent {self.intent})",
                    code="ERR_INVALID_INPUT",
                )
            parts = [self._input_image(image, f"images[{n}]") for n, image in enumerate(given)]
            mask = None
            if self.intent == "inpaint":
                if "mask" not in inputs:
                    raise ConfigError(
                        f"{self.what}: intent inpaint needs a `mask` {{data, mediaType}}",
                        code="ERR_INVALID_INPUT",
                    )
                mask = self._input_image(inputs["mask"], "mask")
            made = await self.model.edit(prompt, parts, mask, merged)
        images: list[JsonValue] = []
        for part in made.images:
            image: JsonObject = {"type": "image", "data": part.data, "mediaType": part.media_type}
            if made.width is not None:
                image["width"], image["height"] = made.width, made.height
            images.append(image)
        out: JsonObject = {
            "images": images,
            "finishReason": made.finish_reason,
            "usage": {"unit": "images", "total": len(images)},
        }
        if made.revised_prompts:
            out["revisedPrompts"] = list[JsonValue](made.revised_prompts)
        if self.output_dir is not None and made.images:
            out["files"] = list[JsonValue]([self._write(p.data, p.media_type) for p in made.images])
        return out

    def _input_image(self, value: object, where: str) -> ImagePart:
        """An input image as an `ImagePart`, checked (see the module docstring)."""
        from ..agent.models import sniff_image_type
        from ..content import ImagePart

        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(data, str) or not data:
            raise ConfigError(
                f"{self.what}: `{where}` must be an image {{data, mediaType}} with base64 `data`",
                code="ERR_INVALID_INPUT",
            )
        if len(data) > (_MAX_INPUT_BYTES * 4) // 3 + 4:
            raise ConfigError(
                f"{self.what}: `{where}` is larger than {_MAX_INPUT_BYTES} bytes", code="ERR_INVALID_INPUT"
            )
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(
                f"{self.what}: `{where}.data` is not valid base64", code="ERR_INVALID_INPUT"
            ) from None
        media = sniff_image_type(raw)
        if media is None:
            raise ConfigError(
                f"{self.what}: `{where}` is not a PNG, JPEG, WebP or GIF image", code="ERR_INVALID_INPUT"
            )
        return ImagePart(data=data, media_type=media)

    def _write(self, data: str, media_type: str) -> str:
        """Write one image as `NAME-N.EXT` (the first free N, never overwriting)."""
        assert self.output_dir is not None
        self.output_dir.mkdir(parents=True, exist_ok=True)
        raw = base64.b64decode(data)
        ext = _EXTENSIONS.get(media_type, "bin")
        for n in range(1, _MAX_FILES + 1):
            path = self.output_dir / f"{self.name}-{n}.{ext}"
            try:
                with path.open("xb") as file:
                    file.write(raw)
            except FileExistsError:
                continue
            return str(path)
        raise ConfigError(
            f"{self.what}: {self.output_dir} already holds {_MAX_FILES} images of {self.name}",
            code="ERR_MANIFEST_BUILD",
        )
