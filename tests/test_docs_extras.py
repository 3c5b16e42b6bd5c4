"""A missing optional dependency is one line naming its extra, wherever it is imported.

Each check runs in a fresh interpreter whose `sys.modules` marks the dependency as absent (an
import of it then raises `ModuleNotFoundError`, as on a machine without it).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from toolbridge import ConfigError, MissingExtraError
from toolbridge._extras import EXTRA_OF, extra_of, install_line, require

ROOT = Path(__file__).resolve().parent.parent
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]


def _dist(requirement: str) -> str:
    name = requirement.split(";")[0]
    for stop in "[<>=!~ ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


def modules_of_extra(extra: str) -> set[str]:
    """The top-level modules the distributions of `extra` install (read from what is installed)."""
    dists = {_dist(r) for r in EXTRAS[extra]}
    return {
        module
        for module, names in packages_distributions().items()
        if any(n.lower().replace("_", "-") in dists for n in names)
    }


def run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter where the modules `blocked` are not installed."""
    prefix = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
    return subprocess.run(
        [sys.executable, "-c", prefix + code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_require_returns_the_module_or_one_line_naming_the_extra() -> None:
    assert require("cel", "json").__name__ == "json"
    with pytest.raises(MissingExtraError) as err:
        require("browser", "no_such_module_tb.async_api", "a browser action")
    exc = err.value
    assert isinstance(exc, ConfigError) and isinstance(exc, ImportError)
    assert exc.code == "ERR_MISSING_EXTRA" and exc.extra == "browser" and exc.name == "no_such_module_tb"
    assert exc.message == (
        "a browser action needs the 'browser' extra (no_such_module_tb is not installed): "
        "pip install 'toolbridge[browser]'"
    )
    assert "\n" not in str(exc) and exc.__cause__ is None and exc.__suppress_context__


def test_every_optional_module_maps_to_the_extra_that_installs_it() -> None:
    for module, extra in EXTRA_OF.items():
        assert extra in EXTRAS, f"{module}: no extra {extra!r} in pyproject.toml"
        top = module.partition(".")[0]
        assert top in modules_of_extra(extra), f"toolbridge[{extra}] does not install {module}"
    assert extra_of("playwright.async_api") == "browser" and extra_of("json") is None
    assert extra_of("opentelemetry.sdk.trace") == "otel-sdk" and extra_of("opentelemetry.trace") == "otel"
    assert install_line("ray") == "pip install 'toolbridge[ray]'"


# (what, module blocked, code that reaches the import, the extra named)
SITES = [
    (
        "model string",
        "openai",
        "import os; os.environ['OPENAI_API_KEY'] = 'sk-test-key'\n"
        "from toolbridge.agent import model_from_string\nmodel_from_string('openai:gpt-4o-mini')",
        "openai",
    ),
    (
        "model class",
        "anthropic",
        "import anyio\nfrom toolbridge import AnthropicModel, ModelRequest\n"
        "m = AnthropicModel('claude-x', api_key='sk-test-key')\n"
        "anyio.run(m.request, ModelRequest(messages=()))",
        "anthropic",
    ),
    (
        "google model class",
        "google",
        "import anyio\nfrom toolbridge import GeminiModel, ModelRequest\n"
        "m = GeminiModel('gemini-x', api_key='sk-test-key')\n"
        "anyio.run(m.request, ModelRequest(messages=()))",
        "google",
    ),
    ("ray", "ray", "from toolbridge.batch._ray import start_local_cluster\nstart_local_cluster(1)", "ray"),
    (
        "postgres journal",
        "psycopg",
        "from toolbridge.runtime import PostgresJournal\nPostgresJournal('postgresql://u@127.0.0.1:9/db')",
        "postgres",
    ),
    (
        "postgres pool",
        "psycopg_pool",
        "from toolbridge.runtime import PostgresJournal\nPostgresJournal('postgresql://u@127.0.0.1:9/db')",
        "postgres",
    ),
    (
        "postgres migrate",
        "psycopg",
        "from toolbridge.runtime._journal_postgres import migrate\nmigrate('postgresql://u@127.0.0.1:9/db')",
        "postgres",
    ),
    ("langchain adapter", "langchain_core", "import toolbridge.integrations.langchain", "langchain"),
    ("pydantic-ai adapter", "pydantic_ai", "import toolbridge.integrations.pydantic_ai", "pydantic-ai"),
    ("openai-agents adapter", "agents", "import toolbridge.integrations.openai_agents", "openai-agents"),
    (
        "browser actions",
        "playwright",
        "import anyio\nfrom toolbridge.tasks.actions.browser import BrowserSession\n"
        "anyio.run(BrowserSession().page)",
        "browser",
    ),
]


@pytest.mark.parametrize(("what", "blocked", "code", "extra"), SITES, ids=[s[0] for s in SITES])
def test_each_lazy_import_names_its_extra(what: str, blocked: str, code: str, extra: str) -> None:
    out = run_without(
        [blocked],
        "from toolbridge import MissingExtraError\ntry:\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
        + "except MissingExtraError as exc:\n    print(exc.code, exc.extra, exc.message)\n",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith(f"ERR_MISSING_EXTRA {extra} "), out.stdout
    assert f"pip install 'toolbridge[{extra}]'" in out.stdout and out.stdout.count("\n") == 1
