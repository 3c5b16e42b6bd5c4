"""`toolbridge check`, `toolbridge run` and `toolbridge schema`: manifests from the command line.

- `check FILE…` prints one line per finding (`file:line:column: severity CODE: message`) and a
  summary; `--json` prints `{ok, errorCount, warningCount, diagnostics}`. Exit 0 when there is
  no error, 1 otherwise.
- `run FILE` runs the same analysis first (and stops with exit 1 on an error), then builds the
  manifest and runs one target: `--target NAME` (a `Telo.Application` target or any runnable
  document: `Ai.Agent`, `Ai.Text`, `Ai.TextStream`, `Ai.AgentStream`, `McpClient.ToolsCall`,
  `McpClient.ToolsList`; see `_run_target`), `--agent NAME`, or the one thing the manifest
  runs. Progress (steps, tool calls with their duration and ok / error CODE, also calls to a
  tool that does not exist) goes to stderr as it happens; the final text goes to stdout.
  `--json` prints only the run result as JSON on stdout. An agent's run exits 0 when it
  succeeded with every tool call ok, 3 when it finished but a tool call failed, 1 when it
  failed. Ctrl-C cancels the run: every server is shut down, the journal records `cancelled`,
  and the exit code is 130.
- `schema` prints the JSON Schema of manifest documents.

Secret values never reach the output: diagnostics name secrets but never show values, and the
values themselves stay inside `Secret` objects until the clients and models are built. Text
that comes from the manifest, a model or a server (diagnostics, tool names, error texts, the
answer) is shown through `visible_text`; `--json` output is exact JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from pydantic import BaseModel

from .._json import JsonObject, JsonValue
from ._parsing import Subcommands

if TYPE_CHECKING:
    from ..agent import Agent, AgentHooks, Model, ModelRequest, PlannedToolCall, RunContext, RunResult
    from ..manifest import Diagnostic, Manifest
    from ..runtime import Event, Runtime, RuntimeResult
    from ..tools import ToolResult
from ..errors import ConfigError, ToolbridgeError
from ..sanitize import visible_text
from ._output import camel_keys, dumps, emit, warn

EXIT_TOOL_FAILED = 3
"""`run`: the run finished, but at least one tool call failed (see docs/cli.md)."""

__all__ = ["register"]


def register(subparsers: Subcommands) -> None:
    """Add `check`, `run` and `schema` to the `toolbridge` command."""
    check = subparsers.add_parser(
        "check",
        help="statically check manifest files",
        description="Check manifest files without starting anything. Exit 0 when clean, 1 on errors.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="manifest files (each one is a manifest)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    _secret_options(check)
    check.set_defaults(handler=_check)

    run = subparsers.add_parser(
        "run",
        help="check a manifest, then run one of its agents or targets",
        description="Check the manifest, build it, and run an agent on the input.",
    )
    run.add_argument("file", metavar="FILE", help="the manifest")
    pick = run.add_mutually_exclusive_group()
    pick.add_argument("--agent", metavar="NAME", help="the Ai.Agent to run (needed when there are several)")
    pick.add_argument("--target", metavar="NAME", help="the target or runnable document to run")
    source = run.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="TEXT", help="the prompt")
    source.add_argument("--input-file", metavar="F", help="read the prompt from a file ('-' for stdin)")
    run.add_argument(
        "--inputs",
        metavar="JSON",
        help="a JSON object of inputs, merged over the target's (e.g. name, arguments)",
    )
    run.add_argument("--json", action="store_true", help="print the run result as JSON")
    run.add_argument(
        "--telo",
        action="store_true",
        help="run as Telo runs the application: its targets in order even when there is one "
        "(--json prints {steps, skipped?, failed?}), and exit 0 when an agent answered though one "
        "of its tool calls failed (otherwise 3)",
    )
    run.add_argument(
        "--trace",
        action="store_true",
        help="print the run's span tree on stderr when it ends (needs toolbridge[otel-sdk])",
    )
    run.add_argument(
        "--host",
        help="where an Mcp.HttpEndpoint or Http.Server target listens (default: the Http.Server's "
        "host, else 127.0.0.1)",
    )
    run.add_argument(
        "--port",
        type=int,
        help="the port of an Mcp.HttpEndpoint or Http.Server target (default: the Http.Server's "
        "port, else 8000; 0 takes a free one)",
    )
    _secret_options(run)
    run.set_defaults(handler=_run)

    schema = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of manifests",
        description="Print the JSON Schema of manifest documents (for editors and the YAML language server).",
    )
    schema.set_defaults(handler=_schema)


def _secret_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a secret value (repeatable); wins over every other source",
    )
    parser.add_argument(
        "--secrets-file",
        metavar="F",
        help="KEY=VALUE lines, or a YAML/JSON mapping of secret names to values",
    )


def _given_secrets(args: argparse.Namespace) -> dict[str, str]:
    from ..manifest import parse_secret_arg, read_secrets_file

    given: dict[str, str] = {}
    if args.secrets_file:
        given.update(read_secrets_file(args.secrets_file))
    for item in args.secret:
        name, value = parse_secret_arg(item)
        given[name] = value
    return given


# ----------------------------------------------------------------------------- check


def _check(args: argparse.Namespace) -> int:
    from ..manifest import check_manifest

    report = check_manifest(args.files, secrets=_given_secrets(args))
    if args.json:
        emit(dumps(report.to_dict()))
        return 0 if report.ok else 1
    for diag in report.diagnostics:
        emit(visible_text(diag.format()))
    files = len(args.files)
    noun = "file" if files == 1 else "files"
    if report.diagnostics:
        emit(f"{report.error_count} error(s), {report.warning_count} warning(s) in {files} {noun}")
    else:
        emit(f"ok: {files} {noun} checked, no problems")
    return 0 if report.ok else 1


# ----------------------------------------------------------------------------- schema


def _schema(args: argparse.Namespace) -> int:
    from ..manifest import manifest_json_schema

    emit(dumps(manifest_json_schema()))
    return 0


# ----------------------------------------------------------------------------- run


def _unneeded_secrets(manifest: Manifest, args: argparse.Namespace) -> list[Diagnostic]:
    """Unresolved secrets of documents the chosen target does not reach (not asked for)."""
    from ..manifest import unneeded_secrets

    try:
        target = manifest.pick_target(args.target, agent=args.agent)
    except ConfigError:
        return []  # reported below, after the diagnostics
    return unneeded_secrets(manifest.analysis, target.document)


def _run(args: argparse.Namespace) -> int:
    from ..manifest import Manifest, analyze_file

    analysis = analyze_file(args.file, secrets=_given_secrets(args))
    manifest = Manifest(analysis=analysis)
    unneeded = _unneeded_secrets(manifest, args) if args.target or args.agent else []
    shown = [d for d in analysis.diagnostics if not any(d is u for u in unneeded)]
    for diag in shown:
        warn(visible_text(diag.format()))
    errors = sum(1 for d in shown if d.severity == "error")
    if errors:
        warn(f"toolbridge: {visible_text(args.file)}: {errors} error(s); nothing was started")
        return 1
    from ..manifest import model_inputs
    from ._run_target import merged_inputs, run_sequence, run_target

    given_inputs = args.input is not None or args.input_file is not None or args.inputs is not None
    sequence = manifest.target_sequence()
    one = args.target is None and args.agent is None and len(sequence) == 1
    if args.telo and one and manifest.runtime_doc is None:
        # Telo's way: the one target runs as a sequence of one (`{steps: ...}` with --json).
        if given_inputs:
            typed = args.input is not None or args.input_file is not None
            inputs = merged_inputs(sequence[0], _read_input(args) if typed else None, args.inputs)
            sequence = [dataclasses.replace(sequence[0], inputs=inputs)]
        return run_sequence(manifest, sequence, args.json, _LiveView(sys.stderr))
    if args.target is None and args.agent is None and len(sequence) > 1 and manifest.runtime_doc is None:
        if given_inputs:
            raise ConfigError(
                f"the application runs {len(sequence)} targets in order; --input and --inputs go to one "
                "target: choose it with --target NAME",
                code="ERR_MANIFEST_TARGET",
            )
        return run_sequence(manifest, sequence, args.json, _LiveView(sys.stderr))
    target = manifest.pick_target(args.target, agent=args.agent)
    if target.kind == "McpServer.StdioServer":  # Telo's MCP server: serve it on stdin/stdout
        from ..manifest import serve_stdio_target

        try:
            asyncio.run(serve_stdio_target(manifest, target.document))
        except KeyboardInterrupt:
            return 130
        return 0
    if target.kind == "McpServer.HttpEndpoint":  # over Streamable HTTP at /mcp
        return _serve_endpoint(manifest, target.document, args.host or "127.0.0.1", args.port, "/mcp")
    if target.kind == "HttpServer.Server":  # Telo's Http.Server mounting one Mcp.HttpEndpoint
        from ..manifest.documents import HttpServerDoc

        web = manifest.analysis.docs[target.document].model
        assert isinstance(web, HttpServerDoc)  # the kind of an `HttpServer.Server` target
        [mounted] = web.mounts
        host, port = args.host or web.host, web.port if args.port is None else args.port
        return _serve_endpoint(manifest, mounted.mount.name, host, port, mounted.path)
    if target.reads_steps:
        raise ConfigError(
            f"target {target.name} reads `steps`, the results of the targets before it: run the whole "
            "application (without --target) to run them in order",
            code="ERR_MANIFEST_TARGET",
        )
    prompt = _read_input(args) if (args.input is not None or args.input_file is not None) else None
    inputs = merged_inputs(target, prompt, args.inputs)
    if target.kind != "Ai.Agent":
        if manifest.runtime_doc is not None:
            raise ConfigError(
                f"{target.kind} {target.document} would run outside the manifest's Runtime "
                f"{manifest.runtime_doc.name}: under a Runtime only Ai.Agent targets run (governed)",
                code="ERR_MANIFEST_TARGET",
            )
        code = run_target(manifest, target, inputs, args.json, _LiveView(sys.stderr))
        return 0 if code == EXIT_TOOL_FAILED and args.telo else code
    given, system, options = model_inputs(f"Ai.Agent {target.document}", inputs)
    view = None if args.json else _LiveView(sys.stderr)
    try:
        outcome = asyncio.run(_run_async(manifest, target.document, given, view, system, options))
    except KeyboardInterrupt:
        warn("toolbridge: interrupted; the run was cancelled and every server shut down")
        return 130
    failed_calls = _failed_calls(outcome)
    if view is not None:
        view.report_unseen(failed_calls)
    if args.json:
        emit(dumps(outcome, default=_json_default))
    else:
        if outcome.get("error"):
            state = visible_text(str(outcome.get("outcome", "failed")))
            warn(f"toolbridge: run {state}: {visible_text(str(outcome['error']))}")
        elif failed_calls:
            noun = "call" if len(failed_calls) == 1 else "calls"
            warn(f"toolbridge: the run finished, but {len(failed_calls)} tool {noun} failed")
        text = outcome.get("text")
        if text:
            emit(visible_text(str(text), multiline=True))
    if outcome.get("outcome") == "cancelled":
        return 130
    if outcome.get("outcome", "succeeded") != "succeeded" or outcome.get("error"):
        return 1
    return EXIT_TOOL_FAILED if failed_calls and not args.telo else 0


def _failed_calls(outcome: Mapping[str, JsonValue]) -> list[tuple[str, str, str | None]]:
    """(call id, tool name, code) of every tool result marked as an error, in order."""
    failed: list[tuple[str, str, str | None]] = []
    for step in _objects(outcome.get("steps")):
        for result in _objects(step.get("toolResults")):
            if result.get("error"):
                call_id, name, code = (
                    str(result.get("toolCallId")),
                    str(result.get("name")),
                    result.get("errorCode"),
                )
                failed.append((call_id, name, code if isinstance(code, str) else None))
    return failed


def _objects(value: JsonValue) -> list[JsonObject]:
    """The objects of a JSON list (none for anything else)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _read_input(args: argparse.Namespace) -> str:
    if args.input is not None:
        return str(args.input)
    from .._bounded import MAX_JSON_FILE_BYTES, InputLimitError, read_text_file

    if args.input_file == "-":  # at most the limit, whatever stdin holds
        text = sys.stdin.read(MAX_JSON_FILE_BYTES + 1)
        if len(text) > MAX_JSON_FILE_BYTES:
            raise ConfigError("the prompt on stdin is longer than 16 MiB", code="ERR_INVALID_INPUT")
        return text
    try:
        return read_text_file(args.input_file, max_bytes=MAX_JSON_FILE_BYTES)
    except InputLimitError as exc:
        raise ConfigError(
            f"--input-file {exc.where(args.input_file)}: the file {exc.message}", code="ERR_INVALID_INPUT"
        ) from None


class _LiveView:
    """Prints a run as it happens: steps, tool calls with duration and ok / error."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started: dict[str, float] = {}
        self.finished: set[str] = set()
        self.step_shown = -1

    def _print(self, line: str) -> None:
        try:
            self.out.write(line + "\n")
            self.out.flush()
        except (OSError, ValueError):  # a closed stderr does not stop the run
            pass

    def step(self, step: int) -> None:
        if step != self.step_shown:
            self.step_shown = step
            self._print(f"step {step + 1}")

    def tool_started(self, step: int, call_id: str, name: str) -> None:
        self.step(step)
        self.started[call_id] = time.monotonic()
        self._print(f"  → {visible_text(name)}")

    def tool_finished(self, step: int, call_id: str, name: str, error: bool, code: str | None) -> None:
        self.step(step)
        began = self.started.pop(call_id, None)
        ms = f"{(time.monotonic() - began) * 1000:.0f} ms" if began is not None else "-"
        status = f"error{f' {visible_text(code)}' if code else ''}" if error else "ok"
        self.finished.add(call_id)
        self._print(f"  {'✗' if error else '✓'} {visible_text(name)} {ms} {status}")

    def report_unseen(self, failed: list[tuple[str, str, str | None]]) -> None:
        """Show failed calls the hooks never saw (a call to a tool that does not exist)."""
        for call_id, name, code in failed:
            if call_id not in self.finished:
                self.finished.add(call_id)
                self._print(f"  ✗ {visible_text(name)} - error{f' {visible_text(code)}' if code else ''}")


async def _run_async(
    manifest: Manifest,
    agent_name: str,
    prompt: str | list[JsonObject],
    view: _LiveView | None,
    system: str | None = None,
    options: JsonObject | None = None,
) -> JsonObject:
    async with manifest.open() as live:
        agent = await live.agent(agent_name)
        runtime = await live.runtime()
        if runtime is not None:
            if system is not None or options is not None:
                raise ConfigError(
                    "under a Runtime an agent takes a prompt or messages, not system or options inputs",
                    code="ERR_INVALID_INPUT",
                )
            return await _run_leased(runtime, agent, prompt, view)
        return await _run_plain(agent, prompt, view, system, options)


async def _run_leased(
    runtime: Runtime, agent: Agent, prompt: str | list[JsonObject], view: _LiveView | None
) -> JsonObject:
    """A governed run whose writer (this process) holds its lease in a durable journal while it
    lives, and settles the runs of writers whose lease expired, as every gateway and batch driver
    does (`runtime.keep_leases`; docs/scale-out.md): if this process dies, any host may settle
    its run once the lease expires."""
    import anyio

    from ..runtime import keep_leases

    async with anyio.create_task_group() as tg:
        tg.start_soon(keep_leases, runtime)
        try:
            outcome = await _run_governed(runtime, agent, prompt, view)
        finally:
            tg.cancel_scope.cancel()
    return outcome


async def _run_plain(
    agent: Agent,
    prompt: str | list[JsonObject],
    view: _LiveView | None,
    system: str | None,
    options: JsonObject | None,
) -> JsonObject:
    hooks = [_live_hooks(view)] if view is not None else None
    try:
        result = await agent.run(prompt, system=system, options=options, hooks=hooks)
    except ToolbridgeError as exc:
        return {"outcome": "failed", "errorCode": exc.code, "error": str(exc)}
    return _result_json(result)


def _live_hooks(view: _LiveView) -> AgentHooks:
    """Agent hooks that show each tool call as it starts and ends (the agent's own seam)."""

    from .. import agent

    class LiveHooks(agent.AgentHooks):
        async def before_model_call(self, ctx: RunContext, model: Model, request: ModelRequest) -> None:
            view.step(int(ctx.step))

        async def before_tool_calls(self, ctx: RunContext, calls: Sequence[PlannedToolCall]) -> None:
            for call in calls:  # a tool that does not exist is never invoked: show it now
                if call.target is None:
                    view.tool_started(int(ctx.step), call.call_id, call.name)
                    view.tool_finished(int(ctx.step), call.call_id, call.name, True, "ERR_AGENT_UNKNOWN_TOOL")

        async def call_tool(
            self, ctx: RunContext, call: PlannedToolCall, invoke: Callable[[], Awaitable[ToolResult]]
        ) -> ToolResult:
            view.tool_started(int(ctx.step), call.call_id, call.name)
            try:
                result = await invoke()
            except ToolbridgeError as exc:
                view.tool_finished(int(ctx.step), call.call_id, call.name, True, exc.code)
                raise
            except Exception:
                view.tool_finished(int(ctx.step), call.call_id, call.name, True, None)
                raise
            view.tool_finished(int(ctx.step), call.call_id, call.name, False, None)
            return result

    return LiveHooks()


async def _run_governed(
    runtime: Runtime, agent: Agent, prompt: str | list[JsonObject], view: _LiveView | None
) -> JsonObject:
    unsubscribe = runtime.subscribe(_runtime_listener(view)) if view is not None else None
    try:
        result = await runtime.run(agent, prompt)
    finally:
        if unsubscribe is not None:
            unsubscribe()
    out = _result_json(result)
    out["outcome"] = result.outcome
    out["runId"] = result.run_id
    out["errorCode"] = result.error_code
    out["costMicros"] = result.cost_micros
    if result.outcome != "succeeded":
        out["error"] = f"{result.error_code}: {result.error_message}"
    return out


def _runtime_listener(view: _LiveView) -> Callable[[Event], None]:
    """Feed the live view from the runtime's events (metadata only: names, timings, codes)."""
    current = {"step": 0}

    def listener(event: Event) -> None:
        data = event.data
        if event.type == "step.started":
            current["step"] = int(data.get("step", 0))
            view.step(current["step"])
        elif event.type == "tool.started":
            view.tool_started(current["step"], str(data.get("call_id")), str(data.get("tool_id")))
        elif event.type == "tool.completed":
            failed = data.get("outcome") != "succeeded"
            code = data.get("code")
            view.tool_finished(
                current["step"],
                str(data.get("call_id")),
                str(data.get("tool_id")),
                failed,
                code if isinstance(code, str) else None,
            )

    return listener


def _result_json(result: RunResult | RuntimeResult) -> JsonObject:
    """The documented JSON form of a run result (camelCase keys, also inside parts and usage)."""
    from ..agent import RunResult
    from ..manifest import camel_json

    records = list(result.steps)
    steps: list[JsonValue] = []
    for step in records:
        steps.append(
            {
                "text": step.text,
                "toolCalls": [
                    {"id": c.tool_call_id, "name": c.name, "arguments": camel_json(dict(c.arguments))}
                    for c in step.tool_calls
                ],
                "toolResults": [
                    {
                        "toolCallId": r.tool_call_id,
                        "name": r.name,
                        "content": camel_json(r.content),
                        "error": r.error,
                        **({"errorCode": r.error_code} if r.error_code else {}),
                    }
                    for r in step.tool_results
                ],
            }
        )
    usage = result.usage
    finish: str | None = result.finish_reason if isinstance(result, RunResult) else None
    if finish is None and records:  # a runtime result: the last step's reason
        finish = records[-1].finish_reason
    return {
        "text": result.text,
        # a runtime's usage is a dict of snake_case counters: its keys are toolbridge's own
        "usage": dict(camel_keys(usage)) if isinstance(usage, Mapping) else camel_json(usage),
        "finishReason": finish,
        "steps": steps,
    }


def _json_default(value: object) -> object:
    from ..manifest import Secret

    if isinstance(value, Secret):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        from ..manifest import camel_json

        out: JsonObject = {"type": type(value).__name__}
        dumped = camel_json(value)
        out.update(dumped if isinstance(dumped, dict) else {})
        return out
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def _serve_endpoint(manifest: Manifest, name: str, host: str, port: int | None, path: str) -> int:
    """Serve the `Mcp.HttpEndpoint` `name` at `path` until interrupted (one line on stderr once
    bound)."""
    from ..manifest import serve_http_target

    port = 8000 if port is None else port
    if not 0 <= port < 65536:
        raise ConfigError(f"--port {port} is not a TCP port", code="ERR_CONFIG")

    def listening(bound_host: str, bound_port: int) -> None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        warn(f"toolbridge: serving {name} at http://{shown}:{bound_port}{path}")

    try:
        asyncio.run(
            serve_http_target(manifest, name, host=host, port=port, on_listening=listening, path=path)
        )
    except KeyboardInterrupt:
        return 130
    return 0
