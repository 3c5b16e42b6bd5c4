"""Configuration checks and the small building blocks: permissions, limits, budget, effects, tools."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from mcp import Client
from rt_helpers import CraftedClient, Empty, Message
from rt_server import server

from toolbridge._canonical import canonical_json, sha256_hex
from toolbridge.errors import ConfigError, PolicyError, ToolError
from toolbridge.runtime import (
    CODES,
    Budget,
    Limits,
    Permissions,
    ToolContext,
    define_mcp_tool,
    define_tool,
    effective_effects,
)


def make(**over: Any) -> Any:
    options: dict[str, Any] = {
        "id": "a.tool",
        "version": "1",
        "description": "d",
        "input": Empty,
        "output": Message,
        "effects": "none",
        "capabilities": [],
        "execute": lambda i, c: Message(content="x"),
    }
    options.update(over)
    return define_tool(**options)


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"id": "1abc"}, "tool id"),
        ({"id": "a b"}, "tool id"),
        ({"id": "a" * 129}, "tool id"),
        ({"version": ""}, "version"),
        ({"description": "x" * 4097}, "description"),
        ({"effects": "delete"}, "effects"),
        ({"capabilities": "fs:write"}, "capabilities"),
        ({"capabilities": [""]}, "capabilities[0]"),
        ({"cost_micros": -1}, "cost_micros"),
        ({"timeout_ms": 0}, "timeout_ms"),
        ({"input": {"type": "string"}}, "input"),
        ({"input": {"type": 12}}, "input"),
        ({"output": 42}, "output"),
        ({"guards": [1]}, "guards"),
        ({"execute": None}, "execute"),
    ],
)
def test_define_tool_rejects_bad_options(over: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**over)
    assert info.value.code == "ERR_CONFIG"
    assert field in info.value.message


def test_define_mcp_tool_checks_remote_name_and_client() -> None:
    base: dict[str, Any] = {
        "id": "t",
        "version": "1",
        "description": "",
        "input": Empty,
        "output": Message,
        "effects": "read",
        "capabilities": [],
    }
    with pytest.raises(ConfigError, match="remote_name"):
        define_mcp_tool(**base, remote_name="-bad", client=CraftedClient())
    with pytest.raises(ConfigError, match="client"):
        define_mcp_tool(**base, remote_name="ok", client=object())
    tool = define_mcp_tool(**base, remote_name="ok", client=CraftedClient())
    assert tool.spec.name == "t" and tool.spec.output_schema == Message.model_json_schema()


def test_spec_and_json_schema_tools() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = make(input=schema, output={"type": "object"}, execute=lambda i, c: {"double": i["n"] * 2})
    assert tool.spec.parameters == schema and tool.spec.name == "a.tool"
    assert tool.validate_input({"n": 2}) == {"n": 2}
    with pytest.raises(ToolError) as info:
        tool.validate_input({"n": "two"})
    assert info.value.code == "ERR_TOOL_INVALID_INPUT" and "n" in info.value.message


async def test_sync_and_async_execute_get_the_context() -> None:
    seen: list[ToolContext] = []

    async def run(inp: Any, ctx: ToolContext) -> Message:
        seen.append(ctx)
        return Message(content=ctx.call_id)

    tool = make(execute=run)
    result = await tool.call({}, type("Ctx", (), {"run_id": "r1"})(), "c1")
    assert result.structured == {"content": "c1"} and seen[0].run_id == "r1" and not seen[0].cancelled
    tool = make(execute=lambda i, c: {"content": c.tool_id})
    assert (await tool.call({}, None, "c2")).structured == {"content": "a.tool"}


async def test_ungoverned_call_rules() -> None:
    writer = make(effects="write")
    with pytest.raises(PolicyError) as info:
        await writer.call({}, None, "c")
    assert (info.value.code, info.value.outcome) == ("PERMISSION_DENIED", "blocked")
    failing = make(execute=lambda i, c: (_ for _ in ()).throw(RuntimeError("SECRET")))
    with pytest.raises(ToolError) as err:
        await failing.call({}, None, "c")
    assert err.value.code == "ERR_TOOL_FAILED" and "SECRET" not in str(err.value)


async def test_raw_official_client_in_declared_tool_without_runtime() -> None:
    class OkIn(pydantic.BaseModel):
        message: str

    async with Client(server) as client:
        tool = define_mcp_tool(
            id="ok",
            version="1",
            description="",
            input=OkIn,
            output=Message,
            effects="none",
            capabilities=[],
            remote_name="ok",
            client=client,
        )
        result = await tool.call({"message": "hey"}, None, "c")
    assert result.structured == {"content": "hey"}


def test_permissions() -> None:
    perms = Permissions.from_config({"allow": ["tool:a", "effect:write"]})
    assert perms.has("tool:a") and not perms.has("tool:A") and not perms.has("tool:*")
    assert perms.missing(["tool:a", "x"]) == ["x"]
    assert isinstance(perms.grants, frozenset)
    for bad in ({"allow": "tool:a"}, {"deny": []}, {"allow": [""]}, {"allow": ["x" * 257]}, 5):
        with pytest.raises(ConfigError):
            Permissions.from_config(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="4096"):
        Permissions([f"g{i}" for i in range(4097)])


def test_effects_from_annotations_only_tighten() -> None:
    assert effective_effects(None, None) == "write"
    assert effective_effects("read", {"readOnlyHint": True}) == "read"
    assert effective_effects("write", {"readOnlyHint": True}) == "write"
    assert effective_effects("read", {"destructiveHint": True}) == "write"
    assert effective_effects("none", {"readOnlyHint": False}) == "write"
    assert effective_effects("host", {"destructiveHint": True}) == "host"
    with pytest.raises(ConfigError):
        effective_effects("all", None)


def test_limits_accept_both_spellings_and_refuse_unknown_names() -> None:
    limits = Limits.from_config({"maxSteps": 3, "max_tool_calls": 0, "maxCostMicros": 5})
    assert (limits.max_steps, limits.max_tool_calls, limits.max_cost_micros) == (3, 0, 5)
    assert Limits().max_cost_micros == 0 and Limits().max_duration_ms == 60_000
    for bad in (
        {"maxSteeps": 1},
        {"max_steps": -1},
        {"max_steps": True},
        {"max_duration_ms": 0},
        {"maxSteps": 1, "max_steps": 2},
    ):
        with pytest.raises(ConfigError):
            Limits.from_config(bad)


def test_budget_reserve_and_settle() -> None:
    budget = Budget(100)
    first = budget.reserve(60)
    assert first is not None and budget.reserve(50) is None
    assert budget.settle(first, 10) == 10 and budget.spent == 10 and budget.reserved == 0
    second = budget.reserve(90)
    assert second is not None and budget.settle(second, None) == 90 and budget.spent == 100
    assert budget.settle(second, 5) == 0  # settled once
    assert not budget.over


def test_codes_and_canonical_json() -> None:
    assert CODES["OUTCOME_UNKNOWN"] == "outcome_unknown" and CODES["GUARD_UNAVAILABLE"] == "blocked"
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    assert sha256_hex(canonical_json({"a": 1, "b": 2})) == sha256_hex(canonical_json({"b": 2, "a": 1}))
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


async def test_aliases_are_used_on_the_wire() -> None:
    class AliasIn(pydantic.BaseModel):
        file_path: str = pydantic.Field(alias="filePath")

    client = CraftedClient({"structuredContent": {"content": "x"}})
    tool = define_mcp_tool(
        id="t",
        version="1",
        description="",
        input=AliasIn,
        output=Message,
        effects="none",
        capabilities=[],
        remote_name="t",
        client=client,
    )
    assert "filePath" in tool.spec.parameters["properties"]
    await tool.call({"filePath": "/a"}, None, "c")
    assert client.calls == [("t", {"filePath": "/a"})]
