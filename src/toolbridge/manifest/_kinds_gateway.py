"""The `Gateway` kind: MCP servers, declared tools and task tools served as one governed MCP server.

`toolbridge gateway MANIFEST` serves the union of a `Gateway` document's sources (see
`toolbridge.gateway`); this module holds only its closed schema, checked by `toolbridge check`
like every kind.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from ._kinds import (
    NAME_PATTERN,
    PROVIDER_KINDS,
    Effects,
    KindDoc,
    Limits,
    Permissions,
    PositiveInt,
    RefTo,
    SecretText,
    _Closed,
)
from ._yaml import Ref

__all__ = ["Approval", "GatewayBinding", "GatewayClient", "GatewayDoc"]

Approval = Literal["never", "write", "always"]
"""When a call asks the person at the client first: `never`, `write` (effects not `none`), `always`."""


class GatewayBinding(_Closed):
    """One entry of a gateway's `toolProviders` (as on `Ai.Agent`, plus `approval`)."""

    provider: Annotated[Ref, RefTo(*PROVIDER_KINDS)]
    """The tool provider (an `AiMcp.ToolProvider`, `Tasks.ToolSet` or `Ai.Tools`)."""
    prefix: str = ""
    """Prepended to each tool name the client sees (`fs_` -> `fs_read_file`); also the
    namespace of the server's resources (`fs_+file:///...`) and prompts (`fs_greeting`)."""
    include: list[str] | None = None
    """Only these bare tool names (before the prefix) are served."""
    exclude: list[str] | None = None
    """Bare tool names never served."""
    effects: Effects | None = None
    """What these tools may do, for the permissions (undeclared: `write`)."""
    capabilities: list[str] | None = None
    """Capabilities a client's permissions must grant for these tools."""
    approval: Approval = "never"
    """Ask the person at the client (elicitation) before a call: `never`, `write` (when the
    tool's effects are not `none`) or `always`."""
    resources: bool = True
    """Serve the server's resources, resource templates and prompts too (namespaced)."""
    cost_micros: Annotated[int, Field(ge=0, strict=True)] | None = None
    """What one call costs, for a client's budget (`limits.maxCostMicros`)."""
    timeout_ms: PositiveInt | None = None
    """The longest one call may take (default: the runtime's `toolTimeoutMs`)."""


class GatewayClient(_Closed):
    """One identity that may use the gateway, with its own permissions and limits."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """Who it is: recorded as the principal of every journal row of its calls."""
    token: SecretText | None = None
    """Its bearer token over HTTP, normally `"${{ secrets.aliceToken }}"` (never written inline)."""
    local: bool = False
    """This identity is the local user over stdio (at most one client says so)."""
    permissions: Permissions | None = None
    """Its grants (default: the runtime's)."""
    limits: Limits | None = None
    """Its per-call limits (default: the runtime's)."""

    @model_validator(mode="after")
    def _how_known(self) -> GatewayClient:
        if self.token is None and not self.local:
            raise PydanticCustomError("client_identity", "a client needs a `token` or `local: true`")
        if isinstance(self.token, str):
            raise PydanticCustomError(
                "token_inline", 'write the token as a secret: `token: "${{ secrets.NAME }}"`'
            )
        return self


class GatewayDoc(KindDoc):
    """`Gateway`: MCP servers, declared tools and task tools served as one governed MCP server."""

    kind: Literal["Gateway"]
    tool_providers: list[GatewayBinding] = []
    """The servers (and other providers) whose tools are served, each under its prefix."""
    tools: list[Annotated[Ref, RefTo("AiMcp.Tool")]] = []
    """Declared (governed) tools served as they are declared."""
    tasks: list[Annotated[Ref, RefTo("Tasks.ToolSet")]] = []
    """Task tool sets served without a prefix."""
    approval: Approval = "never"
    """Approval for the declared `tools` and the `tasks` (bindings say their own)."""
    runtime: Annotated[Ref, RefTo("Runtime")] | None = None
    """Permissions, limits and the journal (default: nothing granted, journal in memory)."""
    lock: str | None = None
    """A lock file (`toolbridge lock MANIFEST`, relative to the manifest): a server's tool is served
    only while its definition matches its pin (servers named by their client documents); a
    changed or new tool is withheld until the lock approves it. Re-read when the file changes."""
    clients: list[GatewayClient] = []
    """Identities: bearer tokens over HTTP, the local user over stdio."""
    page_size: Annotated[int, Field(ge=1, le=1000, strict=True)] = 100
    """Items per page of `tools/list`, `resources/list` and `prompts/list`."""
    approval_timeout_ms: PositiveInt = 120_000
    """How long a person has to answer an approval; no answer in time blocks the call."""

    @model_validator(mode="after")
    def _distinct_clients(self) -> GatewayDoc:
        names = [c.name for c in self.clients]
        if len(set(names)) != len(names):
            raise PydanticCustomError("client_names", "two clients have the same `name`")
        if sum(1 for c in self.clients if c.local) > 1:
            raise PydanticCustomError("client_local", "at most one client is `local: true`")
        if not self.tool_providers and not self.tools and not self.tasks:
            raise PydanticCustomError("gateway_sources", "give `toolProviders`, `tools` or `tasks`")
        return self
