"""Small parts of a client's call path kept out of `_base`: one call's rolling deadline, and what
is settled once a connection's protocol is negotiated (the note said when `auto` falls back to
the handshake; the capabilities of a connection pinned to a 2026-era version)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .._deadlines import DeadlineWatch, deadline_watch

__all__ = ["RollingDeadline", "finish_rounds", "note_fallback", "resend_after", "settle_protocol"]


def _round(sdk: Client, name: str, arguments: dict[str, Any], progress: ProgressFnT | None) -> Any:
    """One round of a call, as `mcp.Client.call_tool` sends it: `round(responses, state)`
    returns the session's call (no coroutine layer of its own)."""
    session = sdk.session

    def send(responses: Any, state: str | None) -> Awaitable[Any]:
        return session.call_tool(
            name, arguments, progress_callback=progress, input_responses=responses, request_state=state,
            allow_input_required=True,
        )  # fmt: skip

    return send


async def resend_after(
    error: MCPError, sdk: Client, name: str, arguments: dict[str, Any], progress: ProgressFnT | None
) -> Any:
    """A call the server refused with `error`, sent again after relisting the tools when `error`
    is a 2026-07-28 `HEADER_MISMATCH` (the spec's recovery, as `mcp.Client.call_tool` makes
    it); `error` itself is raised otherwise, and when relisting fails.

    The common path of a call (toolbridge's `call_tool`) sends to the SDK's session directly,
    not through `mcp.Client.call_tool`'s three coroutine layers (each paid again at every
    suspension of the call: 12 Python calls); this and `finish_rounds` are what those layers
    did in the rare cases.
    """
    await _relist_after(sdk, name, error)
    return await _round(sdk, name, arguments, progress)(None, None)


async def finish_rounds(
    first: Any, sdk: Client, name: str, arguments: dict[str, Any], progress: ProgressFnT | None
) -> types.CallToolResult:
    """A call whose first answer is not a `CallToolResult` (a 2026-07-28 `InputRequiredResult`),
    driven by the SDK client's handlers to its end, as `mcp.Client.call_tool` drives it (each
    round relists and resends once after a `HEADER_MISMATCH`)."""
    send = _round(sdk, name, arguments, progress)

    async def again(responses: Any, state: str | None) -> Any:
        try:
            return await send(responses, state)
        except MCPError as mismatch:
            await _relist_after(sdk, name, mismatch)
            return await send(responses, state)

    return cast(types.CallToolResult, await sdk._drive_input_required(first, again))


async def _relist_after(sdk: Client, name: str, error: MCPError) -> None:
    """After a call's `error`: relist the tools when it is a 2026-07-28 `HEADER_MISMATCH` (the
    spec's recovery, as `mcp.Client.call_tool` makes it); else, or when relisting fails, raise
    `error`."""
    if error.code != HEADER_MISMATCH or sdk.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise error
    try:
        with anyio.fail_after(sdk.read_timeout_seconds):
            await sdk._relist_tool(name)  # the SDK client's own relisting
    except (MCPError, TimeoutError, ValidationError) as relist_error:
        raise error from relist_error


class RollingDeadline:
    """One call's deadline: `limit` seconds from now, pushed back by each progress notification,
    and never later than the caller's own deadline (`caller`, event-loop time) when one is given.

    `arm(scope)` gives the cancel scope of one attempt the deadline (a retry on a new session
    shares it) and `disarm(scope)` takes it back before the scope exits; the event loop's
    `DeadlineWatch` cancels the scope when the deadline passes (one timer for every call, not
    one each). `callback` is what the SDK gets as the call's progress callback: it moves the
    client's deadline to `limit` seconds after the notification (the caller's never moves), then
    hands the notification to the caller's own handler. With neither a limit nor a caller's
    deadline there is no deadline, and `callback` is the caller's handler itself.

    `caller_first` tells, once the scope was cancelled, whose deadline it was: the caller's when
    it was not later than the client's (a tie goes to the caller, as it did when the caller had
    a cancel scope of its own around the client's).
    """

    __slots__ = ("_at", "_caller", "_progress", "_scope", "_watch", "callback", "limit", "scope_class")

    def __init__(self, limit: float | None, progress: Any, caller: float | None = None) -> None:
        self.limit = limit
        self._progress = progress
        self._scope: anyio.CancelScope | None = None
        self._caller = math.inf if caller is None else caller
        if limit is None and caller is None:
            self._watch: DeadlineWatch | None = None
            self._at = math.inf
            self.callback = cast(ProgressFnT | None, progress)
            self.scope_class: type[anyio.CancelScope] = anyio.CancelScope
            return
        self._watch = watch = deadline_watch()
        self._at = math.inf if limit is None else asyncio.get_running_loop().time() + limit
        self.callback = cast(ProgressFnT | None, progress) if limit is None else self._on_progress
        self.scope_class = watch.scope_class  # the loop's class: no backend lookup per call

    @property
    def caller_first(self) -> bool:
        """Whether the caller's deadline is the one that ends the call (see the class)."""
        return self._caller != math.inf and self._caller <= self._at

    def arm(self, scope: anyio.CancelScope) -> None:
        """Make the deadline `scope`'s (entered, for one attempt)."""
        self._scope = scope
        if self._watch is not None:
            self._watch.arm(scope, min(self._at, self._caller))

    def disarm(self, scope: anyio.CancelScope) -> None:
        """Take the deadline back from `scope` (before it exits)."""
        if self._watch is not None:
            self._watch.disarm(scope)

    async def _on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        assert self.limit is not None and self._watch is not None
        self._at = max(self._at, anyio.current_time() + self.limit)
        if self._scope is not None:
            self._watch.move(self._scope, min(self._at, self._caller))
        if self._progress is not None:
            await self._progress(progress, total, message)


def note_fallback(logger: logging.Logger, mode: str, described: str, protocol_version: str | None) -> None:
    """Say (at INFO, never as a warning) that `auto` fell back to the handshake, and how to skip it.

    The fallback is expected with servers of the 2025 era; some of them log a validation error of
    their own for the probe, which `mode="legacy"` avoids.
    """
    if mode == "auto" and protocol_version not in MODERN_PROTOCOL_VERSIONS:
        logger.info(
            "%s does not offer server/discover; using the initialize handshake (%s). "
            "mode 'legacy' skips the probe",
            described,
            protocol_version,
        )


async def settle_protocol(logger: logging.Logger, mode: str, described: str, sdk: Any) -> None:
    """What follows the negotiation of a freshly entered SDK client `sdk`.

    `auto` that fell back to the handshake is noted (`note_fallback`). A connection pinned to a
    2026-era version (`mode` is that version) was adopted by the SDK without asking the server,
    so it knows none of the server's capabilities (the SDK fills in empty ones, and a server's
    resources and prompts would go unseen): `server/discover` is asked once, and its answer is
    adopted, at the pinned version, when the server offers that version. A server that cannot
    answer keeps the pinned connection as it was (said at INFO).
    """
    if mode not in MODERN_PROTOCOL_VERSIONS:
        note_fallback(logger, mode, described, sdk.protocol_version)
        return
    session = sdk.session
    try:
        found = types.DiscoverResult.model_validate(await session.send_discover(mode))
    except Exception as exc:  # no discover: the pinned version stands, with the SDK's defaults
        logger.info("%s: server/discover was not answered (%s); capabilities unknown", described, exc)
        return
    if mode in found.supported_versions:
        session.adopt(found.model_copy(update={"supported_versions": [mode]}))
