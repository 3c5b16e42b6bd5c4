"""The scheduler without a browser: order, results, fallbacks, controls, progress, limits, http, mcp."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from toolbridge.errors import ConfigError, ToolError
from toolbridge.tasks import (
    ActionContext,
    ActionParams,
    ActionRegistry,
    McpServerConfig,
    Task,
    TaskToolSet,
    default_registry,
)

LOG: list[str] = []


class NoteParams(ActionParams):
    text: str
    ms: int = 0


class FailParams(ActionParams):
    message: str = "it broke"
    kind: str = "tool"


def make_registry() -> ActionRegistry:
    registry = default_registry().copy()

    @registry.action("note")
    async def note(params: NoteParams, ctx: ActionContext) -> dict[str, Any]:
        if params.ms:
            await anyio.sleep(params.ms / 1000)
        LOG.append(params.text)
        return {"text": params.text, "index": ctx.index, "path": ctx.path}

    @registry.action("fail")
    async def fail(params: FailParams, ctx: ActionContext) -> None:
        if params.kind == "tool":
            raise ToolError(params.message, code="ERR_TOOL_ACTION_FAILED")
        raise RuntimeError(params.message)

    return registry


REGISTRY = make_registry()


def tools(*defs: dict[str, Any]) -> dict[str, Any]:
    out = []
    for d in defs:
        out.append(
            {
                "name": d["name"],
                "description": d.get("description", ""),
                "inputSchema": d.get("inputSchema", {"type": "object", "properties": {}}),
                "task": {"instructions": d["instructions"]},
            }
        )
    return {"tools": out}


def note(text: str, ms: int = 0, **extra: Any) -> dict[str, Any]:
    return {"action": "note", "params": {"text": text, "ms": ms}, **extra}


async def started_task(toolset: TaskToolSet) -> Task:
    """The next task the tool set's scheduler creates, once its first instruction is about to run."""
    created: list[Task] = []
    event = anyio.Event()

    def on_created(task: Task) -> None:
        created.append(task)
        event.set()

    toolset.scheduler.on_created = on_created
    with anyio.fail_after(5):
        await event.wait()
        await created[0].wait_started()
    return created[0]


TestFn = Callable[..., Awaitable[None]]


def with_tools(*defs: dict[str, Any], **options: Any) -> Callable[[TestFn], TestFn]:
    """Run the test with a fresh `TaskToolSet` of `defs` passed as `toolset` (closed afterwards)."""

    def decorate(fn: TestFn) -> TestFn:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> None:
            LOG.clear()
            async with TaskToolSet(tools(*defs), registry=REGISTRY, **options) as ts:
                await fn(*args, toolset=ts, **kwargs)

        sig = inspect.signature(fn)
        wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p for name, p in sig.parameters.items() if name != "toolset"]
        )
        return wrapper

    return decorate


@with_tools(
    {
        "name": "steps",
        "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "instructions": [
            note("a", id="first"),
            note("{{who}}-{{first.text}}"),
            {"action": "result", "params": {"value": {"first": "{{first}}", "n": 2}}},
            note("after"),
        ],
    }
)
async def test_instructions_run_in_order_and_results_are_kept(toolset: TaskToolSet) -> None:
    outcome = await toolset.run("steps", {"who": "Ada"})
    assert LOG == ["a", "Ada-a", "after"]
    env = outcome.envelope
    assert env["status"] == "success" and env["index"] == 3
    assert env["result"] == {"first": {"text": "a", "index": 0, "path": "task.instructions[0]"}, "n": 2}
    assert env["instruction"] == note("after")
    assert [r["text"] if isinstance(r, dict) and "text" in r else r for r in outcome.results][:2] == [
        "a",
        "Ada-a",
    ]
    call = outcome.to_call_result()
    assert call["isError"] is False and call["structuredContent"] == env
    assert call["content"] == [{"type": "text", "text": outcome.text()}]


@with_tools(
    {
        "name": "boom",
        "instructions": [note("a"), {"action": "fail", "params": {"message": "no such row"}}, note("c")],
    },
    {
        "name": "crash",
        "instructions": [{"action": "fail", "params": {"message": "bad state", "kind": "python"}}],
    },
)
async def test_a_failing_instruction_ends_the_task_with_an_actionable_message(toolset: TaskToolSet) -> None:
    outcome = await toolset.run("boom", {})
    env = outcome.envelope
    assert env["status"] == "error" and env["index"] == 1
    assert env["instruction"]["action"] == "fail"
    assert env["error"]["message"] == "task.instructions[1] (fail): no such row"
    assert LOG == ["a"], "nothing runs after the failure"
    assert outcome.to_call_result()["isError"] is True
    crash = (await toolset.run("crash", {})).envelope
    assert crash["error"]["message"] == "task.instructions[0] (fail) failed: RuntimeError: bad state"
    assert "Traceback" not in crash["error"]["message"]


@with_tools(
    {
        "name": "recover",
        "instructions": [
            {
                "action": "fail",
                "params": {"message": "first"},
                "catchInstruction": {
                    "action": "fail",
                    "params": {"message": "second"},
                    "catchInstruction": note("recovered"),
                },
            },
            note("next"),
        ],
    },
    {
        "name": "hopeless",
        "instructions": [
            {
                "action": "fail",
                "params": {"message": "one"},
                "catchInstruction": {"action": "fail", "params": {}},
            }
        ],
    },
)
async def test_catch_instruction_recovers_recursively(toolset: TaskToolSet) -> None:
    outcome = await toolset.run("recover", {})
    assert outcome.envelope["status"] == "success"
    assert LOG == ["recovered", "next"]
    assert outcome.results[0]["path"] == "task.instructions[0].catchInstruction.catchInstruction"
    env = (await toolset.run("hopeless", {})).envelope
    assert env["status"] == "error" and env["index"] == 0
    assert "one; then its catchInstruction failed" in env["error"]["message"]
    assert "task.instructions[0].catchInstruction (fail): it broke" in env["error"]["message"]


@with_tools(
    {"name": "slow", "instructions": [note("a"), {"action": "wait", "params": {"ms": 20000}}, note("never")]},
    {"name": "quick", "instructions": [note("quick")]},
)
async def test_stop_gives_partial_completed_and_frees_the_scheduler(toolset: TaskToolSet) -> None:
    outcome: Any = None

    async def run() -> None:
        nonlocal outcome
        outcome = await toolset.run("slow", {})

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        task = await started_task(toolset)
        await anyio.sleep(0.2)  # "a" is done at once; the long wait is running
        assert task.index == 1
        task.stop()
    assert time.monotonic() - started < 5, "stop cancels the running wait"
    env = outcome.envelope
    assert env["status"] == "partial completed" and env["index"] == 1
    assert env["instruction"]["action"] == "wait"
    assert "stopped" in env["error"]["message"]
    assert outcome.to_call_result()["isError"] is True
    assert LOG == ["a"]
    assert (await toolset.run("quick", {})).envelope["status"] == "success"


@with_tools({"name": "three", "instructions": [note("a", ms=150), note("b"), note("c"), note("d")]})
async def test_pause_resume_and_skip(toolset: TaskToolSet) -> None:
    outcome: Any = None
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def run() -> None:
        nonlocal outcome
        outcome = await toolset.run("three", {}, on_progress)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        task = await started_task(toolset)
        task.pause()  # the running instruction ("a") finishes first
        await anyio.sleep(0.4)
        assert LOG == ["a"] and task.state == "paused"
        task.skip()  # drops "b", continues
        await anyio.sleep(0.05)
    assert LOG == ["a", "c", "d"]
    assert outcome.envelope["status"] == "success"
    assert any(m and m.startswith("paused before step 2") for _, _, m in progress)
    values = [v for v, _, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values), "progress keeps increasing"


@with_tools({"name": "p", "instructions": [note("a"), note("b"), note("c")]})
async def test_progress_per_instruction(toolset: TaskToolSet) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    await toolset.run("p", {}, on_progress)
    assert seen == [
        (0, 3, "step 1 of 3: note"),
        (1, 3, "step 2 of 3: note"),
        (2, 3, "step 3 of 3: note"),
        (3, 3, "done"),
    ]


@with_tools(
    {
        "name": "t",
        "inputSchema": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        "instructions": [note("{{k}}-1", ms=30), note("{{k}}-2", ms=10)],
    }
)
async def test_tasks_run_one_at_a_time_in_submission_order(toolset: TaskToolSet) -> None:
    async with anyio.create_task_group() as tg:
        for k in "xyz":
            tg.start_soon(toolset.run, "t", {"k": k})
            await anyio.sleep(0.005)  # submission order x, y, z
    assert LOG == ["x-1", "x-2", "y-1", "y-2", "z-1", "z-2"]


@with_tools(
    {"name": "long", "instructions": [{"action": "wait", "params": {"ms": 20000}}]},
    {"name": "short", "instructions": [note("ok")]},
)
async def test_a_cancelled_call_releases_the_scheduler(toolset: TaskToolSet) -> None:
    with anyio.move_on_after(0.2) as scope:
        await toolset.run("long", {})
    assert scope.cancelled_caught
    assert toolset.scheduler.current is None and toolset.scheduler.queued == []
    with anyio.fail_after(2):
        assert (await toolset.run("short", {})).envelope["status"] == "success"


@with_tools(
    {"name": "slow", "instructions": [note("a", ms=2000)]},
    {"name": "paced", "instructions": [note("a"), note("b"), note("c")]},
    instruction_timeout_s=0.2,
    step_delay_ms=100,
)
async def test_instruction_timeout_and_step_delay(toolset: TaskToolSet) -> None:
    env = (await toolset.run("slow", {})).envelope
    assert env["status"] == "error" and "did not finish within 0.2 s" in env["error"]["message"]
    started = time.monotonic()
    await toolset.run("paced", {})
    assert time.monotonic() - started >= 0.2, "two delays between three steps"


@with_tools(
    {
        "name": "args",
        "inputSchema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "who": {"type": "string"}},
            "required": ["n"],
        },
        "instructions": [note("start"), note("hi {{who}}")],
    }
)
async def test_problems_found_before_the_start_run_nothing(toolset: TaskToolSet) -> None:
    env = (await toolset.run("args", {"n": "three"})).envelope
    assert env["status"] == "error" and env["index"] == -1
    assert "arguments.n: 'three' is not of type 'integer'" in env["error"]["message"]
    env = (await toolset.run("args", {"n": 3})).envelope
    assert env["index"] == -1 and "argument 'who' was not given" in env["error"]["message"]
    assert "task.instructions[1].params.text" in env["error"]["message"]
    assert LOG == [], "nothing ran"


@with_tools(
    {"name": "ok", "instructions": [{"action": "result", "params": {"value": [1, 2]}}]},
    {"name": "bad", "instructions": [{"action": "fail", "params": {"message": "nope"}}]},
)
async def test_tool_provider_interface(toolset: TaskToolSet) -> None:
    specs = await toolset.list_tools()
    assert [s.name for s in specs] == ["ok", "bad"]
    assert specs[0].output_schema is not None and "status" in specs[0].output_schema["properties"]
    result = await toolset.call_tool("ok", {})
    assert result.kind == "structured" and result.structured["result"] == [1, 2]
    with pytest.raises(ToolError) as info:
        await toolset.call_tool("bad", {})
    assert info.value.code == "ERR_TOOL_TASK_FAILED"
    assert info.value.details["envelope"]["status"] == "error"
    assert "nope" in str(info.value) and info.value.server_text is not None
    with pytest.raises(ConfigError) as cinfo:
        await toolset.call_tool("missing", {})
    assert cinfo.value.code == "ERR_TASK_UNKNOWN_TOOL"


# --- http ------------------------------------------------------------------------------------------------


def _http_tools(site: str) -> dict[str, Any]:
    return tools(
        {
            "name": "get",
            "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}},
            "instructions": [{"action": "http", "params": {"url": "{{url}}"}}],
        },
        {
            "name": "post",
            "instructions": [
                {
                    "action": "http",
                    "params": {"url": f"{site}/api/echo", "method": "POST", "json": {"a": [1]}},
                }
            ],
        },
    )


async def test_http_action_respects_the_allow_list(site: str) -> None:
    port = site.rsplit(":", 1)[1]
    async with TaskToolSet(_http_tools(site), registry=REGISTRY, http_allow=[f"127.0.0.1:{port}"]) as ts:
        env = (await ts.run("get", {"url": f"{site}/api/echo?x=1"})).envelope
        assert env["status"] == "success"
        assert env["result"]["status"] == 200 and env["result"]["body"] == {"path": "/api/echo?x=1"}
        env = (await ts.run("post", {})).envelope
        assert env["result"]["body"] == {"received": {"a": [1]}}
        env = (await ts.run("get", {"url": f"{site}/api/fail"})).envelope
        assert env["status"] == "error" and "answered 503" in env["error"]["message"]
        env = (await ts.run("get", {"url": "http://127.0.0.1:1/x"})).envelope
        assert "host 127.0.0.1:1 is not on this server's allow list" in env["error"]["message"]
    async with TaskToolSet(_http_tools(site), registry=REGISTRY) as ts:
        env = (await ts.run("get", {"url": f"{site}/api/echo"})).envelope
        assert env["status"] == "error" and "allow list" in env["error"]["message"]


# --- mcp ----------------------------------------------------------------------------------------------------


async def test_mcp_action_calls_a_tool_of_another_server(time_server_cmd: list[str]) -> None:
    servers = {"clock": McpServerConfig(command=time_server_cmd[0], args=tuple(time_server_cmd[1:]))}
    data = tools(
        {
            "name": "now",
            "instructions": [
                {
                    "action": "mcp",
                    "id": "t",
                    "params": {
                        "server": "clock",
                        "tool": "get_current_time",
                        "arguments": {"timezone": "UTC"},
                    },
                },
                {"action": "result", "params": {"value": {"tz": "{{t.timezone}}"}}},
            ],
        },
        {
            "name": "bad",
            "instructions": [{"action": "mcp", "params": {"server": "clock", "tool": "no_such_tool"}}],
        },
        {"name": "unknown", "instructions": [{"action": "mcp", "params": {"server": "nope", "tool": "x"}}]},
    )
    async with TaskToolSet(data, registry=REGISTRY, mcp_servers=servers) as ts:
        env = (await ts.run("now", {})).envelope
        assert env["status"] == "success", env
        assert env["result"] == {"tz": "UTC"}
        client = ts.services.mcp_client("clock")
        pid = getattr(client, "pid", None)
        assert pid is not None
        assert (await ts.run("now", {})).envelope["status"] == "success"
        assert getattr(client, "pid", None) == pid, "one connection per server, reused"
        env = (await ts.run("bad", {})).envelope
        assert env["status"] == "error" and "clock.no_such_tool" in env["error"]["message"]
        env = (await ts.run("unknown", {})).envelope
        assert "no server named 'nope'" in env["error"]["message"] and "clock" in env["error"]["message"]


def test_mcp_server_config_validation() -> None:
    with pytest.raises(ConfigError):
        McpServerConfig()
    with pytest.raises(ConfigError, match="unknown keys"):
        McpServerConfig.from_json("x", {"command": "a", "argz": []})
    assert McpServerConfig.from_json("x", {"url": "http://h/mcp"}).url == "http://h/mcp"


@with_tools(
    {"name": "long", "instructions": [{"action": "wait", "params": {"ms": 20000}}]},
    {"name": "short", "instructions": [note("ok")]},
)
async def test_a_call_cancelled_while_queued_leaves_the_queue(toolset: TaskToolSet) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(toolset.run, "long", {})
        first = await started_task(toolset)
        with anyio.move_on_after(0.2):
            await toolset.run("short", {})  # waits behind "long", then is cancelled
        assert toolset.scheduler.queued == []
        first.stop()
    assert LOG == [], "the cancelled call never ran"
    assert (await toolset.run("short", {})).envelope["status"] == "success"


def _with_output_schema(data: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    data["tools"][0]["outputSchema"] = schema
    return data


async def test_a_result_that_does_not_fit_the_output_schema_is_an_error() -> None:
    data = tools(
        {
            "name": "typed",
            "inputSchema": {"type": "object", "properties": {"v": {}}},
            "instructions": [{"action": "result", "params": {"value": {"count": "{{v}}"}}}],
        }
    )
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    async with TaskToolSet(_with_output_schema(data, schema), registry=REGISTRY) as ts:
        assert (await ts.run("typed", {"v": 3})).envelope["status"] == "success"
        env = (await ts.run("typed", {"v": "three"})).envelope
        assert env["status"] == "error"
        assert env["error"]["message"] == (
            "the task's result does not match the tool's outputSchema: "
            "result.count: 'three' is not of type 'integer'"
        )


@with_tools({"name": "never", "instructions": [note("never")]})
async def test_a_task_stopped_before_its_turn_runs_nothing(toolset: TaskToolSet) -> None:
    toolset.scheduler.on_created = lambda task: task.stop()
    outcome = await toolset.run("never", {})
    assert outcome.envelope["status"] == "partial completed" and outcome.envelope["index"] == 0
    assert LOG == []
