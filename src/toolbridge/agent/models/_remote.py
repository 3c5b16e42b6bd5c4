"""What every model behind a provider's HTTP API shares: key, retries, errors, arguments.

`RemoteModel` holds the settings common to `OpenAIModel`, `AnthropicModel` and `GeminiModel`
(model name, key, base URL, default options, prices, retry policy, timeout) and does the parts
that do not depend on the wire format:

- the key comes from `api_key=` or the provider's environment variables, is kept in a
  name-mangled attribute, and is scrubbed from every error message (`__repr__` never shows it);
  an `api_key=` and the credentials inside `base_url` (or the provider's `*_BASE_URL` variable:
  a userinfo password, a `key=`/`token=` query value) are registered with the redactor when the
  model is constructed, so `repr(model)`, errors and logs never show them, first request or not;
- `_retrying(start)` calls `start()` and, when the provider's `_translate` says the failure may
  be retried (429, 5xx, overloaded, connection failures, timeouts), sleeps with exponential
  backoff and jitter (a short `Retry-After` is honoured, every delay is capped at 20 s) and tries
  again, at most `max_retries` times; then the translated `ModelError` is raised, never the SDK's;
- `tool_arguments` reads a tool call's arguments (JSON text or an object) and refuses anything
  that is not a JSON object, or that nests deeper than 100 levels, with
  `ERR_MODEL_BAD_RESPONSE`, never silently `{}` and never a `RecursionError`;
- `_LruMemory` keeps a bounded map from tool-call ids to provider data a later turn must send back
  (Anthropic thinking blocks, Gemini thought signatures).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import anyio

from ..._bounded import MAX_DEPTH, InputLimitError, depth_exceeds, loads_json
from ..._extras import missing
from ...errors import ConfigError, MissingExtraError, ModelError, bounded
from ._base import ModelBase, ModelPrices

__all__ = ["RemoteModel", "snake_case", "tool_arguments"]

T = TypeVar("T")
V = TypeVar("V")
ClientT = TypeVar("ClientT")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_MAX_DELAY_S = 20.0


def snake_case(key: str) -> str:
    """`maxTokens` -> `max_tokens` (snake_case keys are returned unchanged)."""
    return _CAMEL.sub("_", key).lower()


def tool_arguments(model: str, name: str, raw: object) -> dict[str, object]:
    """The arguments object of a tool call: `raw` is JSON text, a mapping, or `None` (no arguments).

    Raises:
        ModelError: `ERR_MODEL_BAD_RESPONSE` for malformed JSON or a value that is not an object.
    """
    if raw is None:
        return {}
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            raw = loads_json(text)
        except InputLimitError as exc:
            raise ModelError(
                f"model {bounded(repr(model), 100)} sent arguments for tool {bounded(repr(name), 100)} "
                f"that are not JSON it can take: {exc.message}"
                + (f" at line {exc.line} column {exc.column}" if exc.line is not None else ""),
                code="ERR_MODEL_BAD_RESPONSE",
            ) from None
    elif isinstance(raw, Mapping) and depth_exceeds(raw):
        raise ModelError(
            f"model {bounded(repr(model), 100)} sent arguments for tool {bounded(repr(name), 100)} "
            f"that nest deeper than {MAX_DEPTH} levels",
            code="ERR_MODEL_BAD_RESPONSE",
        )
    if not isinstance(raw, Mapping):
        raise ModelError(
            f"model {model!r} sent arguments for tool {name!r} that are not a JSON object "
            f"({type(raw).__name__})",
            code="ERR_MODEL_BAD_RESPONSE",
        )
    return dict(raw)


@runtime_checkable
class _Answered(Protocol):
    """An SDK's error carrying the HTTP answer it was made from (openai's, anthropic's, google-genai's)."""

    @property
    def response(self) -> object: ...


@runtime_checkable
class _WithHeaders(Protocol):
    """An HTTP answer's headers (httpx's or aiohttp's response)."""

    @property
    def headers(self) -> Mapping[str, str]: ...


class _LruMemory(Generic[V]):
    """A small bounded map (least recently stored entries are dropped first)."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._items: OrderedDict[str, V] = OrderedDict()

    def put(self, key: str, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def get(self, key: str) -> V | None:
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)


class RemoteModel(ModelBase, Generic[ClientT]):
    """Settings and behaviour shared by the HTTP providers (see the module docstring).

    Subclasses set `provider`, `key_env` and `extra`, and implement `_new_client`,
    `_close_client` and `_translate`; `ClientT` is their SDK's client class.
    """

    provider: ClassVar[str] = "remote"
    key_env: ClassVar[tuple[str, ...]] = ()
    base_url_env: ClassVar[str] = ""
    """The variable the provider's SDK reads its API root from when `base_url` is not given."""
    extra: ClassVar[str] = ""

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str | None,
        options: Mapping[str, object] | None,
        prices: ModelPrices | None,
        max_retries: int,
        *,
        supports_images: bool,
        timeout_s: float,
        retry_backoff_s: float,
    ) -> None:
        kind = type(self).__name__
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{kind} needs a model name", code="ERR_CONFIG")
        numbers = (retry_backoff_s, timeout_s)
        if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
            raise ConfigError(f"{kind}: timeout_s and retry_backoff_s must be numbers", code="ERR_CONFIG")
        if (
            not isinstance(max_retries, int)
            or isinstance(max_retries, bool)
            or max_retries < 0
            or retry_backoff_s < 0
        ):
            raise ConfigError("max_retries and retry_backoff_s must be >= 0", code="ERR_CONFIG")
        if not timeout_s > 0:
            raise ConfigError("timeout_s must be > 0", code="ERR_CONFIG")
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"{kind}: options must be a mapping", code="ERR_CONFIG")
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigError(f"{kind}: api_key must be a string", code="ERR_CONFIG")
        if base_url is not None and not isinstance(base_url, str):
            raise ConfigError(f"{kind}: base_url must be a string", code="ERR_CONFIG")
        self._register_secrets(api_key, base_url)
        self.model = model
        self.id = f"{self.provider}:{model}"
        self.supports_images = supports_images
        self.prices = prices
        self.base_url = base_url
        self.options: dict[str, object] = {snake_case(str(k)): v for k, v in (options or {}).items()}
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.__api_key = api_key
        self._client: ClientT | None = None

    def __repr__(self) -> str:
        from ...redact import redact

        return redact(f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})")

    # -- the key ------------------------------------------------------------------------------

    def _register_secrets(self, api_key: str | None, base_url: str | None) -> None:
        """Register `api_key` and the credentials of the API root with the redactor, now."""
        from ...redact import register_secret, register_url_secrets

        kind = type(self).__name__
        if api_key:
            register_secret(api_key, name=f"the {kind} API key")
        register_url_secrets(base_url or "", name=f"the {kind} base_url")
        if self.base_url_env:
            register_url_secrets(os.environ.get(self.base_url_env, ""), name=self.base_url_env)

    def _secret(self) -> str | None:
        if self.__api_key:
            return self.__api_key
        for name in self.key_env:
            value = os.environ.get(name)
            if value:
                return value
        return None

    def _scrub(self, text: str) -> str:
        key = self._secret()
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return bounded(text, 500)

    def _missing_package(self, exc: ImportError) -> MissingExtraError:
        return missing(self.extra, exc.name or self.extra, type(self).__name__)

    # -- the client ---------------------------------------------------------------------------

    def _new_client(self, key: str) -> ClientT:  # pragma: no cover - abstract
        raise NotImplementedError

    async def _close_client(self, client: ClientT) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _get_client(self) -> ClientT:
        if self._client is None:
            key = self._secret()
            if not key:
                names = " or ".join(self.key_env) or "an environment variable"
                raise ModelError(f"no API key: pass api_key= or set {names}", code="ERR_MODEL_AUTH")
            from ...redact import register_secret

            register_secret(key, name=f"the {type(self).__name__} API key")  # scrubbed everywhere
            self._client = self._new_client(key)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (a later request opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await self._close_client(client)

    async def __aenter__(self) -> RemoteModel[ClientT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- errors and retries -------------------------------------------------------------------

    def _translate(self, exc: Exception) -> tuple[ModelError, bool]:  # pragma: no cover - abstract
        """The `ModelError` for `exc`, and whether the failure may be retried."""
        raise NotImplementedError

    def _status_error(self, status: int, detail: str) -> tuple[ModelError, bool]:
        """The error for an HTTP status answer (`detail` already scrubbed)."""
        where = f"model {self.model!r}"
        if status in (401, 403):
            return ModelError(
                f"{where}: authentication failed ({status}): {detail}", code="ERR_MODEL_AUTH"
            ), False
        if status == 404:
            return ModelError(f"{where}: not found (404): {detail}", code="ERR_MODEL_NOT_FOUND"), False
        if status == 429:
            return ModelError(f"{where}: rate limited (429): {detail}", code="ERR_MODEL_RATE_LIMIT"), True
        if status >= 500:
            return ModelError(
                f"{where}: server error ({status}): {detail}", code="ERR_MODEL_UNAVAILABLE"
            ), True
        return ModelError(
            f"{where}: request rejected ({status}): {detail}", code="ERR_MODEL_BAD_REQUEST"
        ), False

    def _unknown_error(self, exc: BaseException) -> ModelError:
        return ModelError(
            f"model {self.model!r}: {type(exc).__name__}: {self._scrub(str(exc))}", code="ERR_MODEL"
        )

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = self.retry_backoff_s * (2**attempt) * (0.5 + random.random() / 2)
        response = exc.response if isinstance(exc, _Answered) else None
        header = response.headers.get("retry-after") if isinstance(response, _WithHeaders) else None
        if header:
            with contextlib.suppress(ValueError, TypeError):
                delay = max(delay, min(float(header), _MAX_DELAY_S))
        return float(min(delay, _MAX_DELAY_S))

    async def _retrying(self, start: Callable[[], Awaitable[T]]) -> T:
        """`await start()`, retried on retryable failures; failures become `ModelError`."""
        attempt = 0
        while True:
            try:
                return await start()
            except ModelError:
                raise
            except Exception as exc:
                error, retryable = self._translate(exc)
                if not retryable or attempt >= self.max_retries:
                    raise error from None
                await anyio.sleep(self._delay(attempt, exc))
                attempt += 1
