"""Optional dependencies: one import helper, so a missing one is always one line naming its extra.

Every lazy import of an optional dependency (Playwright, Ray, psycopg, the model SDKs, the agent
frameworks, the CEL library, PyJWT) goes through `require()`. When the module is not installed
the caller gets `MissingExtraError` (`ERR_MISSING_EXTRA`, a `ConfigError` and an `ImportError`)
whose message says what needed it and the exact install line, for example::

    a browser action needs the 'browser' extra (playwright is not installed):
    pip install 'toolbridge[browser]'

(one line in fact: it is cut here to fit).

The command line prints that message as its one line. Nothing here imports anything optional,
so `import toolbridge` stays light.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtraError

__all__ = ["EXTRA_OF", "extra_of", "install_line", "missing", "require"]

EXTRA_OF: dict[str, str] = {
    "playwright": "browser",
    "ray": "ray",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "cel": "cel",
    "pydantic_ai": "pydantic-ai",
    "langchain_core": "langchain",
    "langgraph": "langchain",
    "agents": "openai-agents",
    "jwt": "oauth",
    "rich": "progress",
    "opentelemetry": "otel",
    "opentelemetry.sdk": "otel-sdk",
    "opentelemetry.exporter.otlp": "otlp",
}
"""The extra of `pyproject.toml` that installs each optional module (a test checks it); the longest
dotted prefix of a module decides (`opentelemetry.sdk` is `otel-sdk`)."""


def install_line(extra: str) -> str:
    """The shell command that installs `extra`: `pip install 'toolbridge[extra]'`."""
    return f"pip install 'toolbridge[{extra}]'"


def missing(extra: str, module: str, what: str = "") -> MissingExtraError:
    """The error for `module` (of the extra `extra`) not being installed; `what` needed it."""
    subject = what or "this part of toolbridge"
    return MissingExtraError(
        f"{subject} needs the '{extra}' extra ({module} is not installed): {install_line(extra)}",
        extra=extra,
        module=module,
    )


def extra_of(module: str) -> str | None:
    """The extra that installs `module` (dotted or not), or `None` when it is not optional."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        extra = EXTRA_OF.get(".".join(parts[:n]))
        if extra is not None:
            return extra
    return None


def require(extra: str, module: str, what: str = "") -> ModuleType:
    """Import `module` (dotted), or raise the one-line error naming `extra`.

    Args:
        extra: the extra of `pyproject.toml` that installs the module (`"browser"`).
        module: the module to import (`"playwright.async_api"`).
        what: what needs it, for the message (`"a browser action"`).

    Raises:
        MissingExtraError: `ERR_MISSING_EXTRA` when the module, or a module it needs, is not
            installed. Other errors of a broken install propagate unchanged.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise missing(extra, exc.name or module, what) from None
