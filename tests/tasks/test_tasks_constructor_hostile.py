"""`TaskToolSet` built in Python from hostile values: the bounds a tool file read from disk has
(nesting, cycles) and types checked, each one error with a stable code, never a raw exception."""

from __future__ import annotations

from typing import Any

import pytest

from toolbridge.errors import ConfigError
from toolbridge.tasks import TaskToolSet, load_mcp_servers


def deep(n: int) -> dict[str, Any]:
    value: dict[str, Any] = {"type": "string"}
    for _ in range(n):
        value = {"type": "object", "properties": {"a": value}}
    return value


def tool(schema: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
    instruction = {"action": "wait", "params": {"ms": 1, **(params or {})}}
    return {"tools": [{"name": "t", "inputSchema": schema, "task": {"instructions": [instruction]}}]}


def cyclic() -> dict[str, Any]:
    data: dict[str, Any] = {"tools": []}
    data["tools"].append(data)
    return data


@pytest.mark.parametrize(
    "data",
    [
        tool({"type": "object", "properties": {"a": deep(5_000)}}),
        tool({"type": "object"}, {"x": deep(5_000)}),
        tool({"type": "object"}, {"x": deep(101)}),
        cyclic(),
    ],
    ids=["schema-5000", "params-5000", "params-101", "cycle"],
)
def test_too_deep_or_cyclic_is_refused_like_a_file(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        TaskToolSet(data)
    assert info.value.code == "ERR_TASK_FILE" and info.value.details == {"reason": "too_deep"}
    assert "\n" not in info.value.message


def test_the_file_bound_still_admits_what_a_file_may_hold() -> None:
    TaskToolSet(tool({"type": "object"}, {"x": deep(40)}))


@pytest.mark.parametrize(
    "options", [{"step_delay_ms": "5"}, {"default_timeout_ms": None}, {"instruction_timeout_s": True}]
)
def test_options_of_the_wrong_type(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        TaskToolSet(tool({"type": "object"}), **options)
    assert info.value.code == "ERR_CONFIG"


def test_a_deep_mcp_server_configuration() -> None:
    with pytest.raises(ConfigError) as info:
        load_mcp_servers({"mcpServers": {"s": {"command": "x", "env": deep(5_000)}}})
    assert info.value.code == "ERR_CONFIG" and "deeper than 100" in info.value.message
