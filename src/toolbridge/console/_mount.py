"""The console in front of an HTTP gateway: `/console/...` goes to the console, the rest to `/mcp`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from starlette.types import ASGIApp, Receive, Scope, Send

from ..runtime import Runtime
from ._app import ConsoleSettings, console_app
from ._approvals import ApprovalStore
from ._auth import OAuthOperators, TokenVerifier, loopback_host
from ._live import LiveCalls
from ._pins import PinBoard, Source

__all__ = ["ApprovalRoute", "ServedGateway", "console_for"]


class _Split:
    """ASGI: paths under `/console` to the console, everything else to the gateway as before."""

    def __init__(self, console: ASGIApp, app: ASGIApp) -> None:
        self.console = console
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        if path == "/console" or path.startswith("/console/"):
            await self.console(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ApprovalRoute(Protocol):
    """The gateway's approval route, as the console uses it (`gateway._operator_approval`)."""

    store: ApprovalStore

    def decided(self, approval_id: str) -> None: ...


class _Core(Protocol):
    @property
    def operators(self) -> ApprovalRoute | None: ...


class _Identity(Protocol):
    @property
    def runtime(self) -> Runtime: ...


class ServedGateway(Protocol):
    """What the console reads of the open gateway it is mounted in (`gateway.OpenGateway`)."""

    @property
    def name(self) -> str: ...
    @property
    def core(self) -> _Core: ...
    @property
    def identities(self) -> Mapping[str, _Identity]: ...
    @property
    def operators(self) -> Mapping[str, str]: ...
    @property
    def console_scopes(self) -> tuple[str, ...]: ...
    @property
    def journal_location(self) -> str | None: ...

    def pin_sources(self) -> list[Source]: ...


@runtime_checkable
class _Verifying(Protocol):
    """The gateway's OAuth door (`OAuthGate`): its verifier checks the console's tokens too."""

    @property
    def verifier(self) -> TokenVerifier: ...


def console_for(gateway: ServedGateway, app: ASGIApp, *, host: str) -> tuple[ASGIApp, Callable[[], None]]:
    """`app` with the gateway's console mounted at `/console/` (its operators, its approval
    route, its journal, its identities' live calls), and what closes it.

    `gateway` is an `OpenGateway` with `operators`; its core's `operators` (the approval route)
    gives the approval rows and wakes a call decided here at once.
    """
    route = gateway.core.operators
    live = LiveCalls()
    names: dict[int, list[str]] = {}
    runtimes: dict[int, Runtime] = {}
    for name, identity in gateway.identities.items():
        names.setdefault(id(identity.runtime), []).append(name)
        runtimes[id(identity.runtime)] = identity.runtime
    for key, runtime in runtimes.items():  # identities sharing a runtime share its label
        live.watch(runtime, " or ".join(sorted(names[key])))
    settings = ConsoleSettings(
        operators=gateway.operators,
        approvals=route.store if route is not None else None,
        journal=gateway.journal_location,
        loopback_only=loopback_host(host),
        where=f"gateway {gateway.name}",
        identities=sorted(gateway.identities),
        live=live,
        on_decided=route.decided if route is not None else None,
        pins=PinBoard(sources) if (sources := gateway.pin_sources()) else None,
        oauth=_oauth_operators(gateway, app),
    )
    return _Split(console_app(settings), app), live.close


def _oauth_operators(gateway: ServedGateway, app: ASGIApp) -> OAuthOperators | None:
    """Operators by OAuth token: the gateway's `console.scopes`, checked by the verifier of its
    OAuth door (`app`, its `OAuthGate`: one key-set cache and introspection cache for both)."""
    scopes = tuple(gateway.console_scopes)
    if not scopes or not isinstance(app, _Verifying):
        return None
    return OAuthOperators(app.verifier, scopes)
