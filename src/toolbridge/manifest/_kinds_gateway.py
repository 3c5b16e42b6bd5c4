"""The `Gateway` kind: MCP servers, declared tools and task tools served as one governed MCP server.

`toolbridge gateway MANIFEST` serves the union of a `Gateway` document's sources (see
`toolbridge.gateway`); this module holds only its closed schema, checked by `toolbridge check`
like every kind.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from ._kinds import (
    NAME_PATTERN,
    PROVIDER_KINDS,
    Effects,
    KindDoc,
    Limits,
    NonNegativeInt,
    Permissions,
    PositiveInt,
    RefTo,
    SecretText,
    _Closed,
)
from ._yaml import Ref

__all__ = [
    "Approval",
    "GatewayBinding",
    "GatewayClient",
    "GatewayClientOAuth",
    "GatewayDiscovery",
    "GatewayDoc",
    "GatewayIntrospection",
    "GatewayOAuth",
    "GatewayQuota",
    "endpoint_problem",
]

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
    sessions: Literal["shared", "perIdentity"] = "shared"
    """An MCP provider's upstream connection: one `shared` by every identity, or one per
    identity (`perIdentity`: for servers that elicit or sample; bounded by `maxSessions`,
    closed after `sessionIdleMs` idle)."""
    max_sessions: PositiveInt | None = None
    """With `sessions: perIdentity`: connections at most (default 16; when all are busy a call
    goes over the shared one)."""
    session_idle_ms: PositiveInt | None = None
    """With `sessions: perIdentity`: a connection idle this long is closed (default 300 000)."""


JwtAlgorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]  # fmt: skip
"""The JWT signature algorithms the gateway can accept: asymmetric only (no `none`, no `HS*`)."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def endpoint_problem(url: str, what: str) -> str | None:
    """Why `url` cannot be an authorization-server endpoint, or None when it can.

    HTTPS only, plain HTTP only to a loopback host; no user info, no fragment.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return f"{what} is not a URL"
    if parts.scheme not in ("https", "http") or not host:
        return f"{what} must be an https:// URL"
    if parts.scheme == "http" and not _is_loopback(host):
        return f"{what} must use https (plain http only to a loopback address)"
    if parts.username is not None or parts.password is not None or parts.fragment:
        return f"{what} must not carry user info or a fragment"
    return None


def _url_error(url: str, what: str) -> None:
    problem = endpoint_problem(url, what)
    if problem is not None:
        raise PydanticCustomError("oauth_url", problem)


class GatewayIntrospection(_Closed):
    """The authorization server's token introspection endpoint (RFC 7662)."""

    url: str
    """The endpoint (https; plain http only to a loopback address)."""
    client_id: Annotated[str, Field(min_length=1, max_length=256)]
    """The gateway's client id there."""
    client_secret: SecretText
    """The gateway's client secret there, written as `"${{ secrets.NAME }}"`."""
    client_auth: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    """How the gateway sends its credentials there: HTTP Basic (`client_secret_basic`, the
    default) or in the request body (`client_secret_post`)."""

    @model_validator(mode="after")
    def _checked(self) -> GatewayIntrospection:
        _url_error(self.url, "`introspection.url`")
        if isinstance(self.client_secret, str):
            raise PydanticCustomError(
                "secret_inline", 'write the client secret as a secret: `"${{ secrets.NAME }}"`'
            )
        return self


class GatewayOAuth(_Closed):
    """OAuth 2.1 resource-server mode: HTTP clients bring access tokens of an authorization server."""

    resource: str
    """The gateway's resource URL as clients reach it (`https://gw.example.com/mcp`): a token's
    audience must contain it; the protected-resource metadata names it."""
    issuer: str | None = None
    """The authorization server's issuer: a JWT's `iss` must equal it (needed with `jwksUri`)."""
    jwks_uri: str | None = None
    """Where the authorization server publishes its signing keys: tokens that are JWTs are
    verified with them."""
    introspection: GatewayIntrospection | None = None
    """Its introspection endpoint: tokens that are not JWTs (or all, without `jwksUri`)."""
    authorization_servers: list[str] | None = None
    """Advertised in the protected-resource metadata (default: the issuer)."""
    scopes: list[Annotated[str, Field(min_length=1, pattern=r"^[!#-\[\]-~]+$")]] = []
    """Scopes every token needs."""
    algorithms: list[JwtAlgorithm] | None = None
    """JWT algorithms accepted (default RS256, PS256, ES256, EdDSA)."""
    leeway_seconds: Annotated[int, Field(ge=0, le=300, strict=True)] = 30
    """Clock skew allowed on `exp`, `nbf` and `iat`."""
    jwks_cache_seconds: Annotated[int, Field(ge=0, le=86_400, strict=True)] = 300
    """How long fetched keys are used before being fetched again."""
    jwks_stale_seconds: Annotated[int, Field(ge=0, le=86_400, strict=True)] = 3_600
    """The stale-key grace: how much longer than `jwksCacheSeconds` the keys in force are still
    used while the key set cannot be fetched (0: a token is refused as unverifiable, 503, as
    soon as the cache expires and the authorization server is unreachable)."""
    introspection_cache_seconds: Annotated[int, Field(ge=0, le=3_600, strict=True)] = 60
    """How long an introspection answer is reused (never past the token's `exp`)."""
    introspections_per_minute: Annotated[int, Field(ge=0, le=100_000, strict=True)] = 60
    """Tokens unknown to the cache that one client address may have introspected per minute
    (bursts of 10 more); past it the answer is 429 and the authorization server is not asked
    (0: no limit)."""
    dpop_nonce: bool = False
    """Whether a DPoP proof must carry a nonce the gateway issued (RFC 9449 section 9): without
    it the answer is 401 `use_dpop_nonce` with a fresh nonce in `DPoP-Nonce`."""
    timeout_ms: Annotated[int, Field(ge=100, le=60_000, strict=True)] = 5_000
    """The longest one key fetch or introspection may take."""

    @model_validator(mode="after")
    def _checked(self) -> GatewayOAuth:
        resource = urlsplit(self.resource)
        if resource.scheme not in ("https", "http") or not resource.netloc or resource.fragment:
            raise PydanticCustomError("oauth_url", "`resource` must be an http(s) URL without a fragment")
        if self.jwks_uri is None and self.introspection is None:
            raise PydanticCustomError("oauth_verify", "give `jwksUri`, `introspection`, or both")
        if self.jwks_uri is not None:
            _url_error(self.jwks_uri, "`jwksUri`")
            if not self.issuer:
                raise PydanticCustomError("oauth_issuer", "`jwksUri` needs the `issuer`")
        if not self.issuer and not self.authorization_servers:
            raise PydanticCustomError("oauth_issuer", "give the `issuer` or `authorizationServers`")
        return self


class GatewayClientOAuth(_Closed):
    """Which verified OAuth tokens are this client; every condition given must hold."""

    subject: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """The token's `sub` equals this."""
    client_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    """The token's `client_id` (or `azp`) equals this."""
    claims: dict[str, str | int | bool] = {}
    """Each claim equals the value, or is a list that contains it (`groups: admins`)."""
    scopes: list[Annotated[str, Field(min_length=1, pattern=r"^[!#-\[\]-~]+$")]] = []
    """Scopes this client's tokens must carry (else 403 `insufficient_scope`)."""

    @model_validator(mode="after")
    def _selects(self) -> GatewayClientOAuth:
        if self.subject is None and self.client_id is None and not self.claims:
            raise PydanticCustomError(
                "oauth_match", "give `subject`, `clientId` or `claims` to say which tokens this client is"
            )
        return self


class GatewayQuota(_Closed):
    """A client's cumulative cap per period, held in the shared journal (every replica writing
    the same journal enforces one cap; `docs/gateway.md`, "Quotas per identity")."""

    period: Literal["hour", "day", "month", "total"] = "day"
    """The window the counters cover: a fixed UTC `hour`, `day` or `month`, or `total` (never reset)."""
    max_calls: NonNegativeInt | None = None
    """Calls admitted per window (past it: `LIMIT_EXCEEDED`, journaled, nothing sent)."""
    max_cost_micros: NonNegativeInt | None = None
    """Spend per window in millionths of a USD, each call reserving its binding's `costMicros`
    (past it: `BUDGET_EXCEEDED`, journaled, nothing sent)."""


class GatewayClient(_Closed):
    """One identity that may use the gateway, with its own permissions and limits."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """Who it is: recorded as the principal of every journal row of its calls."""
    token: SecretText | None = None
    """Its bearer token over HTTP, normally `"${{ secrets.aliceToken }}"` (never written inline)."""
    local: bool = False
    """This identity is the local user over stdio (at most one client says so)."""
    oauth: GatewayClientOAuth | None = None
    """Over HTTP with the gateway's `oauth`: which verified tokens are this client."""
    permissions: Permissions | None = None
    """Its grants (default: the runtime's)."""
    limits: Limits | None = None
    """Its limits of **one call** (each forwarded call is one run; default: the runtime's)."""
    quota: GatewayQuota | None = None
    """Its cumulative cap per period across every call and every replica (default: none)."""

    @model_validator(mode="after")
    def _how_known(self) -> GatewayClient:
        if self.token is None and not self.local and self.oauth is None:
            raise PydanticCustomError("client_identity", "a client needs a `token`, `oauth` or `local: true`")
        if isinstance(self.token, str):
            raise PydanticCustomError(
                "token_inline", 'write the token as a secret: `token: "${{ secrets.NAME }}"`'
            )
        return self


class ConsoleOperator(_Closed):
    """One person who may use the gateway's console (`/console/`)."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    """Who decides: recorded with every approval they decide."""
    token: SecretText
    """Their sign-in token, normally `"${{ secrets.aliceConsoleToken }}"` (never written inline)."""

    @model_validator(mode="after")
    def _secret(self) -> ConsoleOperator:
        if isinstance(self.token, str):
            raise PydanticCustomError(
                "token_inline", 'write the token as a secret: `token: "${{ secrets.NAME }}"`'
            )
        return self


class GatewayConsole(_Closed):
    """The operator's console of an HTTP gateway (see docs/console.md)."""

    operators: list[ConsoleOperator] = []
    """Who may sign in with a token of their own; nobody else sees the console."""
    scopes: list[Annotated[str, Field(min_length=1, pattern=r"^[!#-\[\]-~]+$")]] = []
    """With the gateway's `oauth`: an OAuth access token carrying every one of these scopes (for
    the gateway's `resource`, verified as a client's) signs its subject in as an operator."""

    @model_validator(mode="after")
    def _distinct(self) -> GatewayConsole:
        if not self.operators and not self.scopes:
            raise PydanticCustomError("console_operators", "give the console `operators`, `scopes`, or both")
        names = [o.name for o in self.operators]
        if len(set(names)) != len(names):
            raise PydanticCustomError("operator_names", "two console operators have the same `name`")
        return self


class GatewayDiscovery(_Closed):
    """`discovery:` of a `Gateway`: past `threshold` granted tools, a client lists the meta tools
    `find_tools`, `use_tools` and `call_tool`, the `pinned` tools and its session's working set
    instead of everything (see docs/discovery.md)."""

    threshold: Annotated[int, Field(ge=0, le=1_000_000, strict=True)]
    """Discovery is on for an identity whose granted tools are more than this many."""
    pinned: list[Annotated[str, Field(min_length=1, max_length=256)]] = []
    """Tools (served names) always listed, when the identity is granted them."""
    max_results: Annotated[int, Field(ge=1, le=50, strict=True)] = 10
    """The most matches `find_tools` returns (its `limit` is capped there)."""
    max_working_set: Annotated[int, Field(ge=1, le=1_000, strict=True)] = 32
    """Tools one session's working set holds; `use_tools` past it drops the least recently added."""
    sessionless_ttl_ms: Annotated[int, Field(ge=0, le=86_400_000, strict=True)] = 600_000
    """A sessionless client's (2026-07-28, `--stateless` HTTP) working set is one per identity,
    dropped this long after its last use; 0: none kept (such clients use `call_tool`)."""


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
    """Identities: bearer tokens or OAuth rules over HTTP, the local user over stdio."""
    oauth: GatewayOAuth | None = None
    """OAuth 2.1 resource-server mode over HTTP: access tokens verified by JWT/JWKS or
    introspection, mapped to `clients` by their `oauth` rules."""
    page_size: Annotated[int, Field(ge=1, le=1000, strict=True)] = 100
    """Items per page of `tools/list`, `resources/list` and `prompts/list`."""
    approval_timeout_ms: PositiveInt = 120_000
    """How long a person has to answer an approval; no answer in time blocks the call."""
    console: GatewayConsole | None = None
    """The operator's console at `/console/` over HTTP; with it, a call that needs approval from a
    client that cannot be asked waits for an operator's decision (`approvalTimeoutMs` at most)."""
    max_sessions: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] = 10_000
    """Open HTTP sessions, all identities together; past it a new session is answered 503."""
    max_sessions_per_identity: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] | None = None
    """Open HTTP sessions of one identity (default: a tenth of `maxSessions`); one more closes
    that identity's oldest idle session, or is answered 429 when all of them are busy."""
    session_idle_timeout_ms: Annotated[int, Field(ge=1_000, le=86_400_000, strict=True)] = 1_800_000
    """An HTTP session with no request for this long is closed."""
    max_calls_in_flight_per_identity: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 64
    """`tools/call` requests of one identity in flight; past it a call is refused `LIMIT_EXCEEDED`."""
    upstream_start_timeout_ms: Annotated[int, Field(ge=100, le=600_000, strict=True)] = 30_000
    """The longest one upstream's first listing may take (its start-up and handshake included);
    until it lists, its tools are not served."""
    upstream_list_timeout_ms: Annotated[int, Field(ge=100, le=600_000, strict=True)] = 10_000
    """The longest one upstream's later listings may take; then its last good listing is
    served, marked stale."""
    breaker_failures: Annotated[int, Field(ge=1, le=1_000, strict=True)] = 3
    """Consecutive failures of one upstream (listing or call) that open its breaker."""
    breaker_cooldown_ms: Annotated[int, Field(ge=100, le=3_600_000, strict=True)] = 30_000
    """How long an open breaker fails that upstream's calls fast (`UPSTREAM_UNAVAILABLE`)
    before one probe."""
    discovery: GatewayDiscovery | None = None
    """Governed tool discovery for large unions (default off: every granted tool is listed)."""

    @model_validator(mode="after")
    def _distinct_clients(self) -> GatewayDoc:
        names = [c.name for c in self.clients]
        if len(set(names)) != len(names):
            raise PydanticCustomError("client_names", "two clients have the same `name`")
        if sum(1 for c in self.clients if c.local) > 1:
            raise PydanticCustomError("client_local", "at most one client is `local: true`")
        if self.oauth is None and any(c.oauth is not None for c in self.clients):
            raise PydanticCustomError("client_oauth", "a client has `oauth` but the gateway has no `oauth`")
        if self.oauth is None and self.console is not None and self.console.scopes:
            raise PydanticCustomError(
                "console_oauth", "the console has `scopes` but the gateway has no `oauth`"
            )
        if self.max_sessions_per_identity is not None and self.max_sessions_per_identity > self.max_sessions:
            raise PydanticCustomError(
                "gateway_sessions", "`maxSessionsPerIdentity` is more than `maxSessions`"
            )
        if not self.tool_providers and not self.tools and not self.tasks:
            raise PydanticCustomError("gateway_sources", "give `toolProviders`, `tools` or `tasks`")
        return self
