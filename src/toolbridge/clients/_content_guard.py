"""Keep tool results whose content the SDK's types do not know.

The SDK validates every `tools/call` result against its content-block union (text, image, audio,
resource_link, embedded resource). A block of a kind from a later protocol revision, or a
malformed block, would make the whole call fail, although toolbridge's contract is to pass such a
content array through untouched for the agent to serialize.

So each connection's dispatcher is wrapped: for a `tools/call` result whose content holds a block
the SDK would refuse, the original array is stashed under `_meta[RAW_CONTENT_META]` and the SDK is
shown harmless empty text blocks in its place; `restore_raw_content` (used when the result is
turned into its wire-form dict) puts the original array back and removes the stash. Nothing else
about the result changes, and results with only well-formed known blocks are not touched.

The same wrapper sees every `tools/list` result before the SDK validates it
(`repair_tool_listing`): a tool listed without an `inputSchema` (or with `null`) gets the open
object schema, the default toolbridge documents for a tool that declares no parameters; a tool
the SDK would still refuse is left out of the listing (reported to a callback), so one bad
definition does not hide the server's other tools. The SDK checks a listing twice: against the
wire model of the negotiated protocol revision (stricter: an `inputSchema` whose `type` is not
`"object"`, list-valued `properties`, a string `required`, ...) and against its version-free
`Tool`; each entry is checked against both, on its own. And it counts the `subscriptions/listen`
requests in flight, so that a closing connection can wait until the SDK has abandoned its change
stream (`wait_listens_done`).

On a 2026-07-28 connection every result must carry `resultType`, and the SDK refuses one without
it. Some servers leave it out of a finished result (the conformance suite's own reference server
does, for its tool results sent as an event stream); the wrapper reads a result without it as
`"complete"` (what the revision's default reading of a finished answer is), so such a server's
answers are used instead of failing every call. A result that says what it is is never touched.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import mcp_types as types
import mcp_types.methods as _methods
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ..telemetry import with_context
from ._stdio_transport import validation_detail

if TYPE_CHECKING:
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import CallOptions, Dispatcher
    from mcp.shared.transport_context import TransportContext

__all__ = [
    "OPEN_INPUT_SCHEMA",
    "RAW_CONTENT_META",
    "PreservingDispatcher",
    "guard_dispatcher_of",
    "preserve_unknown_content",
    "repair_tool_listing",
    "restore_raw_content",
]

OPEN_INPUT_SCHEMA: Mapping[str, object] = {"type": "object", "additionalProperties": True}
"""The `inputSchema` given to a listed tool that has none: any object."""

RAW_CONTENT_META = "io.toolbridge/rawContent"
"""The `_meta` key under which an untouched content array travels past the SDK's validation."""

_REQUIRED_STRINGS: Mapping[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}


def _sdk_accepts(block: object) -> bool:
    """A cheap check of whether the SDK's content union would take this block."""
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind == "resource":
        resource = block.get("resource")
        return (
            isinstance(resource, Mapping)
            and isinstance(resource.get("uri"), str)
            and (isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str))
        )
    fields = _REQUIRED_STRINGS.get(kind) if isinstance(kind, str) else None
    return fields is not None and all(isinstance(block.get(name), str) for name in fields)


def _all_accepted(content: list[object]) -> bool:
    """Whether the SDK would take every block (text blocks, the common case, checked inline)."""
    for block in content:
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
            continue
        if not _sdk_accepts(block):
            return False
    return True


def preserve_unknown_content(raw: dict[str, object]) -> dict[str, object]:
    """Stash a content array the SDK would refuse; return `raw` itself when there is none."""
    content = raw.get("content")
    if not isinstance(content, list) or _all_accepted(content):
        return raw
    meta = raw.get("_meta")
    stash = dict(meta) if isinstance(meta, Mapping) else {}
    stash[RAW_CONTENT_META] = content
    shown = [block if _sdk_accepts(block) else {"type": "text", "text": ""} for block in content]
    return {**raw, "content": shown, "_meta": stash}


def restore_raw_content(wire: dict[str, object]) -> dict[str, object]:
    """Put a stashed content array back in a wire-form result dict (in place; also returned)."""
    meta = wire.get("_meta")
    if not isinstance(meta, dict) or RAW_CONTENT_META not in meta:
        return wire
    wire["content"] = meta.pop(RAW_CONTENT_META)
    if not meta:
        del wire["_meta"]
    return wire


def _tool_name(entry: object) -> str:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return name[:200] if isinstance(name, str) else "(no name)"


SDK_FALLBACK_VERSION = "2025-11-25"
"""The revision the SDK checks results against before one is negotiated (as the SDK does)."""


@functools.cache
def _wire_tool_model(version: str) -> type[BaseModel] | None:
    """The `Tool` model of `version`'s `tools/list` wire surface (None: a revision unknown here)."""
    row = _methods.SERVER_RESULTS.get(("tools/list", version))
    field = row.model_fields.get("tools") if isinstance(row, type) and issubclass(row, BaseModel) else None
    args = typing.get_args(field.annotation) if field is not None else ()
    model = args[0] if len(args) == 1 else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def repair_tool_listing(
    raw: dict[str, object], skipped: Callable[[str, str], None], version: str | None = None
) -> dict[str, object]:
    """A `tools/list` result the SDK will accept: defaults applied, refused tools left out.

    Each entry is checked on its own against the SDK's `Tool` models (the wire model of
    `version`, the negotiated protocol revision, default the SDK's own fallback; then the
    version-free one), so one bad entry never makes the SDK refuse the whole listing.

    Returns `raw` itself when every tool is fine (the common case). `skipped(name, reason)` is
    called for each tool left out (the name as listed, cut to 200 characters; the caller makes
    it safe to show).
    """
    listed = raw.get("tools")
    if not isinstance(listed, list):
        return raw  # the listing as a whole is broken: the SDK reports it
    wire = _wire_tool_model(version or SDK_FALLBACK_VERSION)
    kept: list[object] = []
    changed = False
    for entry in listed:
        tool = entry
        if isinstance(entry, dict) and entry.get("inputSchema") is None:
            tool = {**entry, "inputSchema": dict(OPEN_INPUT_SCHEMA)}
            changed = True
        try:
            if wire is not None:
                wire.model_validate(tool, by_name=False)
            types.Tool.model_validate(tool, by_name=False)
        except ValidationError as exc:
            skipped(_tool_name(entry), validation_detail(exc))
            changed = True
            continue
        kept.append(tool)
    return {**raw, "tools": kept} if changed else raw


class PreservingDispatcher:
    """Delegates everything to the SDK dispatcher it wraps; guards `tools/call` and `tools/list`
    results, and counts `subscriptions/listen` requests in flight (see the module docstring).

    Args:
        inner: the SDK's dispatcher.
        tool_skipped: told `(name, reason)` of each listed tool left out (default: nobody).
        version: gives the negotiated protocol revision (default: the SDK's fallback).
    """

    def __init__(
        self,
        inner: Dispatcher[TransportContext],
        tool_skipped: Callable[[str, str], None] | None = None,
        version: Callable[[], str | None] | None = None,
    ) -> None:
        self._inner = inner
        # The SDK's JSON-RPC dispatcher puts the trace context into every request's `_meta`; the
        # in-process direct dispatcher does not, so this wrapper does it there.
        self._add_context = not isinstance(inner, JSONRPCDispatcher)
        self._tool_skipped = tool_skipped or (lambda name, reason: None)
        self._version = version or (lambda: None)
        self._listens = 0
        self._listens_done = anyio.Event()
        self._listens_done.set()

    @property
    def inner(self) -> Dispatcher[TransportContext]:
        """The SDK dispatcher this one wraps."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send_raw_request(
        self, method: str, params: Mapping[str, object] | None, opts: CallOptions | None = None
    ) -> dict[str, object]:
        if self._add_context:
            params = with_context(params)
        if method == "subscriptions/listen":
            return await self._listen(method, params, opts)
        raw: dict[str, object] = await self._inner.send_raw_request(method, params, opts)
        if "resultType" not in raw and self._version() in MODERN_PROTOCOL_VERSIONS:
            raw = {**raw, "resultType": "complete"}  # a finished answer that did not say so
        if method == "tools/call":
            content = raw.get("content")
            if type(content) is list:  # the common case, checked here: only plain text blocks
                for block in content:
                    if (
                        type(block) is not dict
                        or block.get("type") != "text"
                        or type(block.get("text")) is not str
                    ):
                        return preserve_unknown_content(raw)
                return raw
            return preserve_unknown_content(raw)
        if method == "tools/list":
            return repair_tool_listing(raw, self._tool_skipped, self._version())
        return raw

    async def _listen(
        self, method: str, params: Mapping[str, object] | None, opts: CallOptions | None
    ) -> dict[str, object]:
        if self._listens == 0:
            self._listens_done = anyio.Event()
        self._listens += 1
        try:
            raw: dict[str, object] = await self._inner.send_raw_request(method, params, opts)
            return raw
        finally:
            # Reached after the SDK's own cancellation handling: the request is abandoned.
            self._listens -= 1
            if self._listens == 0:
                self._listens_done.set()

    async def wait_listens_done(self, timeout: float) -> None:  # noqa: ASYNC109 - a bounded wait
        """Wait (at most `timeout` seconds, shielded) until no `subscriptions/listen` is in flight."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
            await self._listens_done.wait()
            # One more turn of the event loop: the transport acts on the abandonment it was handed.
            await anyio.lowlevel.checkpoint()


def guard_dispatcher_of(
    session: ClientSession, tool_skipped: Callable[[str, str], None]
) -> tuple[Dispatcher[TransportContext] | None, PreservingDispatcher | None]:
    """Wrap an SDK session's dispatcher in a `PreservingDispatcher` (once).

    Returns:
        The SDK's own dispatcher (the wrapped one) and the wrapper; (None, None) when the session
        has no dispatcher.
    """
    dispatcher = getattr(session, "_dispatcher", None)
    if isinstance(dispatcher, PreservingDispatcher):
        return dispatcher.inner, dispatcher
    if dispatcher is None:
        return None, None

    def version() -> str | None:
        negotiated = getattr(session, "protocol_version", None)
        return negotiated if isinstance(negotiated, str) else None

    guard = PreservingDispatcher(dispatcher, tool_skipped=tool_skipped, version=version)
    session._dispatcher = guard
    return dispatcher, guard
