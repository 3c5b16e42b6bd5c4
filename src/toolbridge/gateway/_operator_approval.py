"""Approvals that wait for a person at the console, for clients that cannot be asked.

With a `console:` on the `Gateway`, a call that needs approval from a client without
elicitation (the MCP Inspector, many desktop and agent clients) is no longer refused at once:
it becomes a pending approval (`toolbridge.console.ApprovalStore`: a row beside the journal,
seen by every console over that journal, every replica's included) and the call waits until an
operator decides it, at most `approvalTimeoutMs`. Elicitation stays first wherever the client
supports it.

- **Approved**: the call goes on, governed as any other.
- **Denied**: refused `PERMISSION_DENIED` (`approval denied by operator NAME`, with the
  operator's reason when given); nothing is sent.
- **No decision in time**: refused `APPROVAL_TIMEOUT`, never a yes; the row is `timed_out`.
- **The client cancels, or the store fails**: the row is withdrawn (`cancelled`) where it can be;
  the call is refused (`approval could not be asked`) or cancelled.

While it waits, a client that sent a progress token hears `notifications/progress` about once a
second ("waiting for an operator's approval"). A decision made in this process wakes the call at
once; one made by another replica is seen at the next look (`POLL_S`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from ..console import Approval, ApprovalStore
from ..errors import ToolbridgeError, bounded
from ..sanitize import visible_text
from ._rounds import arguments_digest

if TYPE_CHECKING:
    from ._upstream import CallContext

__all__ = ["NOT_DECIDED", "POLL_S", "OperatorApprovals", "can_elicit"]

log = logging.getLogger("toolbridge.gateway")

POLL_S = 0.5
"""How often a waiting call looks at its row (a decision here wakes it at once)."""
PROGRESS_S = 1.0
NOT_DECIDED = "approval not given in time: no operator decided"
"""The refusal of a call whose approval timed out (code `APPROVAL_TIMEOUT`)."""
WAITING = "waiting for an operator's approval"


def can_elicit(context: CallContext) -> bool:
    """Whether the person at the client can be asked (it declared elicitation and, in the
    handshake era, its session can carry a request)."""
    caps = context.capabilities
    if caps is None or caps.elicitation is None:
        return False
    return context.modern or (context.session is not None and context.session.can_send_request)


def verdict(row: Approval | None) -> str | None:
    """None for an approval, else the refusal's reason."""
    if row is None:
        return "approval could not be asked"
    if row.status == "approved":
        return None
    if row.status == "timed_out":
        return NOT_DECIDED
    if row.status == "denied":
        who = visible_text(bounded(row.decided_by or "?", 100))
        why = f": {visible_text(bounded(row.reason, 300))}" if row.reason else ""
        return f"approval denied by operator {who}{why}"
    return "approval could not be asked"


@dataclass
class OperatorApprovals:
    """The console's approval route of one gateway (see the module docstring)."""

    store: ApprovalStore
    gateway: str
    poll_s: float = POLL_S
    _woken: dict[str, anyio.Event] = field(default_factory=dict, repr=False)

    async def wait(
        self,
        context: CallContext,
        tool: str,
        server: str,
        effects: str,
        arguments: Mapping[str, object],
        timeout_s: float,
    ) -> str | None:
        """Ask the operators and wait: None when approved, else why not (`NOT_DECIDED` for a
        timeout). Cancellation withdraws the row and propagates."""
        identity = context.identity.name
        try:
            row = await self.store.ask(
                gateway=self.gateway,
                identity=identity,
                server=server,
                tool=tool,
                effects=effects,
                arguments=arguments,
                args_sha256=arguments_digest(tool, arguments),
                timeout_s=timeout_s,
            )
        except ToolbridgeError as exc:
            log.warning("an approval could not be stored: %s", bounded(str(exc), 200))
            return "approval could not be asked"
        log.info("approval %s of %r for %r waits for an operator", row.id, bounded(tool, 100), identity)
        woken = self._woken[row.id] = anyio.Event()
        start = time.monotonic()
        deadline = start + timeout_s
        told = start
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                with anyio.move_on_after(min(self.poll_s, deadline - now)):
                    await woken.wait()
                current = await self.store.get(row.id)
                if current is None or current.status != "pending":
                    return verdict(current)
                now = time.monotonic()
                if context.progress is not None and now - told >= PROGRESS_S:
                    told = now
                    await context.progress(round(now - start, 1), timeout_s, WAITING)
            if await self.store.expire(row.id):
                return NOT_DECIDED
            return verdict(await self.store.get(row.id))  # decided at the last moment
        except ToolbridgeError as exc:
            log.warning("approval %s could not be read: %s", row.id, bounded(str(exc), 200))
            await self._withdraw(row.id)
            return "approval could not be asked"
        except BaseException:
            await self._withdraw(row.id)
            raise
        finally:
            self._woken.pop(row.id, None)

    async def _withdraw(self, approval_id: str) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                await self.store.withdraw(approval_id)
            except ToolbridgeError:
                log.info("approval %s could not be withdrawn", approval_id)

    def decided(self, approval_id: str) -> None:
        """Wake the call waiting on `approval_id` in this process, if any (after a decision)."""
        woken = self._woken.get(approval_id)
        if woken is not None:
            woken.set()
