"""The kinds that make a manifest a Telo application: the application itself and its targets.

- `Telo.Application`: `imports` (aliases of modules: `Ai`, `AiOpenai`, `AiMcp`, `Mcp`, or any
  alias such as `McpClient` for the MCP client module), `secrets` and `variables` (declared
  values read from the environment, for `!cel` expressions), and `targets` (what
  `toolbridge run` runs).
- `Ai.Text`, `Ai.TextStream`, `Ai.AgentStream`: one-shot text, streamed text, a streamed agent
  run; `Mcp.ToolsCall` and `Mcp.ToolsList`: one MCP request as a runnable document;
  `Mcp.SessionProvider`: where an `Mcp.HttpClient` in external session mode gets its session id.

`ALL_KINDS` is every kind a manifest may use: the base kinds of `_kinds` plus these.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from ._kinds import (
    CLIENT_KINDS,
    KINDS,
    MODEL_KINDS,
    NAME_PATTERN,
    AgentDoc,
    KindDoc,
    PlainJson,
    PlainObject,
    RefTo,
    _Closed,
)
from ._kinds_gateway import GatewayDoc
from ._yaml import Ref

__all__ = [
    "ALL_KINDS",
    "RUNNABLE_KINDS",
    "AgentStreamDoc",
    "ApplicationDoc",
    "SessionProviderDoc",
    "TargetEntry",
    "TextDoc",
    "TextStreamDoc",
    "ToolsCallDoc",
    "ToolsListDoc",
]

RUNNABLE_KINDS = ("Ai.Agent", "Ai.AgentStream", "Ai.Text", "Ai.TextStream", "Mcp.ToolsCall", "Mcp.ToolsList")
"""Kinds `toolbridge run` can run (directly with `--target NAME`, or as a `targets` entry)."""

ALIAS_PATTERN = r"^[A-Z][A-Za-z0-9]*$"


class AppMetadata(_Closed):
    """A `Telo.Application`'s `metadata`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """The application's name."""
    version: str | None = None
    """The application's version (informative)."""
    description: str | None = None
    """Free text for people."""
    categories: list[str] | None = None
    """Free-form labels (informative)."""


class ValueDecl(_Closed):
    """One declared secret or variable: read from `env`, else `default`."""

    env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """The environment variable holding the value."""
    type: Literal["string", "number", "integer", "boolean"] = "string"
    """The value's type; the text of the environment variable is converted to it."""
    default: str | int | float | bool | None = None
    """The value when the environment variable is not set (without one, the value is required)."""
    description: str | None = None
    """Free text for people."""


class TargetEntry(_Closed):
    """A named target: run `invoke` with `inputs`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """The target's name, for `toolbridge run --target NAME`."""
    invoke: Annotated[Ref, RefTo(*RUNNABLE_KINDS)]
    """The document to run."""
    inputs: PlainObject | None = None
    """Its inputs: `prompt` / `messages` / `system` / `options` for a model kind, `name` and
    `arguments` for `McpClient.ToolsCall`."""


def _target_tag(value: Any) -> str:
    return "target:ref" if isinstance(value, Ref) else "target:entry"


TargetItem = Annotated[
    Annotated[Annotated[Ref, RefTo(*RUNNABLE_KINDS)], Tag("target:ref")]
    | Annotated[TargetEntry, Tag("target:entry")],
    Discriminator(_target_tag),
]


class ApplicationDoc(KindDoc):
    """`Telo.Application`: module imports, declared secrets and variables, and what to run."""

    kind: Literal["Telo.Application"]
    metadata: AppMetadata  # type: ignore[assignment]
    imports: dict[Annotated[str, Field(pattern=ALIAS_PATTERN)], str] = {}
    """Alias -> module source (`oci://ghcr.io/telorun/ai@0.16.0`, `pkg:npm/@telorun/ai`, or a path
    whose last component names the module). Kinds are then written `Alias.Kind`."""
    secrets: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ValueDecl] = {}
    """Secrets for `!cel "secrets.NAME"` and `"${{ secrets.NAME }}"`."""
    variables: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ValueDecl] = {}
    """Plain values for `!cel "variables.NAME"`."""
    targets: list[TargetItem] = []
    """What `toolbridge run` runs: `!ref Doc` or `{name, invoke: !ref Doc, inputs}`."""
    ports: PlainJson = None
    """Accepted for compatibility; toolbridge serves no ports."""


class TextDoc(KindDoc):
    """`Ai.Text`: one model call, no tools; returns `{text, usage, finishReason}`."""

    kind: Literal["Ai.Text"]
    model: Annotated[Ref, RefTo(*MODEL_KINDS)]
    """The model."""
    system: str | None = None
    """The system prompt (an input `system` wins)."""
    options: PlainObject | None = None
    """Model options (input `options` are merged over them)."""


class TextStreamDoc(TextDoc):
    """`Ai.TextStream`: one model call whose text streams as `text-delta` parts, then `finish`."""

    kind: Literal["Ai.TextStream"]  # type: ignore[assignment]


class AgentStreamDoc(AgentDoc):
    """`Ai.AgentStream`: an agent run streamed as `text-delta`, `tool-call`, `tool-result`, then
    one `finish` or `error` part."""

    kind: Literal["Ai.AgentStream"]  # type: ignore[assignment]


class ToolsCallDoc(KindDoc):
    """`McpClient.ToolsCall` (`Mcp.ToolsCall`): call one tool; inputs `{name, arguments}`."""

    kind: Literal["Mcp.ToolsCall"]
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client of the server."""


class ToolsListDoc(KindDoc):
    """`McpClient.ToolsList` (`Mcp.ToolsList`): list the server's tools; returns `{tools}`."""

    kind: Literal["Mcp.ToolsList"]
    client: Annotated[Ref, RefTo(*CLIENT_KINDS)]
    """The client of the server."""


class SessionProviderDoc(KindDoc):
    """`Mcp.SessionProvider`: a Python callable that returns the session id for an external-mode
    `Mcp.HttpClient` (a string, or a mapping with `sessionId`); it may be async."""

    kind: Literal["Mcp.SessionProvider"]
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    """Import path `package.module:function`, called with no arguments before every request."""


RUN_KINDS: dict[str, type[KindDoc]] = {
    "Telo.Application": ApplicationDoc,
    "Ai.Text": TextDoc,
    "Ai.TextStream": TextStreamDoc,
    "Ai.AgentStream": AgentStreamDoc,
    "Mcp.ToolsCall": ToolsCallDoc,
    "Mcp.ToolsList": ToolsListDoc,
    "Mcp.SessionProvider": SessionProviderDoc,
}

ALL_KINDS: dict[str, type[KindDoc]] = {**KINDS, **RUN_KINDS, "Gateway": GatewayDoc}
"""Every kind a manifest may use, by its canonical `kind` string."""
