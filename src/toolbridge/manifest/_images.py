"""`Ai.Image` as a runnable: a prompt in, images out (and, with `outputDir`, written to files).

Inputs: `prompt` (a non-empty string) and `options` (an object over the document's, which are
over the model's: the call wins on a clash, as in Telo). The result is Telo's shape,
`{images: [{type: "image", data, mediaType, width?, height?}], finishReason, usage: {unit:
"images", total}}`, with `data` base64 in JSON (Telo hands the bytes on; a `!cel` reads them as
that text), `revisedPrompts` when the API says it changed the prompt, and `files` (the paths
written) when the document has `outputDir`. As an `Ai.Tools` entry's handler, the images are the
tool result's image parts.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["ImageRunnable"]

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_MAX_FILES = 10_000


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
        self, model: Any, what: str, name: str, options: Mapping[str, Any] | None, output_dir: Path | None
    ) -> None:
        self.model = model
        self.what = what
        self.name = name
        self.options = dict(options or {})
        self.output_dir = output_dir

    async def invoke(self, inputs: Mapping[str, Any], hooks: Any = None) -> dict[str, Any]:
        unknown = sorted(set(inputs) - {"prompt", "options"})
        if unknown:
            raise ConfigError(
                f"{self.what}: unknown input {unknown[0][:60]!r} (inputs: prompt, options)",
                code="ERR_INVALID_INPUT",
            )
        prompt = inputs.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"{self.what}: `prompt` must be a non-empty string", code="ERR_INVALID_INPUT")
        options = inputs.get("options")
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"{self.what}: `options` must be an object", code="ERR_INVALID_INPUT")
        made = await self.model.generate(prompt, {**self.options, **(options or {})})
        images: list[dict[str, Any]] = []
        for part in made.images:
            image: dict[str, Any] = {"type": "image", "data": part.data, "mediaType": part.media_type}
            if made.width is not None:
                image["width"], image["height"] = made.width, made.height
            images.append(image)
        out: dict[str, Any] = {
            "images": images,
            "finishReason": made.finish_reason,
            "usage": {"unit": "images", "total": len(images)},
        }
        if made.revised_prompts:
            out["revisedPrompts"] = list(made.revised_prompts)
        if self.output_dir is not None and made.images:
            out["files"] = [self._write(p.data, p.media_type) for p in made.images]
        return out

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
