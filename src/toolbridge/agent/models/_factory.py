"""`model_from_string("provider:model")`: the model an `Agent("anthropic:claude-...")` gets.

| prefix | builds | key from | base URL from |
|---|---|---|---|
| `openai:` | `OpenAIModel` | `OPENAI_API_KEY` | `OPENAI_BASE_URL` |
| `anthropic:` | `AnthropicModel` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` |
| `google:` (`gemini:`) | `GeminiModel` | `GEMINI_API_KEY` or `GOOGLE_API_KEY` | `GOOGLE_GEMINI_BASE_URL` |

Everything is checked when the string is resolved, so a typo or a missing key is one clear
`ConfigError` (`ERR_CONFIG`) when the agent is built rather than at its first request: a string
without a prefix, an unknown prefix, an empty model name, a missing key (the message names the
variables to set, never a value), or a provider SDK that is not installed.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

from ..._extras import missing
from ...errors import ConfigError, bounded

if TYPE_CHECKING:  # each provider's module imports its SDK only when it makes a request
    from ._anthropic import AnthropicModel
    from ._gemini import GeminiModel
    from ._openai import OpenAIModel

__all__ = ["PROVIDER_PREFIXES", "model_from_string"]

# prefix -> (class name, key variables, base-URL variable, SDK module, extra)
_PROVIDERS: dict[str, tuple[str, tuple[str, ...], str, str, str]] = {
    "openai": ("OpenAIModel", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", "openai", "openai"),
    "anthropic": ("AnthropicModel", ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "anthropic", "anthropic"),
    "google": (
        "GeminiModel",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "GOOGLE_GEMINI_BASE_URL",
        "google.genai",
        "google",
    ),
}
_ALIASES = {"gemini": "google"}
PROVIDER_PREFIXES: tuple[str, ...] = (*_PROVIDERS, *_ALIASES)
"""The prefixes `model_from_string` understands."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def model_from_string(spec: str) -> OpenAIModel | AnthropicModel | GeminiModel:
    """The model named by `"provider:model"` (for example `"openai:gpt-4o-mini"`).

    Raises:
        ConfigError: `ERR_CONFIG` for a malformed string, an unknown provider, a missing key
            (naming the environment variables) or a provider package that is not installed.
    """
    shown = bounded(repr(spec), 120)
    prefix, sep, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    known = ", ".join(f"{p}:" for p in PROVIDER_PREFIXES)
    if not sep:
        raise ConfigError(
            f"model string {shown} has no provider prefix: write provider:model ({known})", code="ERR_CONFIG"
        )
    provider = _ALIASES.get(prefix.strip().lower(), prefix.strip().lower())
    if provider not in _PROVIDERS:
        raise ConfigError(
            f"model string {shown}: unknown provider {bounded(repr(prefix), 60)} (use {known})",
            code="ERR_CONFIG",
        )
    name = name.strip()
    if not name:
        raise ConfigError(f"model string {shown} names no model after {prefix}:", code="ERR_CONFIG")
    cls_name, key_vars, url_var, module, extra = _PROVIDERS[provider]
    key = next((os.environ[v] for v in key_vars if os.environ.get(v)), None)
    if not key:
        raise ConfigError(f"model string {shown}: no API key: set {' or '.join(key_vars)}", code="ERR_CONFIG")
    if not _installed(module):
        raise missing(extra, module, f"model string {shown}")
    base_url = os.environ.get(url_var) or None
    from ._anthropic import AnthropicModel
    from ._gemini import GeminiModel
    from ._openai import OpenAIModel

    classes: dict[str, type[OpenAIModel] | type[AnthropicModel] | type[GeminiModel]] = {
        "OpenAIModel": OpenAIModel,
        "AnthropicModel": AnthropicModel,
        "GeminiModel": GeminiModel,
    }
    return classes[cls_name](name, api_key=key, base_url=base_url)
