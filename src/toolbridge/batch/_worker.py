"""A batch worker: one open manifest (its servers started once), one agent, one governed runtime.

Local mode has one worker in the driver's process; Ray mode has one per actor. A worker runs any
number of items concurrently over the same MCP sessions; it never starts a server per run.

`server_limits` caps the calls in flight to a named client document (`Mcp.StdioClient` /
`Mcp.HttpClient`): through a local semaphore, or through a `gate` shared by every Ray actor so the
cap holds across the whole batch.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel

from ..errors import ConfigError, ToolbridgeError
from ..runtime.journal import keep_lease, writer_key

if TYPE_CHECKING:
    from ..agent import Agent
    from ..manifest import LiveManifest
    from ..runtime import Runtime, RuntimeResult

__all__ = ["Worker", "result_line", "secrets_needed"]

Gate = Callable[[str], Awaitable[AbstractAsyncContextManager[None]]]
"""`await gate(server)` returns an async context manager holding one of that server's slots."""


class _GatedClient:
    """A client whose `call_tool` waits for a slot of its server first; everything else passes."""

    def __init__(self, inner: Any, slot: Callable[[], AbstractAsyncContextManager[object]]) -> None:
        self._inner = inner
        self._slot = slot

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        async with self._slot():
            return await self._inner.call_tool(*args, **kwargs)


def secrets_needed(manifest: Any, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of the secrets `manifest` uses (and only those), for a worker that must not
    read the driver's environment."""
    from ..manifest import Secret, SecretSources
    from ..manifest.documents import SecretsDoc

    names: set[str] = set()
    mapping: dict[str, str] = {}

    def walk(value: Any) -> None:
        if isinstance(value, Secret):
            names.update(value.names)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif hasattr(value, "__pydantic_fields__"):
            for field in type(value).__pydantic_fields__:
                walk(getattr(value, field, None))

    for doc in manifest.analysis.docs.values():
        if isinstance(doc.model, SecretsDoc):
            mapping.update(doc.model.env)
        walk(doc.model)
    sources = SecretSources(given=dict(given or {}), mapping=mapping)
    out: dict[str, str] = {}
    for name in sorted(names):
        value = sources.lookup(name)
        if value is not None:
            out[name] = value
    return out


def result_line(item_id: str | int, line: int, result: RuntimeResult) -> dict[str, object]:
    """The output line of a finished run (camelCase keys, as `toolbridge run --json`)."""
    output = result.output
    structured = output if not isinstance(output, str) else None
    return {
        "id": item_id,
        "line": line,
        "outcome": result.outcome,
        "text": result.text,
        "output": _jsonable(structured),
        "errorCode": result.error_code,
        "error": result.error_message,
        "usage": dict(result.usage),
        "costMicros": result.cost_micros,
        "runId": result.run_id,
    }


def _jsonable(value: object) -> object:
    """`value` as it can be written in a JSON line: a pydantic model dumped, else its repr."""
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return repr(value)


@contextlib.asynccontextmanager
async def _beside_lease(journal: Any, lease_s: float | None) -> AsyncIterator[None]:
    """This process's writer lease held (before the block runs) and kept while the block runs;
    nothing when `lease_s` is `None`. The block's own error comes out as it was raised."""
    if lease_s is None:
        yield
        return
    await journal.ahold_lease(writer_key(journal.writer), time.time() + lease_s)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: keep_lease(journal, lease=lease_s))
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


class Worker:
    """Runs a manifest's agent under its runtime, with the batch's journal.

    Args:
        manifest_path: the manifest file.
        agent: the agent's name (default: the only one).
        journal: the batch journal (an SQLite file or a PostgreSQL URL).
        secrets: explicit secret values; with `env={}` nothing else is read.
        env: the environment secrets may come from (default `os.environ`).
        server_limits: client document name -> calls in flight at most.
        gate: a batch-wide gate for `server_limits` (Ray mode); default a local semaphore each.
        lease_s: hold this process's writer lease in the journal while open, renewed every
            third of it (Ray actors; `runtime._leases`): once it expires, any driver or
            `toolbridge runs reap` settles the runs it left running. `None`: the caller holds it
            (local mode: the driver's process is this worker's).
    """

    def __init__(
        self,
        manifest_path: str,
        *,
        agent: str | None,
        journal: str,
        secrets: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        server_limits: Mapping[str, int] | None = None,
        gate: Gate | None = None,
        lease_s: float | None = None,
    ) -> None:
        self.manifest_path = manifest_path
        self.agent_name = agent
        self.journal = journal
        self.secrets = dict(secrets or {})
        self.env = env
        self.server_limits = dict(server_limits or {})
        self.gate = gate
        self.lease_s = lease_s
        self.runtime: Runtime | None = None
        self.agent: Agent | None = None
        self.max_cost_micros = 0

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Worker]:
        """Start the manifest's servers, build the agent and the runtime; close them all after."""
        from ..manifest import load_manifest
        from ..runtime import create_runtime

        manifest = load_manifest(self.manifest_path, secrets=self.secrets, env=self.env)
        doc = manifest.runtime_doc
        if doc is None:
            raise ConfigError(
                f"{self.manifest_path}: a batch runs governed: the manifest needs a Runtime document",
                code="ERR_BATCH_CONFIG",
            )
        limits = doc.limits.model_dump(exclude_none=True) if doc.limits is not None else None
        runtime = create_runtime(
            profile="durable",
            permissions={"allow": list(doc.permissions.allow)},
            limits=limits,
            journal=self.journal,
        )
        try:
            async with manifest.open() as live, _beside_lease(runtime.journal, self.lease_s):
                for name, cap in self.server_limits.items():
                    await self._gate_server(live, name, cap)
                self.agent = await live.agent(self.agent_name)
                self.runtime = runtime
                self.max_cost_micros = runtime.limits.max_cost_micros
                yield self
        finally:
            runtime.close()

    async def _gate_server(self, live: LiveManifest, name: str, cap: int) -> None:
        mdoc = live.manifest.analysis.docs.get(name)
        if mdoc is None or mdoc.kind not in ("Mcp.StdioClient", "Mcp.HttpClient"):
            raise ConfigError(
                f"--server-limit {name}: no Mcp.StdioClient or Mcp.HttpClient named {name!r}",
                code="ERR_BATCH_CONFIG",
            )
        client = await live.build(name)
        if self.gate is not None:
            gate = self.gate

            @contextlib.asynccontextmanager
            async def slot() -> AsyncIterator[None]:
                async with await gate(name):
                    yield

            live._built[name] = _GatedClient(client, slot)
        else:
            semaphore = anyio.Semaphore(cap)
            live._built[name] = _GatedClient(client, lambda: semaphore)

    def _agent_for_run(self) -> Agent:
        """The agent; a scripted model plays its script from the start in every run."""
        from ..agent.models import ScriptedModel

        assert self.agent is not None, "run inside `open()`"
        if not isinstance(self.agent.model, ScriptedModel):
            return self.agent
        agent = copy.copy(self.agent)
        model = copy.copy(self.agent.model)
        model.requests = []
        agent.model = model
        return agent

    async def run(self, item_id: str | int, line: int, text: str, run_id: str) -> dict[str, object]:
        """Run one item; its output line. A run never raises for a failed run (the runtime's rule)."""
        assert self.runtime is not None, "run inside `open()`"
        try:
            result = await self.runtime.run(self._agent_for_run(), text, run_id=run_id)
        except ToolbridgeError as exc:  # e.g. the run id is already in the journal
            return {
                "id": item_id,
                "line": line,
                "outcome": "failed",
                "text": None,
                "output": None,
                "errorCode": exc.code,
                "error": str(exc),
                "usage": None,
                "costMicros": 0,
                "runId": run_id,
            }
        return result_line(item_id, line, result)


def manifest_dir(path: str) -> str:
    return str(Path(path).resolve().parent)
