"""The console in front of an HTTP gateway: `/console/...` goes to the console, the rest to `/mcp`."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from ._app import ConsoleSettings, console_app
from ._auth import OAuthOperators, loopback_host
from ._live import LiveCalls
from ._pins import PinBoard

__all__ = ["console_for"]


class _Split:
    """ASGI: paths under `/console` to the console, everything else to the gateway as before."""

    def __init__(self, console: Any, app: Any) -> None:
        self.console = console
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        if path == "/console" or path.startswith("/console/"):
            await self.console(scope, receive, send)
            return
        await self.app(scope, receive, send)


def console_for(gateway: Any, app: Any, *, host: str) -> tuple[Any, Callable[[], None]]:
    """`app` with the gateway's console mounted at `/console/` (its operators, its approval
    route, its journal, its identities' live calls), and what closes it.

    `gateway` is an `OpenGateway` with `operators`; its core's `operators` (the approval route)
    gives the approval rows and wakes a call decided here at once.
    """
    route = getattr(gateway.core, "operators", None)
    live = LiveCalls()
    names: dict[int, list[str]] = {}
    runtimes: dict[int, Any] = {}
    for name, identity in gateway.identities.items():
        names.setdefault(id(identity.runtime), []).append(name)
        runtimes[id(identity.runtime)] = identity.runtime
    for key, runtime in runtimes.items():  # identities sharing a runtime share its label
        live.watch(runtime, " or ".join(sorted(names[key])))
    settings = ConsoleSettings(
        operators=gateway.operators,
        approvals=getattr(route, "store", None),
        journal=gateway.journal_location,
        loopback_only=loopback_host(host),
        where=f"gateway {gateway.name}",
        identities=sorted(gateway.identities),
        live=live,
        on_decided=getattr(route, "decided", None),
        pins=PinBoard(sources) if (sources := gateway.pin_sources()) else None,
        oauth=_oauth_operators(gateway, app),
    )
    return _Split(console_app(settings), app), live.close


def _oauth_operators(gateway: Any, app: Any) -> OAuthOperators | None:
    """Operators by OAuth token: the gateway's `console.scopes`, checked by the verifier of its
    OAuth door (`app`, its `OAuthGate`: one key-set cache and introspection cache for both)."""
    scopes = tuple(getattr(gateway, "console_scopes", ()))
    verifier = getattr(app, "verifier", None)
    if not scopes or verifier is None:
        return None
    return OAuthOperators(verifier, scopes)
