"""Declared tools: tools whose schema, effects, capabilities, cost and timeout come from you.

`define_tool` wraps a Python function; `define_mcp_tool` wraps **one** tool of an MCP server,
reached through a client you connected yourself. Nothing is taken from the server: not the
schema, not the description, not the effects, not the cost. A change on the server therefore
cannot change what an agent may do with the tool.

A declared tool is what the agent expects in `Agent(..., tools=[...])`: it has an `id`, a `spec`
(`ToolSpec` with `name == id`, the input JSON Schema as `parameters`, the output JSON Schema as
`output_schema`) and `async call(args, ctx, call_id) -> ToolResult`.

**Under a runtime** (`Runtime.run`), the runtime drives the tool step by step (input validation,
journal, `request_sent`, the call under `timeout_ms`, result acceptance, output validation,
guards) and never uses `call`. **Without a runtime** (a bare `agent.run`), `call` refuses every
tool whose effects are not `none` with `PolicyError` / `PERMISSION_DENIED`: such a tool needs
grants, and only a runtime holds grants. A tool with effects `none` runs with the same
validation, timeout and guards.

**What an MCP tool must return.** The client's `call_tool` must give the MCP tool result, as a
wire-form dict or an SDK `CallToolResult` (dumped by alias). It is accepted only when:

- it is an object whose top-level keys are among `content`, `structuredContent`, `isError`,
  `_meta` (and the protocol's own `resultType: "complete"`); `_meta` and `resultType` are dropped;
- its canonical JSON is at most 1 MiB;
- `isError` is absent or `false`;
- it has `structuredContent` (text-only results are never parsed into data);
- `structuredContent` passes the declared `output` schema.

The tool's value is then the validated `structuredContent`. Violations fail with codes
`ERR_TOOL_FAILED` or `ERR_TOOL_INVALID_OUTPUT`, whose messages never quote the server.
"""

from __future__ import annotations

import functools
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeAlias, TypedDict, runtime_checkable

import anyio
import anyio.to_thread
import jsonschema  # type: ignore[import-untyped]
import pydantic
from typing_extensions import Unpack

from .._canonical import canonical_json
from .._deadlines import takes_deadline
from .._json import JsonObject
from .._schema_loops import schema_hazard
from ..errors import ConfigError, PolicyError, ToolError
from ..tools import ToolResult, ToolSpec
from ._guards import Guard, GuardContext, check_guards, run_guards
from ._permissions import EFFECTS, ToolGrantNeeds
from ._schema_fast import Prover, compile_prover

__all__ = [
    "MAX_RESULT_BYTES",
    "DeclaredTool",
    "McpClientLike",
    "McpTool",
    "PythonTool",
    "ToolContext",
    "define_mcp_tool",
    "define_tool",
]

MAX_RESULT_BYTES: Final = 1024 * 1024
"""The largest MCP tool result accepted (canonical JSON size of the whole result)."""

_ID_RE: Final = re.compile(r"^[A-Za-z][A-Za-z0-9._/-]{0,127}$")
_REMOTE_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
_ALLOWED_KEYS: Final = frozenset({"content", "structuredContent", "isError", "_meta", "resultType"})
_PROVABLE_DRAFTS: Final = frozenset(
    {
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    }
)
"""The drafts whose `type`, `properties`, `required`, `additionalProperties` and `items` mean what
`_schema_fast` assumes (draft 3's `required` is a boolean in each property)."""
MAX_DESCRIPTION: Final = 4096
MAX_VERSION: Final = 64
MAX_CAPABILITIES: Final = 64
GUARD_TIMEOUT_S: Final = 5.0


class McpClientLike(Protocol):
    """Anything with an async `call_tool(name, arguments, ...)`: a toolbridge client or `mcp.Client`."""

    def call_tool(self, name: str, arguments: JsonObject, /) -> Awaitable[object]: ...


SchemaSource: TypeAlias = type[pydantic.BaseModel] | Mapping[str, object]
"""What a tool's `input` or `output` is declared with: a pydantic model class or a JSON Schema dict."""


@runtime_checkable
class _HasRunId(Protocol):
    """An agent's context that names its run (`call` reads `run_id` from it when it has one)."""

    run_id: object


class _ToolOptions(TypedDict, total=False):
    """The options every declared tool takes (`DeclaredTool.__init__`'s keywords)."""

    id: str
    version: str
    description: str
    input: SchemaSource
    output: SchemaSource
    effects: str
    capabilities: Sequence[str]
    cost_micros: int
    timeout_ms: int
    guards: Sequence[Guard] | Guard


@dataclass
class ToolContext:
    """What `execute(input, ctx)` is told about its call.

    Attributes:
        run_id: the run (with `call_id`, a stable idempotency key for the remote side).
        call_id: the call.
        tool_id: the tool.
        signal: set when the call is cancelled or times out; sync code may poll it.
    """

    run_id: str
    call_id: str
    tool_id: str
    _signal: threading.Event | None = field(default=None, repr=False, compare=False)

    @property
    def signal(self) -> threading.Event:
        """Set when the call is cancelled or times out (made on first use)."""
        if self._signal is None:
            self._signal = threading.Event()
        return self._signal

    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled or timed out."""
        return self._signal is not None and self._signal.is_set()


class _Schema:
    """A declared schema: a pydantic model class or a JSON Schema dict."""

    def __init__(self, schema: object, where: str, *, require_object: bool) -> None:
        self.model: type[pydantic.BaseModel] | None = None
        self.validator: jsonschema.protocols.Validator | None = None
        self._prove: Prover | None = None
        if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
            self.model = schema
            self.json_schema: JsonObject = schema.model_json_schema()
        elif isinstance(schema, Mapping):
            self.json_schema = {str(key): value for key, value in schema.items()}
            hazard = schema_hazard(self.json_schema)
            if hazard is not None:
                raise ConfigError(f"{where} is not a usable JSON Schema: it {hazard}")
            cls = jsonschema.validators.validator_for(
                self.json_schema, default=jsonschema.Draft202012Validator
            )
            try:
                cls.check_schema(self.json_schema)
            except jsonschema.SchemaError as exc:
                raise ConfigError(f"{where} is not a valid JSON Schema: {exc.message}") from None
            self.validator = cls(self.json_schema)
            if cls in _PROVABLE_DRAFTS:  # the plain cases proven valid before the validator runs
                self._prove = compile_prover(self.json_schema)
        else:
            raise ConfigError(f"{where} must be a pydantic model class or a JSON Schema dict")
        if require_object and self.json_schema.get("type", "object") != "object":
            raise ConfigError(f"{where} must describe an object (type 'object')")

    def validate(self, value: object) -> object:
        """The validated value (a model instance, or the value itself); raises ValueError."""
        if self.model is not None:
            try:
                return self.model.model_validate(value)
            except pydantic.ValidationError as exc:
                raise ValueError(
                    f"{exc.error_count()} validation error(s): {_pydantic_summary(exc)}"
                ) from None
        assert self.validator is not None
        prove = self._prove
        if prove is not None and prove(value):  # proven with exact types (see `_schema_fast`)
            return value
        if self.validator.is_valid(value):  # the common case, without collecting errors
            return value
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise ValueError(f"at {where}: {error.message}")
        return value

    def dump(self, value: object) -> object:
        """JSON data for a validated value."""
        if isinstance(value, pydantic.BaseModel):
            return value.model_dump(mode="json", by_alias=True)
        return value


def _is_async(fn: object) -> bool:
    """True for an async function or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _pydantic_summary(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = "/".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)


def _tool_error(code: str, message: str) -> ToolError:
    return ToolError(message, code=code)


class DeclaredTool:
    """A governed tool: declared id, version, schemas, effects, capabilities, cost, timeout, guards.

    Build one with `define_tool` or `define_mcp_tool`. Attributes are read-only by convention.
    """

    kind: str = "declared"
    _needs: ToolGrantNeeds | None = None

    def __init__(
        self,
        *,
        id: str,
        version: str,
        description: str,
        input: SchemaSource,
        output: SchemaSource,
        effects: str,
        capabilities: Sequence[str],
        cost_micros: int = 0,
        timeout_ms: int = 30_000,
        guards: Sequence[Guard] | Guard = (),
    ) -> None:
        if not isinstance(id, str) or not _ID_RE.match(id):
            raise ConfigError(
                "tool id must start with a letter and hold only letters, digits and ._/- "
                f"(at most 128 characters); got {id!r}"
            )
        where = f"tool {id!r}"
        if not isinstance(version, str) or not version or len(version) > MAX_VERSION:
            raise ConfigError(
                f"{where}: version must be a non-empty string of at most {MAX_VERSION} characters"
            )
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise ConfigError(
                f"{where}: description must be a string of at most {MAX_DESCRIPTION} characters"
            )
        if effects not in EFFECTS:
            raise ConfigError(f"{where}: effects must be one of {', '.join(EFFECTS)}; got {effects!r}")
        if isinstance(capabilities, str) or not isinstance(capabilities, Sequence):
            raise ConfigError(f"{where}: capabilities must be a list of strings (pass [] for none)")
        caps = tuple(capabilities)
        if len(caps) > MAX_CAPABILITIES:
            raise ConfigError(f"{where}: at most {MAX_CAPABILITIES} capabilities are allowed")
        for i, cap in enumerate(caps):
            if not isinstance(cap, str) or not cap or len(cap) > 256:
                raise ConfigError(
                    f"{where}: capabilities[{i}] must be a non-empty string of at most 256 chars"
                )
        if isinstance(cost_micros, bool) or not isinstance(cost_micros, int) or cost_micros < 0:
            raise ConfigError(f"{where}: cost_micros must be a non-negative integer")
        if (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int)
            or not 1 <= timeout_ms <= 3_600_000
        ):
            raise ConfigError(f"{where}: timeout_ms must be an integer from 1 to 3600000")
        self.id = id
        self.version = version
        self.description = description
        self.effects = effects
        self.capabilities: tuple[str, ...] = caps
        self.cost_micros = cost_micros
        self.timeout_ms = timeout_ms
        self.guards: tuple[Guard, ...] = check_guards(guards, f"{where}: guards")
        self._input = _Schema(input, f"{where}: input", require_object=True)
        self._output = _Schema(output, f"{where}: output", require_object=False)
        self._spec = ToolSpec(
            name=id,
            description=description,
            parameters=self._input.json_schema,
            output_schema=self._output.json_schema,
        )

    def grant_needs(self) -> ToolGrantNeeds:
        """What a call of this tool needs (`tool:<id>`, capabilities, effects), built once.

        Rebuilt when `id`, `effects` or `capabilities` were replaced since (they are read-only
        by convention; the check is three identity comparisons).
        """
        needs = self._needs
        if (
            needs is None
            or needs.tool_id is not self.id
            or needs.effects is not self.effects
            or needs.capabilities is not self.capabilities
        ):
            needs = self._needs = ToolGrantNeeds(self.id, self.effects, self.capabilities)
        return needs

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it (`name == id`)."""
        return self._spec

    @property
    def input_schema(self) -> JsonObject:
        """The input JSON Schema."""
        return self._input.json_schema

    @property
    def output_schema(self) -> JsonObject:
        """The output JSON Schema."""
        return self._output.json_schema

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, version={self.version!r}, effects={self.effects!r})"

    # -- the steps a runtime drives ------------------------------------------------------------

    def validate_input(self, args: object) -> object:
        """Validate the arguments; returns what `execute` receives.

        Raises:
            ToolError: `ERR_TOOL_INVALID_INPUT` naming where the arguments are wrong.
        """
        try:
            return self._input.validate(args)
        except ValueError as exc:
            raise _tool_error(
                "ERR_TOOL_INVALID_INPUT", f"arguments of tool {self.id!r} are invalid {exc}"
            ) from None

    def input_json(self, validated: object) -> JsonObject:
        """The JSON arguments for a validated input."""
        data = validated if type(validated) is dict else self._input.dump(validated)  # a dict is JSON data
        # (validated against the input schema: JSON data whose keys are strings)
        return dict(data) if type(data) is dict or isinstance(data, Mapping) else {}

    def validate_output(self, value: object) -> object:
        """Validate a value against the output schema; returns its JSON data.

        Raises:
            ToolError: `ERR_TOOL_INVALID_OUTPUT` (the message never quotes the value).
        """
        try:
            validated = self._output.validate(value)
        except ValueError:
            raise _tool_error(
                "ERR_TOOL_INVALID_OUTPUT", f"tool {self.id!r} returned a value its output schema rejects"
            ) from None
        if type(validated) is dict:  # a plain dict is its own JSON data (what `dump` returns)
            return validated
        try:
            return self._output.dump(validated)
        except Exception:
            raise _tool_error(
                "ERR_TOOL_INVALID_OUTPUT", f"tool {self.id!r} returned a value that is not JSON data"
            ) from None

    def send(self, validated: object, ctx: ToolContext) -> Awaitable[object]:
        """Run the tool (or send the request); returns its raw response."""
        raise NotImplementedError

    def send_until(self, validated: object, deadline: float) -> Awaitable[object] | None:
        """`send`, with `deadline` (event-loop time) enforced by the tool's own transport, which
        raises `TimeoutError` when it passes; None (the default) when the tool has no such
        transport and the runtime must bound the call with a cancel scope of its own."""
        return None

    def accept(self, raw: object) -> object:
        """Check a raw response and return the validated output as JSON data.

        Raises:
            ToolError: `ERR_TOOL_FAILED` or `ERR_TOOL_INVALID_OUTPUT`.
        """
        raise NotImplementedError

    # -- the ungoverned path ---------------------------------------------------------------------

    async def call(self, args: Mapping[str, object], ctx: object, call_id: str) -> ToolResult:
        """Run the tool for an agent that has no runtime.

        Only tools with effects `none` may run this way; the input is validated, the call is
        bounded by `timeout_ms`, the output validated and passed through the tool's guards.

        Raises:
            PolicyError: `PERMISSION_DENIED` when the effects are not `none` (run it under a
                runtime); `GUARD_BLOCKED` / `GUARD_UNAVAILABLE` from the tool's guards.
            ToolError: `ERR_TOOL_INVALID_INPUT`, `ERR_TOOL_INVALID_OUTPUT`, `ERR_TOOL_FAILED` or
                `ERR_TOOL_TIMEOUT` (generic messages; the tool's own error text is not kept).
        """
        if self.effects != "none":
            raise PolicyError(
                f"tool {self.id!r} has effects {self.effects!r} and runs only under a runtime "
                "that grants it (create_runtime(...).run(agent, input))",
                code="PERMISSION_DENIED",
                outcome="blocked",
            )
        run_id = str(ctx.run_id or "") if isinstance(ctx, _HasRunId) else ""
        validated = self.validate_input(args)
        tctx = ToolContext(run_id=run_id, call_id=call_id, tool_id=self.id)
        try:
            with anyio.fail_after(self.timeout_ms / 1000):
                try:
                    raw = await self.send(validated, tctx)
                except BaseException:
                    tctx.signal.set()  # failed or cancelled (as the governed path does)
                    raise
        except TimeoutError:
            tctx.signal.set()
            raise _tool_error(
                "ERR_TOOL_TIMEOUT", f"tool {self.id!r} did not finish within {self.timeout_ms} ms"
            ) from None
        except ToolError as exc:
            raise _tool_error(exc.code, f"tool {self.id!r} failed") from None
        except PolicyError:
            raise
        except Exception:
            raise _tool_error("ERR_TOOL_FAILED", f"tool {self.id!r} failed") from None
        value = self.accept(raw)
        if self.guards:
            value = await run_guards(
                self.guards,
                value,
                GuardContext(run_id=run_id, stage="tool_result", tool_id=self.id, call_id=call_id),
                timeout_ms=int(GUARD_TIMEOUT_S * 1000),
                revalidate=self.validate_output,
            )
        return ToolResult.of_structured(value)


class PythonTool(DeclaredTool):
    """A declared tool run by a Python function (`define_tool`)."""

    kind = "declared"

    def __init__(self, *, execute: Callable[..., object], **options: Unpack[_ToolOptions]) -> None:
        super().__init__(**options)
        if not callable(execute):
            raise ConfigError(f"tool {self.id!r}: execute must be callable")
        self.execute = execute

    async def send(self, validated: object, ctx: ToolContext) -> object:
        fn = self.execute
        if _is_async(fn):
            try:
                running = fn(validated, ctx)
                assert inspect.isawaitable(running)  # an async function's call is its coroutine
                return await running
            except BaseException:
                ctx.signal.set()
                raise
        signal = ctx.signal  # made here, before the thread can look at it
        try:
            result = await anyio.to_thread.run_sync(
                functools.partial(fn, validated, ctx), abandon_on_cancel=True
            )
        except BaseException:
            signal.set()  # a sync execute still running in its thread sees `cancelled`
            raise
        if inspect.isawaitable(result):
            return await result
        return result

    def accept(self, raw: object) -> object:
        return self.validate_output(raw)


def _envelope(raw: object, tool_id: str) -> dict[str, object]:
    if type(raw) is dict:  # a toolbridge client's wire form: no ABC checks
        return dict(raw)
    if isinstance(raw, pydantic.BaseModel):
        try:
            raw = raw.model_dump(by_alias=True, exclude_none=True, mode="json")
        except Exception:
            raise _tool_error(
                "ERR_TOOL_FAILED", f"MCP tool {tool_id!r} returned a result that cannot be read"
            ) from None
    if not isinstance(raw, Mapping):
        raise _tool_error("ERR_TOOL_FAILED", f"MCP tool {tool_id!r} did not return a result object")
    return dict(raw)


class McpTool(DeclaredTool):
    """One remote MCP tool, declared (`define_mcp_tool`)."""

    kind = "mcp"

    def __init__(self, *, remote_name: str, client: McpClientLike, **options: Unpack[_ToolOptions]) -> None:
        super().__init__(**options)
        if not isinstance(remote_name, str) or not _REMOTE_RE.match(remote_name):
            raise ConfigError(
                f"tool {self.id!r}: remote_name must start with a letter or digit and hold only letters, "
                f"digits and ._/- (at most 128 characters); got {remote_name!r}"
            )
        call_tool = getattr(client, "call_tool", None)
        if not callable(call_tool):
            raise ConfigError(
                f"tool {self.id!r}: client must have an async call_tool(name, arguments) method"
            )
        self.remote_name = remote_name
        self.client = client

    def send(self, validated: object, ctx: ToolContext) -> Awaitable[object]:
        """The client's `call_tool` coroutine itself, with no layer around it (a layer is paid
        again at every suspension of the call). The runtime sets `ctx.signal` when it fails or is
        cancelled, as it does for every declared tool."""
        return self.client.call_tool(self.remote_name, self.input_json(validated))

    def send_until(self, validated: object, deadline: float) -> Awaitable[object] | None:
        """The call with the runtime's deadline given to a toolbridge client, which enforces it
        in the call's one cancel scope together with its own (a governed call then enters one
        scope, not two); None for another client (`mcp.Client`, a user's own, a subclass or an
        instance that replaces `call_tool`)."""
        if not takes_deadline(self.client):
            return None
        call_tool: Callable[..., Awaitable[object]] = self.client.call_tool  # a toolbridge client's
        return call_tool(self.remote_name, self.input_json(validated), deadline=deadline)

    def accept(self, raw: object) -> object:
        envelope = dict(raw) if type(raw) is dict else _envelope(raw, self.id)  # a client's wire dict
        extra = sorted(set(envelope) - _ALLOWED_KEYS)
        if extra or envelope.get("resultType", "complete") != "complete":
            raise _tool_error(
                "ERR_TOOL_FAILED", f"MCP tool {self.id!r} returned a result with unexpected fields"
            )
        try:
            size = len(canonical_json(envelope))
        except (TypeError, ValueError):
            raise _tool_error(
                "ERR_TOOL_FAILED", f"MCP tool {self.id!r} returned a result that is not JSON"
            ) from None
        if size > MAX_RESULT_BYTES:
            raise _tool_error(
                "ERR_TOOL_FAILED", f"MCP tool {self.id!r} returned a result over {MAX_RESULT_BYTES} bytes"
            )
        is_error = envelope.get("isError", False)
        if not isinstance(is_error, bool):
            raise _tool_error("ERR_TOOL_FAILED", f"MCP tool {self.id!r} returned a non-boolean isError")
        if is_error:  # an answer: the runtime journals it `failed` (`TOOL_ERROR`), not unknown
            raise ToolError(
                f"MCP tool {self.id!r} reported an error", code="ERR_TOOL_FAILED", details={"is_error": True}
            )
        if envelope.get("structuredContent") is None:
            raise _tool_error("ERR_TOOL_FAILED", f"MCP tool {self.id!r} returned no structuredContent")
        return self.validate_output(envelope["structuredContent"])


def define_tool(
    id: str,
    version: str,
    description: str,
    input: SchemaSource,
    output: SchemaSource,
    effects: str,
    capabilities: Sequence[str],
    cost_micros: int = 0,
    timeout_ms: int = 30_000,
    guards: Sequence[Guard] | Guard = (),
    *,
    execute: Callable[..., object],
) -> DeclaredTool:
    """Declare a tool run by a Python function.

    Args:
        id: the tool's id: a letter, then letters, digits and `._/-` (at most 128). Used in
            permissions as `tool:<id>` and shown to the model as its name.
        version: change it when the behaviour or a schema changes (recorded in the journal).
        description: for the model (at most 4096 characters).
        input: a pydantic model class or a JSON Schema dict (an object) for the arguments;
            validated before `execute`.
        output: a pydantic model class or a JSON Schema dict; `execute`'s return value is
            validated before anyone sees it.
        effects: `none`, `read`, `write` or `host`.
        capabilities: extra grant names the call needs, for example `["payments:refund"]`;
            pass `[]` for none.
        cost_micros: the most one call can cost, in millionths of a USD (reserved before the call).
        timeout_ms: the longest one call may take.
        guards: guards on the tool's result (see `toolbridge.runtime.Verdict`).
        execute: `execute(input, ctx)`, sync or async; `input` is the validated model instance
            (or dict), `ctx` a `ToolContext` with `run_id`, `call_id` and `cancelled`.

    Returns:
        The declared tool, for `Agent(..., tools=[...])`.

    Raises:
        ConfigError: (`ERR_CONFIG`) naming the first invalid option.
    """
    return PythonTool(
        id=id,
        version=version,
        description=description,
        input=input,
        output=output,
        effects=effects,
        capabilities=capabilities,
        cost_micros=cost_micros,
        timeout_ms=timeout_ms,
        guards=guards,
        execute=execute,
    )


def define_mcp_tool(
    id: str,
    version: str,
    description: str,
    input: SchemaSource,
    output: SchemaSource,
    effects: str,
    capabilities: Sequence[str],
    cost_micros: int = 0,
    timeout_ms: int = 30_000,
    guards: Sequence[Guard] | Guard = (),
    *,
    remote_name: str,
    client: McpClientLike,
) -> DeclaredTool:
    """Declare one tool of an MCP server, reached through `client`.

    Takes the options of `define_tool` except `execute`, plus:

    Args:
        remote_name: the tool's name on the server (a letter or digit, then letters, digits and
            `._/-`, at most 128).
        client: any object with an async `call_tool(name, arguments, ...)`: a toolbridge MCP
            client or the official SDK's `mcp.Client`. Connecting and closing it are yours; the
            runtime only calls `call_tool(remote_name, arguments)`, after every check passed.

    Nothing is read from the server: declare the schema, effects and cost from what you know the
    remote tool does. The result must satisfy the rules in this module's documentation.

    Returns:
        The declared tool.

    Raises:
        ConfigError: (`ERR_CONFIG`) naming the first invalid option.
    """
    return McpTool(
        id=id,
        version=version,
        description=description,
        input=input,
        output=output,
        effects=effects,
        capabilities=capabilities,
        cost_micros=cost_micros,
        timeout_ms=timeout_ms,
        guards=guards,
        remote_name=remote_name,
        client=client,
    )
