"""`OpenAIImageModel`: OpenAI's images API (`images.generate`, `images.edit`) on the official
`openai` SDK.

Telo's `AiOpenai.OpenaiImageModel`. It shares `OpenAIModel`'s key handling, retries and error
mapping (`ERR_MODEL_*`), and adds what an image answer needs, all bounded because the server is
untrusted:

- each answered image is `b64_json` (decoded strictly: an invalid base64 text is
  `ERR_MODEL_BAD_RESPONSE`) or a `url`, fetched once (http or https only, at most
  `max_image_bytes`, the answer's `Content-Type` must be `image/*`);
- the bytes must be an image: PNG, JPEG, WebP or GIF by their first bytes (anything else is
  `ERR_MODEL_BAD_RESPONSE`), which gives the media type;
- an image larger than `max_image_bytes` (default 32 MiB) is refused before it is decoded.

`generate(prompt, options)` returns a `GeneratedImages`: the images (`ImagePart`s, with the width
and height `size` asked for), `finish_reason` (`stop`, or `content-filter` when no image came
back) and the number of images as usage. `edit(prompt, images, mask, options)` sends input
images (and, to inpaint, a mask) to `images.edit` (multipart) and answers the same way.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...content import ImagePart
from ...errors import ModelError
from ._base import ModelPrices
from ._openai import OpenAIModel
from ._remote import snake_case

if TYPE_CHECKING:  # the SDK is the optional `openai` extra
    from openai.types import Image

__all__ = ["MAX_IMAGE_BYTES", "GeneratedImages", "OpenAIImageModel", "sniff_image_type"]

MAX_IMAGE_BYTES = 32 * 1024 * 1024
"""The largest image accepted from the API (decoded), by default."""

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image_type(data: bytes) -> str | None:
    """The media type of `data` by its first bytes (PNG, JPEG, GIF, WebP), or `None`."""
    for magic, media in _MAGIC:
        if data.startswith(magic):
            return media
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True)
class GeneratedImages:
    """What one `generate` call gave.

    Attributes:
        images: the images, in the order the API answered.
        width: the width asked for (`size` `WxH`), if any.
        height: the height asked for, if any.
        finish_reason: `stop`, or `content-filter` when the API answered no image.
        revised_prompts: the prompts the API says it used instead (OpenAI's `revised_prompt`).
    """

    images: tuple[ImagePart, ...]
    width: int | None = None
    height: int | None = None
    finish_reason: str = "stop"
    revised_prompts: tuple[str, ...] = field(default=())


def _size(options: Mapping[str, object]) -> tuple[int | None, int | None]:
    size = options.get("size")
    if isinstance(size, str) and "x" in size:
        w, _, h = size.partition("x")
        if w.isdigit() and h.isdigit():
            return int(w), int(h)
    return None, None


class OpenAIImageModel(OpenAIModel):
    """OpenAI's images API (see the module docstring).

    Args:
        model: the image model, e.g. `gpt-image-1` or `dall-e-3`.
        api_key: the key (default: `OPENAI_API_KEY`).
        base_url: any endpoint speaking the images API (default: OpenAI's).
        options: default request options (`size`, `quality`, `n`, `background`,
            `output_format`, `moderation`, `style`, `response_format`, …; camelCase or
            snake_case), under the call's.
        max_retries: retries on 429, 5xx and connection failures.
        timeout_s: the timeout of one request (image generation is slow: 300 s by default).
        max_image_bytes: the largest image accepted (decoded).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        options: Mapping[str, object] | None = None,
        prices: ModelPrices | None = None,
        max_retries: int = 3,
        timeout_s: float = 300.0,
        retry_backoff_s: float = 0.5,
        max_image_bytes: int = MAX_IMAGE_BYTES,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            options=options,
            prices=prices,
            max_retries=max_retries,
            timeout_s=timeout_s,
            retry_backoff_s=retry_backoff_s,
        )
        self.id = f"openai-images:{model}"
        self.max_image_bytes = max_image_bytes

    async def generate(self, prompt: str, options: Mapping[str, object] | None = None) -> GeneratedImages:
        """Generate images for `prompt`; `options` go over the model's.

        Raises:
            ModelError: `ERR_MODEL_*` as for chat requests; `ERR_MODEL_BAD_RESPONSE` for an
                answer that is not an images response or an image that is not one.
        """
        merged = self._merged(options)
        client = self._get_client()
        answer: object = await self._retrying(
            lambda: client.images.generate(model=self.model, prompt=prompt, extra_body=merged)
        )
        return await self._answered(answer, merged)

    async def edit(
        self,
        prompt: str,
        images: list[ImagePart],
        mask: ImagePart | None = None,
        options: Mapping[str, object] | None = None,
    ) -> GeneratedImages:
        """Edit `images` (at least one) as `prompt` says, only where `mask` is transparent when
        given (inpainting); `options` go over the model's.

        Raises:
            ModelError: as `generate`.
        """
        merged = self._merged(options)

        def upload(n: int, part: ImagePart) -> tuple[str, bytes, str]:
            ext = part.media_type.rsplit("/", 1)[-1]
            return (f"image-{n}.{ext}", base64.b64decode(part.data), part.media_type)

        files = [upload(n, p) for n, p in enumerate(images, 1)]
        client = self._get_client()  # first: without the SDK installed, the missing extra is named
        from openai import omit

        answer: object = await self._retrying(
            lambda: client.images.edit(
                model=self.model,
                prompt=prompt,
                image=files if len(files) > 1 else files[0],
                mask=upload(0, mask) if mask is not None else omit,
                extra_body=merged,
            )
        )
        return await self._answered(answer, merged)

    def _merged(self, options: Mapping[str, object] | None) -> dict[str, object]:
        return {**self.options, **{snake_case(str(k)): v for k, v in (options or {}).items()}}

    async def _answered(self, answer: object, merged: Mapping[str, object]) -> GeneratedImages:
        """`answer` is what the SDK made of the reply: an `ImagesResponse`, or (a page that is not
        JSON, a stream) something else."""
        from openai.types import Image, ImagesResponse

        if not isinstance(answer, ImagesResponse):
            raise self._bad("the answer is not an images response")
        images: list[ImagePart] = []
        revised: list[str] = []
        for item in answer.data or []:
            images.append(await self._image(item))
            text = item.revised_prompt if isinstance(item, Image) else None
            if isinstance(text, str):
                revised.append(text)
        width, height = _size(merged)
        return GeneratedImages(
            tuple(images),
            width,
            height,
            "stop" if images else "content-filter",
            tuple(revised),
        )

    def _bad(self, why: str) -> ModelError:
        return ModelError(f"model {self.model!r}: {why}", code="ERR_MODEL_BAD_RESPONSE")

    async def _image(self, item: Image) -> ImagePart:
        from openai.types import Image

        # a hostile reply's `data` may hold anything: only the SDK's `Image`s are read
        encoded, url = (item.b64_json, item.url) if isinstance(item, Image) else (None, None)
        if isinstance(encoded, str) and encoded:
            if len(encoded) > (self.max_image_bytes * 4) // 3 + 4:
                raise self._bad(f"an image is larger than {self.max_image_bytes} bytes")
            try:
                data = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise self._bad("an image's b64_json is not valid base64") from None
        elif isinstance(url, str) and url:
            data = await self._fetch(url)
        else:
            raise self._bad("an image has neither b64_json nor url")
        media = sniff_image_type(data)
        if media is None:
            raise self._bad("an answered image is not a PNG, JPEG, WebP or GIF image")
        return ImagePart(data=base64.b64encode(data).decode("ascii"), media_type=media)

    async def _fetch(self, url: str) -> bytes:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise self._bad("an image url is not http or https")
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as http,
                http.stream("GET", url) as answer,
            ):
                if answer.status_code != 200:
                    raise self._bad(f"fetching an image url answered {answer.status_code}")
                kind = answer.headers.get("content-type", "")
                if not kind.lower().startswith("image/"):
                    raise self._bad(f"an image url answered content type {kind[:60]!r}, not image/*")
                chunks: list[bytes] = []
                total = 0
                async for chunk in answer.aiter_bytes():
                    total += len(chunk)
                    if total > self.max_image_bytes:
                        raise self._bad(f"an image is larger than {self.max_image_bytes} bytes")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise ModelError(
                f"model {self.model!r}: cannot fetch an image url ({type(exc).__name__})",
                code="ERR_MODEL_UNAVAILABLE",
            ) from None
        return b"".join(chunks)
