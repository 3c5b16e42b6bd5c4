"""From a checked manifest's `Gateway` document to a live, open gateway.

`open_gateway(path)` loads the manifest (the analyzer refuses one with errors), builds each
source through the manifest's own builder (`LiveManifest`: clients, task tool sets, declared
tools, the runtime), and wraps every `AiMcp.ToolProvider`'s client for the gateway:
`UpstreamProvider` (whole results, progress, sampling and elicitation routed downstream), pinned
by the gateway's (or the provider's own) lock, and `Watched` (so a renewed lock or a changed
upstream listing reaches the catalog). Identities get one `Runtime` each, sharing the
manifest runtime's journal. Closing the block closes everything, whatever ends it.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio

from ..calls import DeclaredToolLike, ToolBinding
from ..clients import CallRequestKind, ConnectionClient
from ..errors import ConfigError
from ..manifest import LiveManifest, Manifest, Secret, load_manifest
from ..manifest.documents import GatewayDoc, HttpClientDoc, ToolProviderDoc
from ..manifest.documents import Limits as LimitsDoc
from ..manifest.documents import Permissions as PermissionsDoc
from ..pinning import PinnedToolProvider, ServerLock
from ..runtime import Quota, Runtime
from ..tools import ToolProvider
from ._breaker import Breaker, Watched, why_failed
from ._bulkhead import Bulkheads
from ._core import GatewayCore, Identity, Source
from ._discovery import Discovery, DiscoverySettings
from ._events import EventHub
from ._oauth import DEFAULT_ALGORITHMS, OAuthSettings
from ._oauth_gate import ClientRule
from ._sessions import DEFAULT_IDLE_S, DEFAULT_MAX_SESSIONS, CapabilityClients, IdentitySessions
from ._start import http_only_secret
from ._upstream import InFlight, UpstreamProvider

if TYPE_CHECKING:
    from ._operator_approval import OperatorApprovals
    from ._pins_pg import PgPinStore

__all__ = ["OpenGateway", "Watched", "open_gateway"]

log = logging.getLogger("toolbridge.gateway")

LISTING_MAX_AGE_S = 5.0
"""A listing of an upstream is not trusted past this age: the gateway's watcher asks the upstream
again (a silent change is noticed even from one that advertises `listChanged`, so a pinned tool
rewritten without notice is withheld within about this long, plus one watcher tick)."""


@dataclass
class _Pin:
    watched: Watched
    pinned: PinnedToolProvider
    path: Path
    server: str
    mtime: float = -1.0
    version: int = 0
    """The stored version in force (PostgreSQL pins)."""
    approved: float = -1.0
    """When the pins in force were approved (a lock never replaces later-approved pins)."""


@dataclass
class OpenGateway:
    """A gateway ready to serve: its core, its identities and what it watches.

    Attributes:
        name: the gateway's name (the `Gateway` document's, or `--name`).
        core: the union and its rules.
        identities: every identity by name.
        local_identity: who a stdio client is.
        tokens: bearer token -> identity name (HTTP).
        anonymous: the identity of HTTP clients when no token is configured (else None).
        oauth: OAuth resource-server settings (HTTP), or None.
        oauth_rules: which verified OAuth tokens are which identity, in manifest order.
        bulkheads: the limits and deadlines that keep identities and upstreams apart.
    """

    name: str
    core: GatewayCore
    identities: dict[str, Identity]
    local_identity: Identity
    tokens: dict[str, str] = field(repr=False)
    anonymous: str | None
    oauth: OAuthSettings | None = None
    oauth_rules: tuple[ClientRule, ...] = ()
    bulkheads: Bulkheads = field(default_factory=Bulkheads)
    events: EventHub = field(default_factory=EventHub, repr=False)
    _pins: list[_Pin] = field(default_factory=list, repr=False)
    _pin_store: PgPinStore | None = field(default=None, repr=False)
    """The PostgreSQL pin store (`_pins_pg.PgPinStore`) when pins are shared, else None."""
    _upstreams: list[tuple[Watched, ConnectionClient]] = field(default_factory=list, repr=False)
    _listing: dict[int, str] = field(default_factory=dict, repr=False)
    _fresh_at: dict[int, float] = field(default_factory=dict, repr=False)
    """When each upstream was last listed by asking it (not its client's cache)."""
    operators: dict[str, str] = field(default_factory=dict, repr=False)
    """The console's operators: sign-in token -> name (HTTP; empty: none by token)."""
    console_scopes: tuple[str, ...] = ()
    """With `oauth`: the scopes an access token needs to sign in to the console (empty: none)."""
    journal_location: str | None = field(default=None, repr=False)
    """The journal's SQLite path or PostgreSQL URL (what the console reads), None in memory."""
    discovery: Discovery | None = field(default=None, repr=False)
    """Governed tool discovery (`_discovery`), when the document has `discovery:`."""

    def pin_sources(self) -> list[tuple[str, PinnedToolProvider, Path, ConnectionClient | None]]:
        """(server, its `PinnedToolProvider`, its lock file, its MCP client whose prompts and
        resources pass through, else None) of every pinned upstream."""
        clients = {id(s.binding.provider): s.client for s in self.core.sources if s.resources}
        return [(pin.server, pin.pinned, pin.path, clients.get(id(pin.watched))) for pin in self._pins]

    async def refresh(self) -> None:
        """Re-read changed lock files (with PostgreSQL pins: store them, and adopt what another
        replica stored); notice upstream listings that changed without notice."""
        from ..pinning import read_lock

        bumped = sum(pin.watched.bumps for pin in self._pins)
        for pin in self._pins:
            try:
                mtime = pin.path.stat().st_mtime
            except OSError:
                continue
            if mtime == pin.mtime:
                continue
            pin.mtime = mtime
            try:
                lock = read_lock(pin.path)
            except ConfigError:
                continue  # a lock being rewritten, or broken: keep the one in force
            approved = mtime if lock.approved_at is None else lock.approved_at
            if pin.server in lock.servers:
                if approved < pin.approved:
                    log.warning("lock %s is older than the approval in force: not adopted", pin.path.name)
                    continue
                if self._pin_store is not None:  # a renewed lock file is an approval for all replicas
                    try:
                        version = await self._pin_store.save(pin.server, lock.server(pin.server), approved)
                    except ConfigError as exc:
                        pin.mtime = -1.0  # stored at a later check
                        log.warning("the renewed lock could not be stored: %s", exc)
                        continue
                    if version is None:
                        log.warning("lock %s is older than the stored approval: not adopted", pin.path.name)
                        continue
                    pin.version = version
                pin.pinned.lock = lock.server(pin.server)
                pin.approved = approved
                pin.watched.bumps += 1
        if self._pin_store is not None and self._pins:
            try:
                await self._adopt_stored(self._pin_store)
            except ConfigError as exc:  # the database is away: the pins in force stay
                log.warning("stored pins could not be read: %s", exc)
        if sum(pin.watched.bumps for pin in self._pins) != bumped:  # new pins: prompts and resources too
            await self.events.changed("prompts")
            await self.events.changed("resources")
        if self._upstreams:  # each upstream within its own deadline, all at once
            async with anyio.create_task_group() as tg:
                for watched, client in self._upstreams:
                    tg.start_soon(self._probe, watched, client)

    async def _probe(self, watched: Watched, client: ConnectionClient) -> None:
        """List one upstream (within its deadline, unless its breaker is open): a changed
        listing, or one that works again after failing, makes the catalog list it again."""
        key = id(watched)
        now = time.monotonic()
        fresh = now - self._fresh_at.get(key, -1e9) >= LISTING_MAX_AGE_S
        probing = watched.breaker.opened_at is not None or watched.stale or fresh
        if not watched.breaker.allow():
            return
        try:
            with anyio.fail_after(watched.deadline_s):
                # a probe asks the upstream itself, not the client's cache of its last listing:
                # always past LISTING_MAX_AGE_S, whatever the upstream says of `listChanged`
                tools = await (client.list_tools(refresh=True) if probing else client.list_tools())
                self._fresh_at[key] = now if probing else self._fresh_at.get(key, now)
        except Exception as exc:  # slow or down: its last good listing is served meanwhile
            watched.failed(f"its tools could not be listed ({why_failed(exc)})", listing=True)
            return
        digest = hashlib.sha256(
            json.dumps(
                [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools],
                sort_keys=True,
            ).encode()
        ).hexdigest()
        if self._listing.get(key, digest) != digest:
            watched.bumps += 1
        self._listing[key] = digest
        watched.recovered()

    def stale(self) -> frozenset[str]:
        """The upstreams served from their last good listing now (by provider document name)."""
        return frozenset(w.name for w, _ in self._upstreams if w.stale)

    async def _adopt_stored(self, store: PgPinStore) -> None:
        """Adopt the pins another replica stored since this one last looked."""
        versions = await store.versions()
        for pin in self._pins:
            if versions.get(pin.server, 0) == pin.version:
                continue
            stored = await store.load(pin.server)
            if stored is not None:
                pin.pinned.lock = stored.lock
                pin.version = stored.version
                pin.approved = stored.approved_at
                pin.watched.bumps += 1


def _identity_runtime(base: Runtime, permissions: PermissionsDoc | None, limits: LimitsDoc | None) -> Runtime:
    from ..runtime import Limits, Permissions

    perms = Permissions(list(permissions.allow)) if permissions is not None else base.permissions
    lim = base.limits
    if limits is not None:
        merged = dict(base.limits.to_dict())
        merged.update(limits.model_dump(exclude_none=True))
        lim = Limits.from_config(merged)
    return Runtime(
        profile=base.profile, permissions=perms, limits=lim, guards=base.guards, journal=base.journal
    )


def _not_a(name: str, built: object, what: str) -> ConfigError:
    return ConfigError(f"{name}: built a {type(built).__name__}, not {what}", code="ERR_GATEWAY_CONFIG")


def _mcp_client(name: str, built: object) -> ConnectionClient:
    """The MCP client the manifest built for client document `name`."""
    if not isinstance(built, ConnectionClient):
        raise _not_a(name, built, "an MCP client")
    return built


def _provider(name: str, built: object) -> ToolProvider:
    """The tool provider the manifest built for document `name`."""
    if not isinstance(built, ToolProvider):
        raise _not_a(name, built, "a tool provider")
    return built


def _declared(name: str, built: object) -> DeclaredToolLike:
    """The declared tool the manifest built for document `name`."""
    if not isinstance(built, DeclaredToolLike):
        raise _not_a(name, built, "a declared tool")
    return built


def _gateway_doc(manifest: Manifest, name: str | None) -> GatewayDoc:
    docs = manifest.analysis.of_kind("Gateway")
    names = [d.name for d in docs]
    if name is not None:
        chosen = [d for d in docs if d.name == name]
        if not chosen:
            raise ConfigError(
                f"no Gateway named {name!r} (gateways: {', '.join(names) or 'none'})",
                code="ERR_GATEWAY_CONFIG",
            )
        docs = chosen
    if len(docs) != 1:
        if not docs:
            raise ConfigError(f"{manifest.path} declares no Gateway", code="ERR_GATEWAY_CONFIG")
        raise ConfigError(
            f"{manifest.path} declares several gateways ({', '.join(names)}); choose one with --name",
            code="ERR_GATEWAY_CONFIG",
        )
    model = docs[0].model
    assert isinstance(model, GatewayDoc)
    return model


def _identity_sessions(
    live: LiveManifest, client_doc: str, idle_ms: int | None, max_sessions: int | None
) -> IdentitySessions:
    """The per-identity connections of a `sessions: perIdentity` binding (`_sessions`)."""

    async def make() -> ConnectionClient:
        client = _mcp_client(client_doc, await live.build_new(client_doc))
        client.offer_call_requests("sampling", "elicitation", "roots")
        return client

    return IdentitySessions(
        make,
        max_sessions=max_sessions or DEFAULT_MAX_SESSIONS,
        idle_s=idle_ms / 1000 if idle_ms is not None else DEFAULT_IDLE_S,
    )


def _capability_clients(
    live: LiveManifest, client_doc: str, inflight: InFlight, events: EventHub, sources: list[Source]
) -> CapabilityClients:
    """The connections of an HTTP upstream declaring a caller's capabilities (`_sessions`);
    their calls count among the shared connection's (`inflight`), and the gateway hears their
    notifications as the shared one's (`sources`: its bindings), so log messages reach calls."""

    async def make(kinds: frozenset[CallRequestKind]) -> ConnectionClient:
        client = _mcp_client(client_doc, await live.build_new(client_doc))
        if kinds:
            client.offer_call_requests(*sorted(kinds))
        events.routers[id(client)] = inflight
        for source in sources:
            events.tap(client, source)
        return client

    return CapabilityClients(make)


def gateway_doc_of(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    secrets_file: str | os.PathLike[str] | None = None,
) -> GatewayDoc:
    """The manifest's `Gateway` document, checked, without needing any secret's value (for
    `--print-config`: a config is written where the secrets may not be).

    Raises:
        ConfigError: the manifest has errors other than unresolved secrets, or no such gateway.
    """
    manifest = load_manifest(
        path, secrets_file=secrets_file, tolerate=lambda _, d: d.code == "ERR_MANIFEST_SECRET_UNRESOLVED"
    )
    return _gateway_doc(manifest, name)


@asynccontextmanager
async def open_gateway(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    secrets: Mapping[str, str] | None = None,
    secrets_file: str | os.PathLike[str] | None = None,
    approval_timeout_s: float | None = None,
    transport: Literal["stdio", "http"] = "http",
) -> AsyncIterator[OpenGateway]:
    """Open the manifest's `Gateway` (the one named `name`, or the only one).

    With `transport="stdio"`, what only HTTP clients need (the clients' bearer `token`s, the
    `oauth` settings and their secrets) is neither resolved nor required: a stdio gateway starts
    without the secrets of its HTTP clients (`_start.http_only_secret`).

    Raises:
        ConfigError: the manifest has errors (its analyzer's code), no such gateway
            (`ERR_GATEWAY_CONFIG`), or a part cannot be built.
    """
    from ..runtime import create_runtime

    http = transport == "http"
    tolerate = None if http else http_only_secret
    manifest = load_manifest(path, secrets=secrets, secrets_file=secrets_file, tolerate=tolerate)
    doc = _gateway_doc(manifest, name)
    base_dir = manifest.analysis.base_dir
    async with manifest.open() as live:
        base = await live.runtime()
        if base is None:
            base = create_runtime()
            live._stack.callback(base.close)
        pin_url = _pins_url(manifest, doc)
        routers: dict[int, InFlight] = {}
        limits = _bulkheads_of(doc)
        events = EventHub()
        timeout = approval_timeout_s if approval_timeout_s is not None else doc.approval_timeout_ms / 1000
        sources: list[Source] = []
        pins: list[_Pin] = []
        upstreams: list[tuple[Watched, ConnectionClient]] = []
        for b in doc.tool_providers:
            pdoc = manifest.analysis.docs[b.provider.name].model
            client: ConnectionClient | None = None
            tapped: list[Source] = []  # the binding's source, for its capability clients
            provider: ToolProvider
            if isinstance(pdoc, ToolProviderDoc):
                client = _mcp_client(pdoc.client.name, await live.build(pdoc.client.name))
                inflight = routers.get(id(client))
                if inflight is None:
                    inflight = routers[id(client)] = InFlight()
                    # answered by the call they belong to (`_upstream`)
                    client.offer_call_requests("sampling", "elicitation", "roots")
                    events.routers[id(client)] = inflight
                pool: IdentitySessions | None = None
                if b.sessions == "perIdentity":
                    pool = _identity_sessions(live, pdoc.client.name, b.session_idle_ms, b.max_sessions)
                    live._stack.push_async_callback(pool.aclose)
                variants: CapabilityClients | None = None
                if isinstance(manifest.analysis.docs[pdoc.client.name].model, HttpClientDoc):
                    variants = _capability_clients(live, pdoc.client.name, inflight, events, tapped)
                    live._stack.push_async_callback(variants.aclose)
                provider = UpstreamProvider(client, inflight, pool, variants)
                lock_name = doc.lock or pdoc.lock
                pinned: PinnedToolProvider | None = None
                if lock_name is not None:
                    lock_path = base_dir / lock_name
                    server_lock, mtime, approved = _server_lock(lock_path, pdoc.client.name)
                    pinned = provider = PinnedToolProvider(provider, server_lock, server=pdoc.client.name)
                watched = Watched(
                    provider,
                    b.provider.name,
                    list_timeout_s=limits.upstream_list_timeout_s,
                    start_timeout_s=limits.upstream_start_timeout_s,
                    breaker=Breaker(limits.breaker_failures, limits.breaker_cooldown_s),
                )
                if pinned is not None:
                    pins.append(_Pin(watched, pinned, lock_path, pdoc.client.name, mtime, approved=approved))
                upstreams.append((watched, client))
                provider = watched
            else:
                provider = _provider(b.provider.name, await live.build(b.provider.name))
            binding = ToolBinding(
                provider=provider,
                prefix=b.prefix,
                include=tuple(b.include) if b.include is not None else None,
                exclude=tuple(b.exclude or ()),
                effects=b.effects,
                capabilities=tuple(b.capabilities or ()),
                cost_micros=b.cost_micros,
                timeout_ms=b.timeout_ms,
            )
            source = Source(binding, b.approval, client, b.resources, b.provider.name)
            sources.append(source)
            if client is not None:
                events.tap(client, source)
                tapped.append(source)
        for ref in doc.tasks:
            toolset = await live.build(ref.name)
            sources.append(
                Source(
                    ToolBinding(provider=_provider(ref.name, toolset)), doc.approval, None, False, ref.name
                )
            )
        declared = [_declared(ref.name, await live.build(ref.name)) for ref in doc.tools]
        identities: dict[str, Identity] = {}
        tokens: dict[str, str] = {}
        local: Identity | None = None
        for c in doc.clients:
            quota = None if c.quota is None else Quota.from_config(c.quota.model_dump())
            identity = Identity(c.name, _identity_runtime(base, c.permissions, c.limits), quota)
            identities[c.name] = identity
            if http and isinstance(c.token, Secret):
                tokens[c.token.reveal()] = c.name
            if c.local:
                local = identity
        if local is None:
            local = Identity(f"local:{_user()}", base)
        identities.setdefault(local.name, local)
        oauth, rules = _oauth_of(doc) if http else (None, ())
        anonymous: str | None = None
        if http and not tokens and oauth is None:
            anonymous = "anonymous"
            identities.setdefault(anonymous, Identity(anonymous, base))
        core = GatewayCore(
            name=doc.metadata.name,
            sources=sources,
            declared=declared,
            declared_approval=doc.approval,
            identities=identities,
            page_size=doc.page_size,
            approval_timeout_s=timeout,
        )
        location = _journal_location(manifest, doc, base)
        operators: dict[str, str] = {}
        console_scopes: tuple[str, ...] = ()
        if doc.console is not None:
            core.operators = await _operator_approvals(live, location, core.name)
            if http:
                operators = {
                    o.token.reveal(): o.name for o in doc.console.operators if isinstance(o.token, Secret)
                }
                console_scopes = tuple(doc.console.scopes) if oauth is not None else ()
        gateway = OpenGateway(
            name=core.name,
            core=core,
            identities=identities,
            local_identity=local,
            tokens=tokens,
            anonymous=anonymous,
            oauth=oauth,
            oauth_rules=rules,
            bulkheads=limits,
            events=events,
            _pins=pins,
            _upstreams=upstreams,
            operators=operators,
            console_scopes=console_scopes,
            journal_location=location,
        )
        if doc.discovery is not None:
            d = doc.discovery
            gateway.discovery = Discovery(
                core,
                DiscoverySettings(
                    d.threshold,
                    tuple(d.pinned),
                    d.max_results,
                    d.max_working_set,
                    d.sessionless_ttl_ms / 1000,
                ),
            )
        if pin_url is not None and pins:
            await _share_pins(gateway, pin_url, live)
        yield gateway


async def _share_pins(gateway: OpenGateway, url: str, live: LiveManifest) -> None:
    """Pins in PostgreSQL: adopt the stored ones, or store a lock file newer than them."""
    from ._pins_pg import PgPinStore

    store = PgPinStore(url, gateway.name)
    live._stack.callback(store.close)
    await store.setup()
    gateway._pin_store = store
    for pin in gateway._pins:
        stored = await store.load(pin.server)
        newer_file = pin.mtime >= 0 and (stored is None or pin.approved > stored.approved_at)
        version = None
        if newer_file and pin.server in _servers_of(pin.path):
            version = await store.save(pin.server, pin.pinned.lock, pin.approved)
        if version is not None:
            pin.version = version
        elif stored is not None:
            pin.pinned.lock = stored.lock
            pin.version = stored.version
            pin.approved = stored.approved_at


def _servers_of(path: Path) -> set[str]:
    from ..pinning import read_lock

    try:
        return set(read_lock(path).servers)
    except ConfigError:
        return set()


def _pins_url(manifest: Manifest, doc: GatewayDoc) -> str | None:
    """The PostgreSQL URL of the gateway runtime's journal (pins are shared there), else None."""
    from ..runtime import is_postgres_url

    if doc.runtime is None:
        return None
    rdoc = manifest.analysis.docs[doc.runtime.name].model
    journal = getattr(rdoc, "journal", None)
    value = journal.reveal() if isinstance(journal, Secret) else journal
    return value if isinstance(value, str) and is_postgres_url(value) else None


def _journal_location(manifest: Manifest, doc: GatewayDoc, base: Runtime) -> str | None:
    """The runtime journal's PostgreSQL URL or SQLite path, or None (a journal in memory)."""
    url = _pins_url(manifest, doc)
    if url is not None:
        return url
    path = base.journal_path
    return path if path != ":memory:" else None


async def _operator_approvals(live: LiveManifest, location: str | None, name: str) -> OperatorApprovals:
    """The console's approval route over the journal's database (`_operator_approval`)."""
    from ..console import ApprovalStore
    from ._operator_approval import OperatorApprovals

    store = ApprovalStore(location or ":memory:")
    live._stack.callback(store.close)
    await store.setup()
    return OperatorApprovals(store, name)


def _bulkheads_of(doc: GatewayDoc) -> Bulkheads:
    return Bulkheads(
        max_sessions=doc.max_sessions,
        max_sessions_per_identity=doc.max_sessions_per_identity,
        session_idle_timeout_s=doc.session_idle_timeout_ms / 1000,
        max_calls_in_flight_per_identity=doc.max_calls_in_flight_per_identity,
        upstream_list_timeout_s=doc.upstream_list_timeout_ms / 1000,
        upstream_start_timeout_s=doc.upstream_start_timeout_ms / 1000,
        breaker_failures=doc.breaker_failures,
        breaker_cooldown_s=doc.breaker_cooldown_ms / 1000,
    )


def _oauth_of(doc: GatewayDoc) -> tuple[OAuthSettings | None, tuple[ClientRule, ...]]:
    """The OAuth settings and client rules a `Gateway` document declares (None without `oauth`)."""
    o = doc.oauth
    if o is None:
        return None, ()
    intro = o.introspection
    secret = intro.client_secret if intro is not None else None
    settings = OAuthSettings(
        resource=o.resource,
        issuer=o.issuer,
        jwks_url=o.jwks_uri,
        introspection_url=intro.url if intro is not None else None,
        client_id=intro.client_id if intro is not None else None,
        client_secret=secret.reveal() if isinstance(secret, Secret) else None,
        client_auth=intro.client_auth if intro is not None else "client_secret_basic",
        authorization_servers=tuple(o.authorization_servers or ()),
        scopes=tuple(o.scopes),
        algorithms=tuple(o.algorithms) if o.algorithms else DEFAULT_ALGORITHMS,
        leeway_s=float(o.leeway_seconds),
        jwks_ttl_s=float(o.jwks_cache_seconds),
        jwks_stale_s=float(o.jwks_stale_seconds),
        introspection_ttl_s=float(o.introspection_cache_seconds),
        timeout_s=o.timeout_ms / 1000,
        introspections_per_minute=float(o.introspections_per_minute),
        dpop_nonce=o.dpop_nonce,
    )
    rules = tuple(
        ClientRule(
            name=c.name,
            subject=c.oauth.subject,
            client_id=c.oauth.client_id,
            claims=dict(c.oauth.claims),
            scopes=tuple(c.oauth.scopes),
        )
        for c in doc.clients
        if c.oauth is not None
    )
    return settings, rules


def _server_lock(path: Path, server: str) -> tuple[ServerLock, float, float]:
    """The server's pins (none when the file or the server is missing: all withheld), the
    file's modification time (-1 when missing) for the watcher, and when the pins were approved
    (the lock's `approvedAt`, else that modification time)."""
    from ..pinning import read_lock

    try:
        mtime = path.stat().st_mtime
    except OSError:
        return ServerLock(tools={}, instructions=None), -1.0, -1.0
    lock = read_lock(path)
    approved = mtime if lock.approved_at is None else lock.approved_at
    if server not in lock.servers:
        return ServerLock(tools={}, instructions=None), mtime, approved
    return lock.server(server), mtime, approved


def _user() -> str:
    try:
        return getpass.getuser()[:64] or "user"
    except Exception:  # no user name in this environment
        return "user"
