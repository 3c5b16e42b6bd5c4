"""The public API: every name in `toolbridge.__all__` resolves, and nothing public is missing."""

from __future__ import annotations

import importlib
import subprocess
import sys

import toolbridge


def test_every_exported_name_resolves() -> None:
    missing = []
    for name in toolbridge.__all__:
        try:
            getattr(toolbridge, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, missing


def test_exports_come_from_their_documented_module() -> None:
    for name, module in toolbridge._EXPORTS.items():
        assert getattr(importlib.import_module(module), name) is getattr(toolbridge, name)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        toolbridge.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_import_is_light() -> None:
    """`import toolbridge` must not pull in the SDK, openai, playwright or OpenTelemetry."""
    code = (
        "import sys, toolbridge, toolbridge.telemetry; "
        "print(sorted(m for m in ('mcp', 'openai', 'playwright', 'opentelemetry') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_package_ships_py_typed() -> None:
    from importlib.resources import files

    assert files("toolbridge").joinpath("py.typed").is_file()
