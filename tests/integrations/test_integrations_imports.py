"""The adapters are optional: importing toolbridge imports no framework, a missing extra says
which one to install, and every adapter refuses a source it cannot use with one clear error."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from toolbridge.errors import ConfigError

FRAMEWORKS = ("pydantic_ai", "langchain_core", "langgraph", "agents")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_toolbridge_and_the_package_imports_no_framework() -> None:
    out = _run(
        "import sys, toolbridge, toolbridge.integrations, toolbridge.runtime; "
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("pydantic_ai", "pydantic_ai", "toolbridge[pydantic-ai]"),
        ("langchain", "langchain_core", "toolbridge[langchain]"),
        ("openai_agents", "agents", "toolbridge[openai-agents]"),
    ],
)
def test_a_missing_extra_is_an_import_error_naming_it(module: str, blocked: str, extra: str) -> None:
    out = _run(
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "try:\n"
        f"    import toolbridge.integrations.{module}\n"
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ImportError:") and extra in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize("bad", [42, "tools", None, [object()], {"no": "provider"}])
async def test_a_source_of_another_kind_is_one_config_error(bad: Any) -> None:
    from toolbridge.integrations import langchain, openai_agents, pydantic_ai

    with pytest.raises(ConfigError) as err:
        pydantic_ai.toolset(bad)
    assert err.value.code == "ERR_CONFIG"
    with pytest.raises(ConfigError):
        await langchain.as_tools(bad)
    with pytest.raises(ConfigError):
        await openai_agents.as_tools(bad)


def test_model_governors_need_a_session() -> None:
    from toolbridge.integrations import langchain, openai_agents, pydantic_ai

    for make in (pydantic_ai.governed, langchain.governor, openai_agents.run_hooks):
        with pytest.raises(ConfigError) as err:
            make(object())  # type: ignore[arg-type]
        assert err.value.code == "ERR_CONFIG" and "GovernedSession" in err.value.message


def test_from_tools_refuses_what_is_not_a_langchain_tool() -> None:
    from langchain_core.tools import tool

    from toolbridge.integrations.langchain import from_tools

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    with pytest.raises(ConfigError):
        from_tools([echo, "echo"])  # type: ignore[list-item]
    with pytest.raises(ConfigError) as twice:
        from_tools([echo, echo])
    assert "two tools are named 'echo'" in twice.value.message
