"""The agent loop with native tools: bindings, names, errors, limits, concurrency, hooks, output, stream."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from toolbridge.agent import (
    Agent,
    AgentHooks,
    FunctionModel,
    Message,
    ModelRequest,
    PlannedToolCall,
    RunContext,
    ScriptedModel,
    ToolBinding,
    ToolCall,
    Usage,
    model_legal,
)
from toolbridge.agent.models import ModelResponse
from toolbridge.content import ImagePart, TextPart
from toolbridge.errors import AgentError, ConfigError, ModelError, PolicyError, ToolError
from toolbridge.functions import FunctionTools
from toolbridge.tools import ToolResult, ToolSpec

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def broken(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"broken because {reason}")


def tool_messages(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


def text_of(message: Message) -> str:
    assert not isinstance(message.content, str)
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


async def test_multi_step_run_records_steps_and_sums_usage() -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}],
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
            {
                "tool_calls": [{"name": "shout", "arguments": {"text": "five"}, "id": "s1"}],
                "usage": {"input_tokens": 20, "output_tokens": 3},
            },
            {"text": "FIVE it is", "usage": {"input_tokens": 30, "output_tokens": 4}},
        ]
    )
    agent = Agent(model, [FunctionTools([add, shout])], system="You add.")
    result = await agent.run("What is 2+3, loudly?")
    assert result.text == "FIVE it is" and result.output == "FIVE it is"
    assert result.finish_reason == "stop"
    assert result.usage == Usage(60, 9, 69, 3)
    assert len(result.steps) == 3
    first = result.steps[0]
    assert [(c.tool_call_id, c.name, dict(c.arguments)) for c in first.tool_calls] == [
        ("call_0_0", "add", {"a": 2, "b": 3})
    ]
    assert [(r.tool_call_id, r.name, r.content, r.error) for r in first.tool_results] == [
        ("call_0_0", "add", 5, False)
    ]
    assert result.steps[1].tool_results[0].content == [TextPart("FIVE")]
    assert result.steps[1].tool_calls[0].tool_call_id == "s1"
    # What the model saw: the system prompt first, tool specs, then the results in order.
    seen = model.requests[2]
    assert seen.messages[0] == Message("system", "You add.")
    assert [t.name for t in seen.tools] == ["add", "shout"]
    assert [text_of(m) for m in tool_messages(seen)] == ["5", "FIVE"]
    assert result.run_id.startswith("run_")


async def test_prefix_include_exclude_on_bare_names() -> None:
    def secret() -> str:
        """Do not offer."""
        return "x"

    model = ScriptedModel([{"tool_calls": [{"name": "m_add", "arguments": {"a": 1, "b": 1}}]}, {"text": "2"}])
    agent = Agent(
        model,
        [
            ToolBinding(
                FunctionTools([add, shout, secret]),
                prefix="m_",
                include=["add", "secret"],
                exclude=["secret"],
            ),
            {"provider": FunctionTools([shout], name="other"), "prefix": "o_"},
        ],
    )
    result = await agent.run("go")
    assert [t.name for t in model.requests[0].tools] == ["m_add", "o_shout"]
    assert result.steps[0].tool_results[0].content == 2
    targets = {t.model_name: t for t in await agent.resolve_tools()}
    assert targets["m_add"].spec.name == "add" and targets["o_shout"].binding.prefix == "o_"


async def test_collision_names_both_providers() -> None:
    agent = Agent(
        ScriptedModel([{"text": "x"}]),
        [FunctionTools([add], name="first"), FunctionTools([add], name="second")],
    )
    with pytest.raises(AgentError) as info:
        await agent.run("go")
    assert info.value.code == "ERR_AGENT_TOOL_COLLISION"
    assert (
        "'first'" in info.value.message and "'second'" in info.value.message and '"add"' in info.value.message
    )


async def test_names_made_model_legal_and_mapped_back() -> None:
    long_a = "x" * 70 + "_alpha"
    long_b = "x" * 70 + "_beta"
    tools = FunctionTools(name="odd")
    tools.add(lambda: "dotted", name="files.read")  # type: ignore[arg-type, misc]
    tools.add(lambda: "A", name=long_a)  # type: ignore[arg-type, misc]
    tools.add(lambda: "B", name=long_b)  # type: ignore[arg-type, misc]
    legal_a, legal_b = model_legal(long_a), model_legal(long_b)
    assert len(legal_a) == 64 and legal_a != legal_b and legal_a == model_legal(long_a)
    model = ScriptedModel(
        [{"tool_calls": [{"name": "files_read"}, {"name": legal_a}, {"name": legal_b}]}, {"text": "done"}]
    )
    result = await Agent(model, [tools]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["files_read", legal_a, legal_b]
    assert [r.content for r in result.steps[0].tool_results] == [
        [TextPart("dotted")],
        [TextPart("A")],
        [TextPart("B")],
    ]


async def test_names_colliding_inside_one_listing_are_left_out_and_the_rest_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = FunctionTools()
    tools.add(lambda: "1", name="a.b")  # type: ignore[arg-type, misc]
    tools.add(lambda: "2", name="a_b")  # type: ignore[arg-type, misc]
    tools.add(lambda: "3", name="c")  # type: ignore[arg-type, misc]
    model = ScriptedModel([{"text": "x"}, {"text": "y"}])
    agent = Agent(model, [tools])
    with caplog.at_level("WARNING", logger="toolbridge.agent"):
        await agent.run("go")
        await agent.run("again")
    assert [t.name for t in model.requests[0].tools] == ["c"]
    dropped = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(dropped) == 1 and "'a.b', 'a_b'" in dropped[0] and "'a_b'" in dropped[0]


async def test_unknown_tool_feedback_and_throw() -> None:
    model = ScriptedModel(
        [{"tool_calls": [{"name": "ghost"}, {"name": "add", "arguments": {"a": 1, "b": 2}}]}, {"text": "ok"}]
    )
    result = await Agent(model, [FunctionTools([add])]).run("go")
    ghost, real = result.steps[0].tool_results
    assert (ghost.content, ghost.error, ghost.error_code) == (
        'Error: no such tool "ghost".',
        True,
        "ERR_AGENT_UNKNOWN_TOOL",
    )
    assert (real.content, real.error) == (3, False)
    assert text_of(tool_messages(model.requests[1])[0]) == 'Error: no such tool "ghost".'

    model = ScriptedModel([{"tool_calls": [{"name": "ghost"}]}, {"text": "never"}])
    with pytest.raises(AgentError) as info:
        await Agent(model, [FunctionTools([add])], on_tool_error="throw").run("go")
    assert info.value.code == "ERR_AGENT_UNKNOWN_TOOL" and "ghost" in info.value.message
    assert model.remaining == 1


async def test_tool_error_feedback_reaches_the_next_turn_and_throw_raises() -> None:
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "broken", "arguments": {"reason": "the disk is full"}}]},
            {"tool_calls": [{"name": "add", "arguments": {"a": "nope", "b": 1}}]},
            {"text": "gave up"},
        ]
    )
    result = await Agent(model, [FunctionTools([broken, add])]).run("go")
    assert result.text == "gave up"
    failure = result.steps[0].tool_results[0]
    assert failure.error and failure.error_code == "ERR_TOOL_FAILED"
    assert "broken because the disk is full" in text_of(tool_messages(model.requests[1])[0])
    invalid = text_of(tool_messages(model.requests[2])[-1])
    assert invalid.startswith('Error: invalid arguments for tool "add": a:')

    with pytest.raises(ToolError) as info:
        await Agent(
            ScriptedModel([{"tool_calls": [{"name": "broken", "arguments": {"reason": "x"}}]}]),
            [FunctionTools([broken])],
            on_tool_error="throw",
        ).run("go")
    assert info.value.code == "ERR_TOOL_FAILED"


async def test_server_text_of_a_tool_error_is_fed_back() -> None:
    def failing() -> str:
        """Fails like an MCP tool."""
        raise ToolError("tool failed", server_text="ENOENT: no such file 'x.txt'")

    model = ScriptedModel([{"tool_calls": [{"name": "failing"}]}, {"text": "sorry"}])
    await Agent(model, [FunctionTools([failing])]).run("go")
    assert text_of(tool_messages(model.requests[1])[0]) == "Error: tool failed\nENOENT: no such file 'x.txt'"


async def test_policy_error_always_ends_the_run() -> None:
    def refused() -> str:
        """Refused by policy."""
        raise PolicyError("no grant", code="PERMISSION_DENIED")

    model = ScriptedModel([{"tool_calls": [{"name": "refused"}]}, {"text": "never"}])
    with pytest.raises(PolicyError):
        await Agent(model, [FunctionTools([refused])], on_tool_error="feedback").run("go")
    assert model.remaining == 1


async def test_max_steps_throw_and_return() -> None:
    loop = [
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}], "text": f"thinking {i}"}
        for i in range(3)
    ]
    with pytest.raises(AgentError) as info:
        await Agent(ScriptedModel(loop), [FunctionTools([add])], max_steps=2).run("go")
    assert info.value.code == "ERR_AGENT_MAX_STEPS"
    result = await Agent(ScriptedModel(loop), [FunctionTools([add])], max_steps=2, on_max_steps="return").run(
        "go"
    )
    assert result.finish_reason == "max_steps"
    assert result.text == "thinking 1" and len(result.steps) == 2


async def test_calls_of_one_turn_run_concurrently_and_keep_model_order() -> None:
    running, most = 0, 0

    async def slow(label: str, seconds: float) -> str:
        """Sleep, then answer."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        await anyio.sleep(seconds)
        running -= 1
        return label

    def turns() -> list[Any]:
        return [
            {
                "tool_calls": [
                    {"name": "slow", "arguments": {"label": "first", "seconds": 0.5}},
                    {"name": "slow", "arguments": {"label": "second", "seconds": 0.3}},
                ]
            },
            {"text": "done"},
        ]

    model = ScriptedModel(turns())
    result = await Agent(model, [FunctionTools([slow])]).run("go")
    assert most == 2  # both calls were in flight at once
    assert [r.content for r in result.steps[0].tool_results] == [[TextPart("first")], [TextPart("second")]]
    assert [text_of(m) for m in tool_messages(model.requests[1])] == ["first", "second"]

    running, most = 0, 0
    await Agent(ScriptedModel(turns()), [FunctionTools([slow])], max_parallel_tools=1).run("go")
    assert most == 1


async def test_sync_tools_run_in_threads_concurrently() -> None:
    both = threading.Barrier(2, timeout=10)  # passes only when two threads block at once
    threads: set[int] = set()

    def blocking(seconds: float) -> str:
        """Block a thread."""
        threads.add(threading.get_ident())
        both.wait()
        time.sleep(seconds)
        return "ok"

    model = ScriptedModel(
        [{"tool_calls": [{"name": "blocking", "arguments": {"seconds": 0.1}}] * 2}, {"text": "x"}]
    )
    result = await Agent(model, [FunctionTools([blocking])]).run("go")
    assert [r.error for r in result.steps[0].tool_results] == [False, False]
    assert len(threads) == 2 and threading.get_ident() not in threads


async def test_images_structured_and_placeholders() -> None:
    def picture() -> list[Any]:
        """A picture with a caption."""
        return [TextPart("a pixel"), ImagePart(PNG, "image/png")]

    def data() -> dict[str, Any]:
        """Structured."""
        return {"b": [1, 2], "a": "é"}

    def turns() -> list[Any]:
        return [{"tool_calls": [{"name": "picture"}, {"name": "data"}]}, {"text": "seen"}]

    seeing = ScriptedModel(turns())
    await Agent(seeing, [FunctionTools([picture, data])]).run("go")
    picture_msg, data_msg = tool_messages(seeing.requests[1])
    assert picture_msg.content == (TextPart("a pixel"), ImagePart(PNG, "image/png"))
    assert data_msg.content == (TextPart('{"b":[1,2],"a":"é"}'),)

    blind = ScriptedModel(turns(), supports_images=False)
    await Agent(blind, [FunctionTools([picture, data])]).run("go")
    assert tool_messages(blind.requests[1])[0].content == (
        TextPart("a pixel"),
        TextPart("[image: image/png, 70 bytes]"),
    )


async def test_tools_listed_lazily_cached_and_relisted_on_generation_change() -> None:
    class Counting(FunctionTools):
        listings = 0

        async def list_tools(self) -> list[ToolSpec]:
            self.listings += 1
            return await super().list_tools()

    tools = Counting([add])
    model = ScriptedModel([{"text": "1"}, {"text": "2"}, {"text": "3"}])
    agent = Agent(model, [tools])
    assert tools.listings == 0
    await agent.run("a")
    await agent.run("b")
    assert tools.listings == 1
    tools.add(shout)  # bumps the generation
    await agent.run("c")
    assert tools.listings == 2
    assert [t.name for t in model.requests[2].tools] == ["add", "shout"]


class Recorder(AgentHooks):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log
        self.batches: list[Sequence[PlannedToolCall]] = []

    async def before_run(self, ctx: RunContext, messages: Sequence[Any]) -> Sequence[Any]:
        self.log.append(f"{self.label}:before_run")
        return [*messages, Message("user", f"note from {self.label}")]

    async def before_model_call(self, ctx: RunContext, model: Any, request: Any) -> None:
        self.log.append(f"{self.label}:before_model:{ctx.step}")

    async def after_model_call(self, ctx: RunContext, model: Any, request: Any, response: Any) -> None:
        self.log.append(f"{self.label}:after_model:{ctx.step}")

    async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
        self.batches.append(calls)
        self.log.append(f"{self.label}:before_tools:{len(calls)}")

    async def call_tool(self, ctx: RunContext, call: PlannedToolCall, invoke: Any) -> ToolResult:
        self.log.append(f"{self.label}:call:{call.name}:enter")
        result = await invoke()
        self.log.append(f"{self.label}:call:{call.name}:exit")
        return result  # type: ignore[no-any-return]

    async def after_run(self, ctx: RunContext, output: Any) -> Any:
        self.log.append(f"{self.label}:after_run")
        return f"{output} [{self.label}]"


async def test_hooks_order_batches_and_chaining() -> None:
    log: list[str] = []
    outer, inner = Recorder("agent", log), Recorder("run", log)
    model = ScriptedModel(
        [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "ghost"}]}, {"text": "3"}]
    )
    result = await Agent(model, [FunctionTools([add])], hooks=outer).run("go", hooks=inner)
    assert log == [
        "agent:before_run",
        "run:before_run",
        "agent:before_model:0",
        "run:before_model:0",
        "agent:after_model:0",
        "run:after_model:0",
        "agent:before_tools:2",
        "run:before_tools:2",
        "agent:call:add:enter",
        "run:call:add:enter",
        "run:call:add:exit",
        "agent:call:add:exit",
        "agent:before_model:1",
        "run:before_model:1",
        "agent:after_model:1",
        "run:after_model:1",
        "agent:after_run",
        "run:after_run",
    ]
    batch = outer.batches[0]
    assert [(c.call_id, c.name, c.target is None) for c in batch] == [
        ("call_0_0", "add", False),
        ("call_0_1", "ghost", True),
    ]
    assert batch[0].target is not None and batch[0].target.spec.name == "add"
    assert [m.content for m in model.requests[0].messages] == ["go", "note from agent", "note from run"]
    assert result.text == "3 [agent] [run]"


async def test_before_tool_calls_can_refuse_the_whole_batch() -> None:
    ran: list[str] = []

    def effect() -> str:
        """Has an effect."""
        ran.append("effect")
        return "done"

    class Deny(AgentHooks):
        async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
            if any(c.name == "ghost" for c in calls):
                raise PolicyError("ghost is not allowed", code="PERMISSION_DENIED")

    model = ScriptedModel([{"tool_calls": [{"name": "effect"}, {"name": "ghost"}]}])
    with pytest.raises(PolicyError):
        await Agent(model, [FunctionTools([effect])], hooks=Deny()).run("go")
    assert ran == []


class DeclaredEcho:
    """A stand-in for a runtime-declared tool (`DeclaredToolLike`)."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], str, str]] = []

    @property
    def id(self) -> str:
        return "notes.echo"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="notes.echo",
            description="Echo.",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        )

    async def call(self, args: Mapping[str, Any], ctx: RunContext, call_id: str) -> ToolResult:
        self.seen.append((dict(args), ctx.run_id, call_id))
        return ToolResult.of_structured({"echo": args["text"]})


async def test_declared_tools_are_offered_by_legal_id() -> None:
    declared = DeclaredEcho()
    model = ScriptedModel(
        [{"tool_calls": [{"name": "notes_echo", "arguments": {"text": "hi"}, "id": "d1"}]}, {"text": "ok"}]
    )
    result = await Agent(model, tools=[declared]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["notes_echo"]
    assert declared.seen == [({"text": "hi"}, result.run_id, "d1")]
    assert result.steps[0].tool_results[0].content == {"echo": "hi"}


class Answer(BaseModel):
    city: str
    population: int


async def test_output_type_with_a_retry() -> None:
    model = ScriptedModel(
        [
            {"text": "It is Oslo."},
            {"tool_calls": [{"name": "final_result", "arguments": {"city": "Oslo", "population": "many"}}]},
            {"tool_calls": [{"name": "final_result", "arguments": {"city": "Oslo", "population": 709000}}]},
        ]
    )
    result = await Agent(model, output_type=Answer, output_retries=2).run("Capital of Norway?")
    assert result.output == Answer(city="Oslo", population=709000)
    assert result.finish_reason == "stop"
    assert model.requests[0].tools[-1].name == "final_result"
    assert model.requests[0].tools[-1].parameters["required"] == ["city", "population"]
    assert (
        model.requests[1].messages[-1].content == "Give your final answer by calling the final_result tool."
    )
    feedback = text_of(tool_messages(model.requests[2])[-1])
    assert feedback.startswith("Error: the final answer is invalid: population:")
    assert result.messages[-1].role == "tool" and text_of(result.messages[-1]) == "Final answer received."


async def test_output_type_exhausted() -> None:
    bad = {"tool_calls": [{"name": "final_result", "arguments": {"city": "Oslo"}}]}
    with pytest.raises(AgentError) as info:
        await Agent(ScriptedModel([bad, bad, bad]), output_type=Answer, output_retries=1).run("go")
    assert info.value.code == "ERR_AGENT_OUTPUT_INVALID" and "population" in info.value.message


async def test_stream_event_order() -> None:
    model = ScriptedModel(
        [
            {
                "text": "Let me add.",
                "tool_calls": [
                    {"name": "add", "arguments": {"a": 1, "b": 2}},
                    {"name": "shout", "arguments": {"text": "x"}},
                ],
            },
            {"text": "3"},
        ]
    )
    events = [e async for e in Agent(model, [FunctionTools([add, shout])]).stream("go")]
    assert [e.type for e in events] == [
        "text-delta",
        "tool-call-started",
        "tool-call-started",
        "tool-call-finished",
        "tool-call-finished",
        "step-finished",
        "text-delta",
        "step-finished",
        "run-finished",
    ]
    assert events[0].text == "Let me add."  # type: ignore[union-attr]
    assert {e.result.name for e in events if e.type == "tool-call-finished"} == {"add", "shout"}  # type: ignore[union-attr]
    assert events[-1].result.text == "3"  # type: ignore[union-attr]


async def test_stream_error_is_one_terminal_frame() -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "ghost"}]}])
    events = [e async for e in Agent(model, on_tool_error="throw").stream("go")]
    assert [e.type for e in events] == ["tool-call-started", "error"]
    assert events[-1].code == "ERR_AGENT_UNKNOWN_TOOL"  # type: ignore[union-attr]


async def test_streaming_model_deltas_pass_through() -> None:
    class Chunky(ScriptedModel):
        async def request_stream(self, request: ModelRequest) -> Any:
            response = await self.request(request)
            for word in response.text.split(" "):
                yield __import__("toolbridge").agent.TextDelta(word + " ")
            yield response

    events = [e async for e in Agent(Chunky([{"text": "one two three"}])).stream("go")]
    assert [e.text for e in events if e.type == "text-delta"] == ["one ", "two ", "three "]  # type: ignore[union-attr]


async def test_function_model_decides_each_turn() -> None:
    def decide(messages: list[Message], request: ModelRequest) -> Any:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return [{"name": "add", "arguments": {"a": 20, "b": 22}}]
        return f"The answer is {text_of(results[-1])}"

    result = await Agent(FunctionModel(decide), [FunctionTools([add])]).run("go")
    assert result.text == "The answer is 42"

    async def bad(messages: list[Message], request: ModelRequest) -> Any:
        return 42

    with pytest.raises(ModelError) as info:
        await Agent(FunctionModel(bad)).run("go")
    assert info.value.code == "ERR_MODEL_BAD_RESPONSE"


async def test_script_exhausted_fails_loudly() -> None:
    with pytest.raises(ModelError) as info:
        await Agent(
            ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}]),
            [FunctionTools([add])],
        ).run("go")
    assert info.value.code == "ERR_MODEL_SCRIPT_EXHAUSTED"


async def test_input_forms_and_validation() -> None:
    model = ScriptedModel([{"text": "a"}, {"text": "b"}])
    agent = Agent(model, system="agent system")
    await agent.run(
        [{"role": "system", "content": "old"}, {"role": "user", "content": "hi"}], system="run system"
    )
    assert model.requests[0].messages[0] == Message("system", "run system")
    assert len(model.requests[0].messages) == 2
    await agent.run(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "add", "arguments": {}}]},
            {"role": "tool", "content": "3", "tool_call_id": "c"},
        ]
    )
    assert model.requests[1].messages[0] == Message("system", "agent system")
    assert model.requests[1].messages[2].tool_calls == (ToolCall("c", "add", {}),)
    for bad in (
        [{"role": "robot", "content": "x"}],
        [],
        "",
        [{"role": "tool", "content": "x"}],
        42,
        [{"role": "user", "content": 5}],
    ):
        with pytest.raises(ConfigError) as info:
            await agent.run(bad)  # type: ignore[arg-type]
        assert info.value.code == "ERR_INVALID_INPUT"


def test_agent_settings_are_validated() -> None:
    model = ScriptedModel([])
    for kwargs in (
        {"max_steps": 0},
        {"on_max_steps": "later"},
        {"on_tool_error": "ignore"},
        {"max_parallel_tools": 0},
        {"output_type": dict},
    ):
        with pytest.raises(ConfigError):
            Agent(model, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Agent(model, [{"provider": FunctionTools(), "prefx": "a"}])
    with pytest.raises(ConfigError):
        Agent(model, [{"provider": FunctionTools(), "include": "add"}])
    with pytest.raises(ConfigError):
        Agent(model, [ToolBinding(FunctionTools(), effects="delete")])
    with pytest.raises(ConfigError):
        Agent(model, [object()])
    binding = ToolBinding.coerce(
        {"provider": FunctionTools(), "effects": "read", "capabilities": ["fs.read"]}
    )
    assert (binding.effects, binding.capabilities) == ("read", ("fs.read",))


async def test_cancellation_cancels_in_flight_tools_and_leaves_no_task() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    async def slow() -> str:
        """Takes long."""
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "late"

    before = set(asyncio.all_tasks())
    model = ScriptedModel([{"tool_calls": [{"name": "slow"}, {"name": "slow"}]}, {"text": "never"}])
    agent = Agent(model, [FunctionTools([slow])])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.run, "go")
            await started.wait()
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert cancelled == [True, True]
    assert set(asyncio.all_tasks()) == before
    assert model.remaining == 1


async def test_finished_events_are_live_and_closing_the_stream_cancels_the_rest() -> None:
    from contextlib import aclosing

    cancelled: list[str] = []

    async def wait(label: str, seconds: float) -> str:
        """Sleep, then answer."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            cancelled.append(label)
            raise
        return label

    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"name": "wait", "arguments": {"label": "slow", "seconds": 30}},
                    {"name": "wait", "arguments": {"label": "fast", "seconds": 0.05}},
                ]
            },
            {"text": "never"},
        ]
    )
    before = set(asyncio.all_tasks())
    start = time.monotonic()
    seen: list[str] = []
    with anyio.fail_after(5):
        async with aclosing(Agent(model, [FunctionTools([wait])]).stream("go")) as events:
            async for event in events:
                seen.append(event.type)
                if event.type == "tool-call-finished":
                    assert event.result.content == [TextPart("fast")]  # type: ignore[union-attr]
                    break
    assert time.monotonic() - start < 2
    assert seen == ["tool-call-started", "tool-call-started", "tool-call-finished"]
    assert cancelled == ["slow"]
    assert set(asyncio.all_tasks()) == before
    assert model.remaining == 1


async def test_response_forms_for_scripts() -> None:
    with pytest.raises(ConfigError):
        ScriptedModel([{"txt": "typo"}])
    with pytest.raises(ConfigError):
        ScriptedModel([{}])
    model = ScriptedModel([{"toolCalls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}, "plain text"])
    first = await model.request(ModelRequest(messages=(Message("user", "x"),)))
    assert first == ModelResponse(
        tool_calls=(ToolCall("", "add", {"a": 1, "b": 1}),), finish_reason="tool-calls"
    )
    assert (await model.request(ModelRequest(messages=()))).text == "plain text"


async def test_cancelling_a_slow_model_call_leaves_no_task() -> None:
    async def slow_model(messages: list[Message], request: ModelRequest) -> Any:
        await anyio.sleep(30)
        return "late"

    before = set(asyncio.all_tasks())
    with anyio.move_on_after(0.2) as scope:
        await Agent(FunctionModel(slow_model)).run("go")
    assert scope.cancelled_caught
    assert set(asyncio.all_tasks()) == before


async def test_a_provider_listing_failure_is_raised_as_itself() -> None:
    class Down(FunctionTools):
        async def list_tools(self) -> list[ToolSpec]:
            from toolbridge.errors import TransportError

            raise TransportError("server is down")

    with pytest.raises(Exception) as info:
        await Agent(ScriptedModel([{"text": "x"}]), [FunctionTools([add]), Down()]).run("go")
    assert getattr(info.value, "code", None) == "ERR_MCP_TRANSPORT"


async def test_transport_failures_are_fed_back_too() -> None:
    from toolbridge.errors import McpTimeoutError

    def remote() -> str:
        """Times out."""
        raise McpTimeoutError("tools/call 'remote': no answer within 5s; the server was told to cancel")

    model = ScriptedModel([{"tool_calls": [{"name": "remote"}]}, {"text": "it timed out"}])
    result = await Agent(model, [FunctionTools([remote])]).run("go")
    record = result.steps[0].tool_results[0]
    assert record.error and record.error_code == "ERR_MCP_TIMEOUT"
    assert text_of(tool_messages(model.requests[1])[0]).startswith("Error: tools/call 'remote': no answer")


def test_models_satisfy_the_protocol() -> None:
    from toolbridge.agent import Model, OpenAIModel

    for model in (ScriptedModel([]), FunctionModel(lambda m, r: "x"), OpenAIModel("gpt-test", api_key="k")):
        assert isinstance(model, Model)
    assert (ScriptedModel([]).id, FunctionModel(lambda m, r: "x").id) == ("scripted", "function")


async def test_tools_added_during_a_run_are_offered_on_the_next_turn() -> None:
    tools = FunctionTools(name="growing")

    @tools.tool
    def learn() -> str:
        """Registers another tool."""
        tools.add(shout)
        return "learned"

    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "learn"}]},
            {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]},
            {"text": "HI"},
        ]
    )
    result = await Agent(model, [tools]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["learn"]
    assert [t.name for t in model.requests[1].tools] == ["learn", "shout"]
    assert result.steps[1].tool_results[0].content == [TextPart("HI")]


async def test_final_turn_keeps_an_invalid_answer_marked_as_an_error() -> None:
    bad = {"name": "final_result", "arguments": {"city": "Oslo"}, "id": "bad"}
    good = {"name": "final_result", "arguments": {"city": "Oslo", "population": 709000}, "id": "good"}
    model = ScriptedModel([{"tool_calls": [bad, good]}])
    result = await Agent(model, output_type=Answer, output_retries=2).run("go")
    assert result.output == Answer(city="Oslo", population=709000)
    tool_msgs = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error) for m in tool_msgs] == [("bad", True), ("good", False)]
    assert text_of(tool_msgs[0]).startswith("Error: the final answer is invalid: population:")
    assert result.steps[0].tool_results[0].error is True
