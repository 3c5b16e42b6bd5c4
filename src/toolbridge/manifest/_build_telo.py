"""Building the Telo kinds: runnables, `Ai.Tools` entries, targets and the HTTP client's modes.

| kind | becomes |
|---|---|
| `Ai.Text` / `Ai.TextStream` | an `Agent` with no tools and one step, as an `AgentRunnable` |
| `Ai.Agent` / `Ai.AgentStream` | the `Agent`, as an `AgentRunnable` (with `steps`) |
| `McpClient.ToolsCall` / `ToolsList` | `ToolsCallRunnable` / `ToolsListRunnable` on the built client |
| `Ai.Tools` with `tools` | `InvocableTools` (with the `functions`, if any) |
| `Mcp.SessionProvider` | the imported callable |

A target is `(name, document, inputs)`: a `Telo.Application` `targets` entry, or any runnable
document by its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ._images import ImageRunnable
from ._kinds import AgentDoc, HttpClientDoc, ToolsDoc
from ._kinds_run import (
    RUNNABLE_KINDS,
    ApplicationDoc,
    GatedTarget,
    ImageDoc,
    OpenaiImageModelDoc,
    SessionProviderDoc,
    TargetEntry,
    TextDoc,
    ToolsCallDoc,
    ToolsListDoc,
    target_name,
)
from ._targets import AgentRunnable, InvocableTools, Runnable, ToolsCallRunnable, ToolsListRunnable
from ._yaml import Cel

if TYPE_CHECKING:
    from ..functions import FunctionTools
    from ._analyzer import AnalyzedManifest, ManifestDoc
    from ._build import LiveManifest

__all__ = [
    "Target",
    "http_mode",
    "import_attribute",
    "make_invocable_tools",
    "make_runnable",
    "make_telo_kind",
    "targets_of",
]


@dataclass(frozen=True)
class Target:
    """Something `toolbridge run` can run.

    Attributes:
        name: the target's name (`--target NAME`).
        document: the name of the document it runs.
        kind: that document's kind.
        inputs: the inputs the manifest gives it.
    """

    name: str
    document: str
    kind: str
    inputs: Mapping[str, object] = field(default_factory=dict)
    """JSON whose values may be `!cel` expressions (over `steps` and `variables`)."""
    when: Cel | None = None
    """`None`, or a `!cel` over `steps` and `variables` evaluated when the target's turn comes."""

    @property
    def reads_steps(self) -> bool:
        """Whether its `inputs` or `when` read an earlier target's result (`steps.NAME`)."""
        return bool(_cels_of((self.inputs, self.when)))


def targets_of(analysis: AnalyzedManifest) -> tuple[list[Target], list[Target]]:
    """The application's declared targets, and every runnable document as a target of its name."""
    declared: list[Target] = []
    app = analysis.application
    if app is not None:
        assert isinstance(app.model, ApplicationDoc)
        for item in app.model.targets:
            when = item.when if isinstance(item, TargetEntry | GatedTarget) else None
            if when is False:
                continue  # Telo's gate is closed: the target is not offered
            if isinstance(item, str):
                continue  # never after the analyzer: it makes a valid bare name a reference
            if isinstance(item, TargetEntry):
                ref = item.invoke
            else:
                ref = item.ref if isinstance(item, GatedTarget) else item
            doc = analysis.docs.get(ref.name)
            if doc is None:
                continue
            inputs = dict(item.inputs or {}) if isinstance(item, TargetEntry) else {}
            declared.append(
                Target(target_name(item), ref.name, doc.kind, inputs, when if isinstance(when, Cel) else None)
            )
    runnable = [Target(d.name, d.name, d.kind) for d in analysis.of_kind(*RUNNABLE_KINDS)]
    return declared, runnable


def _cels_of(value: object) -> list[Cel]:
    if isinstance(value, Cel):
        return [value]
    if isinstance(value, Mapping):
        return [c for v in value.values() for c in _cels_of(v)]
    if isinstance(value, list | tuple):
        return [c for v in value for c in _cels_of(v)]
    return []


def http_mode(model: HttpClientDoc) -> str:
    """The client's protocol `mode` for a `protocolVersion` (see `HttpClientDoc.protocol_version`)."""
    version = model.protocol_version
    if version is None:
        return str(model.mode)
    return version if version >= "2026-07-28" else "legacy"


def import_attribute(spec: str) -> object:
    """The attribute `attr` of module `module` for `"module:attr"` (the name is the manifest's)."""
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)


async def make_runnable(live: LiveManifest, name: str) -> Runnable:
    """The runnable of document `name` (built once; see the module table)."""
    if name in live._runnables:
        return live._runnables[name]
    mdoc = live._doc(name)
    model = mdoc.model
    what = f"{mdoc.kind} {name}"
    runnable: Runnable
    if isinstance(model, TextDoc):
        from ..agent import Agent

        agent = Agent(
            await live.build_model(model.model.name),
            name=name,
            system=model.system,
            options=dict(model.options) if model.options else None,
            max_steps=1,
            on_max_steps="return",
        )
        runnable = AgentRunnable(agent, what, with_steps=False)
    elif isinstance(model, AgentDoc):
        from ..agent import Agent

        runnable = AgentRunnable(await live.build_of(name, Agent, "an agent"), what, with_steps=True)
    elif isinstance(model, ToolsCallDoc):
        runnable = ToolsCallRunnable(await live.build_client(model.client.name), what)
    elif isinstance(model, ToolsListDoc):
        runnable = ToolsListRunnable(await live.build_client(model.client.name), what)
    elif isinstance(model, ImageDoc):
        out = None if model.output_dir is None else live.manifest.analysis.base_dir / model.output_dir
        options = dict(model.options) if model.options else None
        from ..agent.models import OpenAIImageModel

        image_model = await live.build_of(model.model.name, OpenAIImageModel, "an image model")
        runnable = ImageRunnable(image_model, what, name, options, out, model.intent)
    else:
        raise ConfigError(f"{what} is not something to run", code="ERR_MANIFEST_TARGET")
    live._runnables[name] = runnable
    return runnable


async def make_invocable_tools(
    live: LiveManifest, name: str, model: ToolsDoc, functions: FunctionTools | None
) -> InvocableTools:
    """`InvocableTools` for an `Ai.Tools` document with `tools` entries."""
    entries = []
    for entry in model.tools or []:
        runnable = await make_runnable(live, entry.tool.name)
        entries.append(
            (
                entry.name or entry.tool.name,
                entry.description,
                dict(entry.parameters),
                runnable,
                entry.inputs,
                entry.result,
            )
        )
    return InvocableTools(name, entries, functions)


async def make_telo_kind(live: LiveManifest, mdoc: ManifestDoc) -> object:
    """Build a Telo kind that is not runnable on its own (`None` when `mdoc` is none of them)."""
    model = mdoc.model
    if isinstance(model, SessionProviderDoc):
        fn = import_attribute(model.function)
        if not callable(fn):
            raise ConfigError(
                f"Mcp.SessionProvider {mdoc.name}: {model.function} is not callable",
                code="ERR_MANIFEST_BUILD",
            )
        return fn
    if isinstance(model, TextDoc | ToolsCallDoc | ToolsListDoc | ImageDoc):
        return await make_runnable(live, mdoc.name)
    if isinstance(model, OpenaiImageModelDoc):
        from ..agent.models import OpenAIImageModel
        from ._build import _reveal

        return await live._own(
            OpenAIImageModel(
                model.model,
                api_key=_reveal(model.api_key),
                base_url=_reveal(model.base_url),
                options=dict(model.options) if model.options else None,
                max_retries=model.max_retries,
            )
        )
    return None
