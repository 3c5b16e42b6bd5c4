"""The gateway's 2026-07-28 input rounds and its approval question.

**Rounds.** A 2026-07-28 client cannot be sent requests; a call that needs its input (the
gateway's approval, or what the upstream asks in an `InputRequiredResult`) is answered with an
`InputRequiredResult`, and the client retries the call with `input_responses` and the
`request_state` it was given. The gateway's `request_state` is sealed (`RoundStates`): an HMAC
under a key of the gateway process over the identity, the tool, the digest of the exact
arguments, a single-use nonce, an expiry (`ROUND_TTL_S`), the round number (at most
`MAX_ROUNDS`), whether the approval was given, and the upstream's own `request_state` (kept
byte for byte and passed back upstream). A state that fails any check, has expired, or was
already used is not honoured: a call that needs approval is asked again, any other is refused
with -32602. Used nonces are remembered until they expire (at most `MAX_NONCES`).

**Replicas.** Alone, the key and the used nonces are the process's own. Replicas on one
PostgreSQL journal share both (`share`, from `_replica_state`): the key derived from the
replicas' secret, each nonce used once across all of them, so a client's retry may land on any
replica. A round whose call is held suspended in one process (`_suspend`: a handshake-era
upstream asking mid-call) can only be resumed there; elsewhere it is not honoured ("held by
another gateway process"), as the state names its process.

**The approval question** (`approval_message`) names the tool, its server and its effects, and
shows every argument: a value whose JSON fits in `INLINE_CHARS` inline, a longer one as its size,
its SHA-256 digest (first 16 hex digits), its first and last characters, and then every argument
in full below. Control and invisible characters are shown as escapes (`visible_text`), never
dropped. Arguments whose JSON exceeds `MAX_SHOWN_CHARS` cannot be shown whole, so a call with
them cannot be approved (`approval_refusal`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from .._canonical import canonical_json
from ..content import to_json_text
from ..sanitize import clean_text, visible_text

__all__ = [
    "APPROVAL_KEY",
    "APPROVAL_SCHEMA",
    "INLINE_CHARS",
    "MAX_NONCES",
    "MAX_ROUNDS",
    "MAX_SHOWN_CHARS",
    "ROUND_TTL_S",
    "Round",
    "RoundStates",
    "approval_message",
    "arguments_digest",
    "too_large_to_show",
]

APPROVAL_KEY = "toolbridge/approval"
"""The key of the approval in a 2026-07-28 `InputRequiredResult` (and of its answer)."""

APPROVAL_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this call", "default": False}},
    "required": ["approve"],
}

MAX_ROUNDS = 10
"""The most input rounds one call may take through the gateway."""

ROUND_TTL_S = 600.0
"""How long a client has to answer one round (seconds)."""

MAX_NONCES = 50_000
"""Used nonces remembered at most (until their expiry); past it a round is not honoured."""

MAX_UPSTREAM_STATE = 65_536
"""The longest upstream `request_state` the gateway keeps for a client (characters)."""

INLINE_CHARS = 200
"""An argument whose JSON is longer is summarised on its line (and shown in full below)."""

MAX_SHOWN_CHARS = 65_536
"""The longest arguments (JSON) an approval question can show in full."""


def arguments_digest(tool: str, arguments: Mapping[str, object]) -> str:
    """SHA-256 over the tool's name and its exact arguments (canonical JSON), hex."""
    return hashlib.sha256(canonical_json({"tool": tool, "arguments": dict(arguments)})).hexdigest()


@dataclass(frozen=True)
class Round:
    """What a verified `request_state` says about the call being resumed."""

    number: int
    approved: bool
    upstream_state: str | None
    upstream_asked: bool
    """The round was the upstream's (its answers and state go back upstream)."""
    suspended: str | None = None
    """The suspended call whose question the round was (`_suspend`)."""


Claim = Callable[[str, float, float], Awaitable[bool]]
"""Marks a round's nonce used until an expiry, at a time; False if it was used (`share`)."""


@dataclass
class RoundStates:
    """Seals and checks the gateway's `request_state` (see the module docstring)."""

    ttl_s: float = ROUND_TTL_S
    max_nonces: int = MAX_NONCES
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _used: dict[str, float] = field(default_factory=dict, repr=False)
    _claim: Claim | None = field(default=None, repr=False)
    _process: str = field(default_factory=lambda: secrets.token_urlsafe(9), repr=False)

    def share(self, key: bytes, claim: Claim) -> None:
        """Seal with `key` and mark nonces used through `claim`, as every replica does."""
        self._key, self._claim = key, claim

    def seal(
        self,
        identity: str,
        tool: str,
        digest: str,
        *,
        number: int,
        approved: bool,
        upstream: str | None,
        asked: bool = False,
        suspended: str | None = None,
    ) -> str:
        body = {
            "i": identity,
            "t": tool,
            "a": digest,
            "n": secrets.token_urlsafe(16),
            "x": time.time() + self.ttl_s,
            "r": number,
            "ok": approved,
            "u": upstream,
            "w": asked,
            "s": suspended,
            "p": self._process if suspended is not None else None,
        }
        payload = base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()
        return f"{payload}.{self._mac(payload)}"

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    async def open(self, state: object, identity: str, tool: str, digest: str) -> tuple[Round | None, str]:
        """The round `state` resumes, or None and why it is not honoured. A state is used once.

        Raises:
            SharedStateUnavailable: (replicas) the shared marks did not answer.
        """
        if not isinstance(state, str) or len(state) > 4 * MAX_UPSTREAM_STATE:
            return None, "malformed"
        payload, _, mac = state.rpartition(".")
        if not payload or not hmac.compare_digest(mac.encode(), self._mac(payload).encode()):
            return None, "not the gateway's"
        try:
            body = json.loads(base64.urlsafe_b64decode(payload.encode()))
        except ValueError:
            return None, "malformed"
        if not isinstance(body, dict):
            return None, "malformed"
        if body.get("i") != identity or body.get("t") != tool or body.get("a") != digest:
            return None, "issued for another call"
        now = time.time()
        expiry = body.get("x")
        if not isinstance(expiry, int | float) or expiry < now:
            return None, "expired"
        nonce = body.get("n")
        number, upstream = body.get("r"), body.get("u")
        suspended = body.get("s")
        if (
            not isinstance(nonce, str)
            or not isinstance(number, int)
            or not (upstream is None or isinstance(upstream, str))
            or not (suspended is None or isinstance(suspended, str))
        ):
            return None, "malformed"
        if suspended is not None and body.get("p") != self._process:
            return None, "held by another gateway process"
        if self._claim is not None:
            if not await self._claim(nonce, float(expiry), now):
                return None, "already used"
        else:
            if nonce in self._used:
                return None, "already used"
            if len(self._used) >= self.max_nonces:
                self._used = {n: x for n, x in self._used.items() if x >= now}
                if len(self._used) >= self.max_nonces:
                    return None, "too many rounds pending"
            self._used[nonce] = float(expiry)
        return Round(number, body.get("ok") is True, upstream, body.get("w") is True, suspended), ""


def _json(value: object) -> str:
    return visible_text(to_json_text(value))


def too_large_to_show(arguments: Mapping[str, object]) -> bool:
    """Whether the arguments' JSON exceeds `MAX_SHOWN_CHARS` (such a call cannot be approved)."""
    return len(to_json_text(dict(arguments))) > MAX_SHOWN_CHARS


def approval_message(tool: str, server: str, effects: str, arguments: Mapping[str, object]) -> str:
    """The approval question (see the module docstring)."""
    lines = [
        f"Allow `{visible_text(tool)}` of server `{visible_text(server)}` ({effects}) with these arguments?"
    ]
    long_values = False
    for key, value in arguments.items():
        shown = _json(value)
        name = visible_text(str(key))
        if len(shown) <= INLINE_CHARS:
            lines.append(f"- {name}: {shown}")
            continue
        long_values = True
        digest = hashlib.sha256(canonical_json(value)).hexdigest()[:16]
        lines.append(
            f"- {name}: {len(shown):,} characters, SHA-256 {digest}; "
            f"starts {shown[:60]} … ends {shown[-120:]} (shown in full below)"
        )
    if not arguments:
        lines.append("(no arguments)")
    if long_values:
        lines.append("")
        lines.append("Every argument in full:")
        lines.append(visible_text(json.dumps(dict(arguments), ensure_ascii=False, indent=1), multiline=True))
    return clean_text("\n".join(lines))
