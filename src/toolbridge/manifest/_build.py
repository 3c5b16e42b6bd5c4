"""Turning a checked manifest into live objects, and closing them again.

`load_manifest(path)` runs the analyzer and refuses a manifest with errors, so nothing is built
from a file that `toolbridge check` would reject. `Manifest.open()` then builds, in dependency
order, every document an agent needs:

| kind | becomes |
|---|---|
| `Mcp.StdioClient` / `Mcp.HttpClient` | `toolbridge.clients.StdioClient` / `HttpClient` |
| `AiMcp.ToolProvider` | `toolbridge.bridge.McpToolProvider` (in a `PinnedToolProvider` with a `lock`) |
| `Ai.Tools` | `toolbridge.functions.FunctionTools` |
| `Tasks.ToolSet` | `toolbridge.tasks.TaskToolSet` |
| `AiOpenai.OpenaiModel` / `Ai.ScriptedModel` | `toolbridge.agent.OpenAIModel` / `ScriptedModel` |
| `AiAnthropic.AnthropicModel` / `AiGoogle.GeminiModel` | `toolbridge.agent.AnthropicModel` / `GeminiModel` |
| `AiMcp.Tool` | `toolbridge.runtime.define_mcp_tool(...)` |
| `Ai.Agent` | `toolbridge.agent.Agent` |
| `Runtime` | `toolbridge.runtime.create_runtime(...)` |
| Telo's runnable kinds, `Ai.Tools` entries | see `_build_telo` |

Each document is built once and shared by everything that references it (two providers on one
client share its one connection). The other toolbridge packages are imported only here and only
when needed, so `toolbridge check` works in a build without them.

Paths: a stdio server runs in its `cwd`, resolved against the manifest's directory, and by
default in the manifest's directory itself; so relative `args` work from there. A
`Tasks.ToolSet` `file`, an `AiMcp.ToolProvider` `lock` and a `Runtime` `journal` are relative
to the manifest's directory too.

Ownership: `async with manifest.open() as live:` owns every client, provider and runtime it
built, and closes them in reverse order when the block ends, whether it ends normally, by an
error, or by cancellation (Ctrl-C).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, overload, runtime_checkable

from .._extras import extra_of, missing
from .._json import JsonObject, JsonValue
from ..catalog import check_declared
from ..errors import ConfigError
from ._analyzer import MAX_MANIFEST_BYTES, AnalyzedManifest, Diagnostic, ManifestDoc, analyze_file
from ._build_http_auth import http_auth
from ._build_telo import (
    Target,
    http_mode,
    import_attribute,
    make_invocable_tools,
    make_runnable,
    make_telo_kind,
    targets_of,
)
from ._kinds import (
    AgentDoc,
    AnthropicModelDoc,
    GeminiModelDoc,
    HttpClientDoc,
    McpToolDoc,
    OpenaiModelDoc,
    RuntimeDoc,
    ScriptedModelDoc,
    StdioClientDoc,
    TaskToolSetDoc,
    ToolProviderDoc,
    ToolsDoc,
)
from ._secrets import Secret, read_secrets_file
from ._targets import Runnable

if TYPE_CHECKING:
    from ..agent import Agent, AnthropicModel, GeminiModel, Model, OpenAIModel
    from ..clients import McpClient
    from ..runtime import Runtime
    from ..tasks import TaskToolSet
    from ..tools import ToolProvider
    from ._sequence import SequenceResult

_T = TypeVar("_T")


@runtime_checkable
class _AsyncClosable(Protocol):
    async def aclose(self) -> object: ...


@runtime_checkable
class _Closable(Protocol):
    def close(self) -> object: ...


__all__ = ["LiveManifest", "Manifest", "load_manifest"]


def _remote_model(
    model: OpenaiModelDoc | AnthropicModelDoc | GeminiModelDoc,
) -> OpenAIModel | AnthropicModel | GeminiModel:
    """The provider model for an `AiOpenai` / `AiAnthropic` / `AiGoogle` model document."""
    from ..agent import AnthropicModel, GeminiModel, OpenAIModel
    from ..agent.models import ModelPrices

    api_key, base_url = _reveal(model.api_key), _reveal(model.base_url)
    options = dict(model.options) if model.options else None
    prices: ModelPrices | None = None
    if model.prices is not None:
        prices = ModelPrices(
            input_per_million_micros=model.prices.input_per_million_micros,
            output_per_million_micros=model.prices.output_per_million_micros,
            cache_read_per_million_micros=model.prices.cache_read_per_million_micros,
            cache_write_per_million_micros=model.prices.cache_write_per_million_micros,
        )
    if isinstance(model, AnthropicModelDoc):
        return AnthropicModel(
            model.model,
            prompt_caching=model.prompt_caching,
            api_key=api_key,
            base_url=base_url,
            options=options,
            max_retries=model.max_retries,
            prices=prices,
        )
    provider = GeminiModel if isinstance(model, GeminiModelDoc) else OpenAIModel  # the same keywords
    return provider(
        model.model,
        api_key=api_key,
        base_url=base_url,
        options=options,
        max_retries=model.max_retries,
        prices=prices,
    )


_log = logging.getLogger("toolbridge.manifest")


@overload
def _reveal(value: str | Secret) -> str: ...
@overload
def _reveal(value: str | Secret | None) -> str | None: ...
def _reveal(value: str | Secret | None) -> str | None:
    """The real value of a field that may hold a `Secret` (only called while building)."""
    if isinstance(value, Secret):
        return value.reveal()
    return value


@dataclass
class Manifest:
    """A manifest that passed the analyzer.

    Attributes:
        analysis: what the analyzer found (documents, positions, warnings).
    """

    analysis: AnalyzedManifest

    @property
    def path(self) -> Path:
        """The manifest file."""
        return self.analysis.path

    @property
    def warnings(self) -> list[Diagnostic]:
        """Warnings of the analysis (errors would have stopped `load_manifest`)."""
        return list(self.analysis.diagnostics)

    @property
    def agent_names(self) -> list[str]:
        """Names of the `Ai.Agent` documents, in file order."""
        return [d.name for d in self.analysis.of_kind("Ai.Agent")]

    @property
    def runtime_doc(self) -> RuntimeDoc | None:
        """The manifest's `Runtime` document, if it has one."""
        docs = self.analysis.of_kind("Runtime")
        return docs[0].model if docs and isinstance(docs[0].model, RuntimeDoc) else None

    def runtime_journal(self) -> str | None:
        """The `Runtime` document's journal: a PostgreSQL URL as given, a file path resolved
        against the manifest's directory; None without one (secrets in it revealed: the caller
        opens the journal with it and never shows it)."""
        doc = self.runtime_doc
        if doc is None or doc.journal is None:
            return None
        from ..runtime import is_postgres_url

        given = str(_reveal(doc.journal))
        return given if is_postgres_url(given) else str(self.analysis.base_dir / given)

    def pick_agent(self, name: str | None = None) -> str:
        """The agent to run: `name`, or the only agent of the manifest.

        Raises:
            ConfigError: `ERR_MANIFEST_AGENT` when `name` names no agent, or when it is omitted
                and the manifest has no agent or several.
        """
        names = self.agent_names
        if name is not None:
            if name not in names:
                known = ", ".join(names) or "none"
                raise ConfigError(f"no Ai.Agent named {name!r} (agents: {known})", code="ERR_MANIFEST_AGENT")
            return name
        if len(names) == 1:
            return names[0]
        if not names:
            raise ConfigError(f"{self.path} declares no Ai.Agent", code="ERR_MANIFEST_AGENT")
        raise ConfigError(
            f"{self.path} declares several agents ({', '.join(names)}); choose one with --agent",
            code="ERR_MANIFEST_AGENT",
        )

    def pick_target(self, name: str | None = None, *, agent: str | None = None) -> Target:
        """What `toolbridge run` runs: target `name`, agent `agent`, or the one thing to run.

        Without a name: the application's only target; else the only runnable document.

        Raises:
            ConfigError: `ERR_MANIFEST_TARGET` when `name` names no target or runnable document,
                or when nothing is named and there is not exactly one candidate;
                `ERR_MANIFEST_AGENT` as `pick_agent` for `agent`.
        """
        declared, runnable = targets_of(self.analysis)
        if agent is not None:
            chosen = self.pick_agent(agent)
            return next(t for t in runnable if t.name == chosen)
        if name is not None:
            for target in [*declared, *runnable]:
                if target.name == name:
                    return target
            known = ", ".join(dict.fromkeys(t.name for t in [*declared, *runnable])) or "none"
            raise ConfigError(
                f"no target or runnable document named {name!r} (known: {known})", code="ERR_MANIFEST_TARGET"
            )
        candidates = declared or runnable
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise ConfigError(
                f"{self.path} declares nothing to run (no targets, agents or Ai.Text)",
                code="ERR_MANIFEST_TARGET",
            )
        names = ", ".join(t.name for t in candidates)
        option = "--target" if declared else "--agent or --target"
        raise ConfigError(
            f"{self.path} declares several {'targets' if declared else 'runnable documents'} ({names}); "
            f"choose one with {option}",
            code="ERR_MANIFEST_TARGET",
        )

    def target_sequence(self) -> list[Target]:
        """The application's targets, in order, as `toolbridge run` runs them without
        `--target` (a target whose `when` is false when the manifest loads is left out)."""
        return targets_of(self.analysis)[0]

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LiveManifest]:
        """Build the live objects; close them all when the block ends.

        Raises:
            ConfigError: a part of toolbridge a kind needs is missing, or a constructor
                refused a value (its own code).
        """
        async with AsyncExitStack() as stack:
            live = LiveManifest(manifest=self, _stack=stack)
            yield live


@dataclass
class LiveManifest:
    """The live objects of an open manifest, built on first use and shared.

    Attributes:
        manifest: the manifest.
    """

    manifest: Manifest
    _stack: AsyncExitStack = field(repr=False)
    _built: dict[str, object] = field(default_factory=dict, repr=False)
    _runnables: dict[str, Runnable] = field(default_factory=dict, repr=False)
    _runtime: Runtime | None = field(default=None, repr=False)
    _runtime_built: bool = field(default=False, repr=False)

    def _doc(self, name: str) -> ManifestDoc:
        doc = self.manifest.analysis.docs.get(name)
        if doc is None:
            known = ", ".join(self.manifest.analysis.docs) or "none"
            raise ConfigError(f"no document named {name!r} (documents: {known})", code="ERR_MANIFEST_BUILD")
        return doc

    async def _own(self, obj: _T) -> _T:
        """Register `obj` for closing when the manifest closes."""
        if isinstance(obj, _AsyncClosable):
            self._stack.push_async_callback(obj.aclose)
        elif isinstance(obj, AbstractAsyncContextManager):
            await self._stack.enter_async_context(obj)
        elif isinstance(obj, _Closable):
            self._stack.callback(obj.close)
        return obj

    async def build(self, name: str) -> object:
        """The live object for document `name` (built once, with what it references).

        Raises:
            ConfigError: `ERR_MANIFEST_BUILD` when no document has that name, it is a `Secrets`
                document, or a module its kind needs is not installed; a constructor's own code
                when it refuses a value.
        """
        if name in self._built:
            return self._built[name]
        mdoc = self._doc(name)
        if mdoc.kind == "Runtime":
            return await self.runtime()
        try:
            obj = await self._make(mdoc)
        except ModuleNotFoundError as exc:
            extra = extra_of(exc.name or "")
            if extra is not None:
                raise missing(extra, exc.name or "", f"{mdoc.kind} {mdoc.name}") from None
            if not (exc.name or "").startswith("toolbridge"):
                raise
            raise ConfigError(
                f"{mdoc.kind} {mdoc.name} cannot be built: module {exc.name} is not part of this build",
                code="ERR_MANIFEST_BUILD",
            ) from exc
        self._built[name] = obj
        return obj

    async def build_model(self, name: str) -> Model:
        """`build(name)` for a document the analyzer checked is a model.

        Raises:
            ConfigError: `ERR_MANIFEST_BUILD` when it is not one; as `build`.
        """
        from ..agent import Model

        built = await self.build(name)
        if not isinstance(built, Model):
            raise _not_a(name, built, "a model")
        return built

    async def build_client(self, name: str) -> McpClient:
        """`build(name)` for a document the analyzer checked is an MCP client (as `build_model`)."""
        from ..clients import McpClient

        built = await self.build(name)
        if not isinstance(built, McpClient):
            raise _not_a(name, built, "an MCP client")
        return built

    async def build_provider(self, name: str) -> ToolProvider:
        """`build(name)` for a document the analyzer checked is a tool provider (as `build_model`)."""
        from ..tools import ToolProvider

        built = await self.build(name)
        if not isinstance(built, ToolProvider):
            raise _not_a(name, built, "a tool provider")
        return built

    async def build_of(self, name: str, kind: type[_T], what: str) -> _T:
        """`build(name)` for a document the analyzer checked builds a `kind` (`what`, for the message).

        Raises:
            ConfigError: `ERR_MANIFEST_BUILD` when it is not one; as `build`.
        """
        built = await self.build(name)
        if not isinstance(built, kind):
            raise _not_a(name, built, what)
        return built

    async def build_new(self, name: str) -> object:
        """A new live object for document `name`: not cached, and not closed with the manifest
        (the caller closes it). For a gateway's per-identity upstream clients.

        Raises:
            ConfigError: as `build`.
        """
        from contextlib import AsyncExitStack

        owner, self._stack = self._stack, AsyncExitStack()  # what `_make` registers is dropped
        try:
            return await self._make(self._doc(name))
        finally:
            self._stack = owner

    async def agent(self, name: str | None = None) -> Agent:
        """The `Agent` built from the named `Ai.Agent` document (or the only one).

        Raises:
            ConfigError: `ERR_MANIFEST_AGENT` as `Manifest.pick_agent` says, or as `build`.
        """
        from ..agent import Agent

        return await self.build_of(self.manifest.pick_agent(name), Agent, "an Ai.Agent")

    async def runnable(self, name: str) -> Runnable:
        """The runnable of document `name` (`Ai.Text`, `Ai.Agent`, `McpClient.ToolsCall`, …).

        Raises:
            ConfigError: `ERR_MANIFEST_TARGET` when the document is not runnable; as `build`.
        """
        return await make_runnable(self, name)

    async def run_targets(
        self,
        targets: list[Target] | None = None,
        *,
        on_start: Callable[[Target], None] | None = None,
        on_part: Callable[[Target, JsonObject], None] | None = None,
        on_result: Callable[[Target, JsonObject | None], None] | None = None,
    ) -> SequenceResult:
        """Run the application's targets in order (`Manifest.target_sequence()` by default),
        each seeing the earlier ones' results as `steps.NAME.result`; returns a
        `SequenceResult`. `on_start`, `on_part`, `on_result`: see `run_targets` of
        `toolbridge.manifest._sequence`."""
        from ._sequence import run_targets

        chosen = self.manifest.target_sequence() if targets is None else targets
        return await run_targets(self, chosen, on_start=on_start, on_part=on_part, on_result=on_result)

    async def runtime(self) -> Runtime | None:
        """The governed runtime of the manifest's `Runtime` document, or `None` without one.

        Raises:
            ConfigError: as `build`.
        """
        if not self._runtime_built:
            doc = self.manifest.runtime_doc
            self._runtime = await self._make_runtime(doc) if doc is not None else None
            self._runtime_built = True
        return self._runtime

    # ---------------------------------------------------------------- builders

    async def _make(self, mdoc: ManifestDoc) -> object:
        model = mdoc.model
        base = self.manifest.analysis.base_dir
        if isinstance(model, StdioClientDoc):
            from ..clients import StdioClient

            command, args, env, cwd = _stdio_launch(model, base)
            client_info = model.client_info.model_dump() if model.client_info else None
            return await self._own(
                StdioClient(
                    command,
                    args,
                    env=env,
                    cwd=cwd,
                    client_info=client_info,
                    shutdown_grace_ms=model.shutdown_grace_ms,
                    logger_name=f"toolbridge.server.{mdoc.name}",
                    mode=model.mode,
                    inherit_env=model.inherit_env,
                )
            )
        if isinstance(model, HttpClientDoc):
            from ..clients import HttpClient

            headers = {k: _reveal(v) for k, v in model.headers.items()} if model.headers else None
            client_info = model.client_info.model_dump() if model.client_info else None
            if model.session_provider is not None:
                from ._session_client import ExternalSessionClient

                provider_fn = await self.build(model.session_provider.name)
                assert callable(provider_fn)  # an `Mcp.SessionProvider` is built only when callable
                return await self._own(
                    ExternalSessionClient(
                        _reveal(model.url),
                        provider_fn,
                        headers=headers,
                        protocol_version=model.protocol_version,
                        client_info=client_info,
                    )
                )
            url = _reveal(model.url)
            return await self._own(
                HttpClient(
                    url,
                    headers=headers,
                    client_info=client_info,
                    logger_name=f"toolbridge.server.{mdoc.name}",
                    mode=http_mode(model),
                    auth=http_auth(model.auth, url, base, _reveal) if model.auth is not None else None,
                )
            )
        if isinstance(model, ToolProviderDoc):
            from ..bridge import McpToolProvider

            client = await self.build_client(model.client.name)
            provider: ToolProvider = McpToolProvider(client)
            if model.lock is not None:
                from ..pinning import PinnedToolProvider

                provider = PinnedToolProvider(provider, base / model.lock, server=model.client.name)
            return provider
        if isinstance(model, ToolsDoc):
            from ..functions import FunctionTools

            functions: list[Callable[..., object]] = []
            for spec in model.functions or []:
                fn = import_attribute(spec)
                if not callable(fn):
                    raise ConfigError(f"FunctionTools: {fn!r} is not callable", code="ERR_CONFIG")
                functions.append(fn)
            function_tools = FunctionTools(functions, name=mdoc.name) if model.functions else None
            if model.tools:
                return await make_invocable_tools(self, mdoc.name, model, function_tools)
            return function_tools
        if isinstance(model, TaskToolSetDoc):
            return await self._make_task_tools(mdoc, model)
        if isinstance(model, ScriptedModelDoc):
            from ..agent import ScriptedModel

            turns: list[JsonObject] = []
            for turn in model.turns:
                if turn.tool_calls is not None:
                    calls: list[JsonValue] = [
                        {"name": c.name, "arguments": dict(c.arguments), **({"id": c.id} if c.id else {})}
                        for c in turn.tool_calls
                    ]
                    entry: JsonObject = {"tool_calls": calls}
                    if turn.text:
                        entry["text"] = turn.text
                    turns.append(entry)
                else:
                    turns.append({"text": turn.text or ""})
            return ScriptedModel(turns=turns)
        if isinstance(model, OpenaiModelDoc | AnthropicModelDoc | GeminiModelDoc):
            return await self._own(_remote_model(model))
        if isinstance(model, McpToolDoc):
            from ..runtime import define_mcp_tool

            client = await self.build_client(model.client.name)
            return define_mcp_tool(
                id=model.id,
                version=model.version,
                description=model.description,
                input=dict(model.input),
                output=dict(model.output),
                effects=model.effects,
                capabilities=list(model.capabilities),
                cost_micros=model.cost_micros,
                timeout_ms=model.timeout_ms,
                remote_name=model.remote_name or model.id,
                client=client,
            )
        if isinstance(model, AgentDoc):
            return await self._make_agent(mdoc, model)
        telo = await make_telo_kind(self, mdoc)
        if telo is not None:
            return telo
        raise ConfigError(f"{model.kind} {mdoc.name} is not something to build", code="ERR_MANIFEST_BUILD")

    async def _make_task_tools(self, mdoc: ManifestDoc, model: TaskToolSetDoc) -> TaskToolSet:
        from ..tasks import McpServerConfig, TaskToolSet
        from ._tasks import task_tools_json

        base = self.manifest.analysis.base_dir
        servers: dict[str, McpServerConfig] = {}
        for alias, ref in model.mcp_servers.items():
            target = self._doc(ref.name).model
            if isinstance(target, StdioClientDoc):
                command, args, env, cwd = _stdio_launch(target, base)
                servers[alias] = McpServerConfig(
                    command=command, args=tuple(args), env=env, cwd=cwd, inherit_env=target.inherit_env
                )
            elif isinstance(target, HttpClientDoc):
                servers[alias] = McpServerConfig(url=_reveal(target.url))
        from ..tasks.actions import registry_with

        tool_set = TaskToolSet(
            task_tools_json(model, base),
            registry=registry_with(model.actions, base) if model.actions else None,
            chromium=model.chromium,
            headless=model.headless,
            http_allow=model.http_allow,
            browser_allow=model.browser_allow,
            start_url=model.start_url,
            mcp_servers=servers,
            default_timeout_ms=model.default_timeout_ms,
        )
        return await self._own(tool_set)

    async def _make_agent(self, mdoc: ManifestDoc, model: AgentDoc) -> Agent:
        from ..agent import Agent, ToolBinding, ToolSearch

        bindings = []
        for b in model.tool_providers:
            provider = await self.build_provider(b.provider.name)
            bindings.append(
                ToolBinding(
                    provider=provider,
                    prefix=b.prefix,
                    include=tuple(b.include) if b.include is not None else None,
                    exclude=tuple(b.exclude or ()),
                    effects=b.effects,
                    capabilities=tuple(b.capabilities or ()),
                )
            )
        built = [await self.build(ref.name) for ref in model.tools]
        tools = check_declared(built, "Agent")  # what Agent checks, so the list is typed for it
        tool_search: ToolSearch | int | None = None
        if isinstance(model.tool_search, int):
            tool_search = model.tool_search
        elif model.tool_search is not None:
            search = model.tool_search
            tool_search = ToolSearch(
                threshold=search.threshold,
                pinned=tuple(search.pinned),
                max_results=search.max_results,
                max_working_set=search.max_working_set,
                native=None if search.native == "none" else search.native,
            )
        return Agent(
            await self.build_model(model.model.name),
            bindings,
            name=mdoc.name,
            system=model.system,
            max_steps=model.max_steps,
            on_max_steps=model.on_max_steps,
            on_tool_error=model.on_tool_error,
            max_parallel_tools=model.max_parallel_tools,
            options=dict(model.options) if model.options else None,
            tools=tools,
            tool_search=tool_search,
        )

    async def _make_runtime(self, doc: RuntimeDoc) -> Runtime:
        from ..runtime import create_runtime

        journal = self.manifest.runtime_journal()
        limits = doc.limits.model_dump(exclude_none=True) if doc.limits is not None else None
        runtime = create_runtime(
            profile=doc.profile,
            permissions={"allow": list(doc.permissions.allow)},
            limits=limits,
            journal=journal,
        )
        return await self._own(runtime)


def _not_a(name: str, built: object, what: str) -> ConfigError:
    """The error for document `name` that built `built`, where `what` was needed."""
    return ConfigError(f"{name} is not {what} (it built a {type(built).__name__})", code="ERR_MANIFEST_BUILD")


def _stdio_launch(model: StdioClientDoc, base: Path) -> tuple[str, list[str], dict[str, str] | None, str]:
    """Command, arguments, environment (secrets revealed) and working directory of a stdio server.

    The value of a credential-named variable (`API_KEY`, `GITHUB_TOKEN`, …) written inline is
    registered with the redactor when it has 8 characters or more (`AUTH_MODE: none` is not a
    credential, and scrubbing `none` everywhere would garble every message): it is scrubbed like
    a manifest secret.
    """
    from ..redact import is_credential_name, register_secret

    env = {k: _reveal(v) for k, v in model.env.items()} if model.env is not None else None
    for name, value in (env or {}).items():
        inline = isinstance(value, str) and len(value) >= 8 and value[-1] not in "\r\n"
        if inline and is_credential_name(name):
            register_secret(value, name=name)
    cwd = base if model.cwd is None else base / model.cwd
    return _reveal(model.command), [_reveal(a) for a in model.args], env, str(cwd)


def load_manifest(
    path: str | os.PathLike[str],
    *,
    secrets: Mapping[str, str] | None = None,
    secrets_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    max_bytes: int = MAX_MANIFEST_BYTES,
    tolerate: Callable[[AnalyzedManifest, Diagnostic], bool] | None = None,
) -> Manifest:
    """Analyze a manifest file and return it, ready to `open()`.

    Args:
        path: the manifest.
        secrets: secret values given explicitly (they win over every other source).
        secrets_file: a file of `KEY=VALUE` lines or a YAML/JSON mapping, read before `secrets`.
        env: the environment for secrets (default `os.environ`).
        max_bytes: the largest manifest file read (default 1 MiB).
        tolerate: errors for which it answers True do not refuse the manifest (the gateway over
            stdio tolerates unresolved secrets that only its HTTP clients need).

    Raises:
        ConfigError: when the analyzer finds an error: the code is the first error's code, the
            message lists every error as `file:line:column: CODE: message`, and
            `details["diagnostics"]` holds them as dictionaries. `ERR_MANIFEST_SECRETS_FILE` when
            `secrets_file` cannot be read.
    """
    given: dict[str, str] = {}
    if secrets_file is not None:
        given.update(read_secrets_file(secrets_file))
    given.update(secrets or {})
    analysis = analyze_file(path, secrets=given, env=env, max_bytes=max_bytes)
    errors = [
        d for d in analysis.diagnostics if d.severity == "error" and not (tolerate and tolerate(analysis, d))
    ]
    if errors:
        lines = "; ".join(d.format() for d in errors)
        raise ConfigError(
            f"{len(errors)} error(s) in {path}: {lines}",
            code=errors[0].code,
            details={"diagnostics": [d.to_dict() for d in analysis.diagnostics]},
        )
    return Manifest(analysis=analysis)
