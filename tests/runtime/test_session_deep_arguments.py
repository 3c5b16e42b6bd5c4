"""A governed session plans no call whose arguments nest deeper than the MCP clients send
(`MAX_ARGUMENT_DEPTH`, 64 levels, the arguments object itself level 1): refused with its row
(`not_started`, `INVALID_INPUT`), the tool never runs, never a raw `RecursionError`."""

from __future__ import annotations

from typing import Any

import pytest

from toolbridge.clients import MAX_ARGUMENT_DEPTH
from toolbridge.errors import PolicyError
from toolbridge.functions import FunctionTools
from toolbridge.runtime import create_runtime

ran: list[Any] = []


def echo(x: object = None) -> str:
    """Counts its calls."""
    ran.append(1)
    return "ok"


def nested(levels: int) -> dict[str, Any]:
    """An arguments object nesting `levels` levels, itself included."""
    value: Any = 1
    for _ in range(levels - 1):
        value = {"a": value}
    return {"x": value}


@pytest.mark.parametrize("levels", [MAX_ARGUMENT_DEPTH + 1, 300, 5_000])
async def test_deeper_arguments_are_refused_with_their_row(levels: int) -> None:
    ran.clear()
    runtime = create_runtime(permissions={"allow": ["tool:echo", "effect:read"]})
    try:
        async with runtime.session(
            tool_providers=[{"provider": FunctionTools([echo]), "effects": "read"}]
        ) as s:
            assert await s.call_tool("echo", nested(MAX_ARGUMENT_DEPTH)) is not None  # the bound itself
            with pytest.raises(PolicyError) as info:
                await s.call_tool("echo", nested(levels))
            assert info.value.code == "INVALID_INPUT" and s.result().outcome == "failed"
        rows = [(c.tool_id, c.outcome, c.error_code) for c in runtime.inspect(s.run_id).calls]
        assert rows == [("echo", "succeeded", None), ("echo", "not_started", "INVALID_INPUT")]
        assert ran == [1]
    finally:
        runtime.close()
